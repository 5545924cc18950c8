package policy

import (
	"encoding/json"
	"strings"
)

// Past is a stored interrupt with what a person (or a policy) decided about it.
type Past struct {
	Case
	InterruptID string
	RunID       string
	// Status is the interrupt's status: pending, approved, edited, responded, denied, cancelled.
	Status     string
	ResolvedBy string
}

// Disagreement is a past interrupt the draft policy would have decided otherwise than it was.
type Disagreement struct {
	InterruptID string   `json:"interrupt_id"`
	RunID       string   `json:"run_id"`
	Action      string   `json:"action"`
	Tool        string   `json:"tool"`
	Input       any      `json:"input,omitempty"`
	Rule        string   `json:"rule"`
	Policy      Decision `json:"policy"`
	Status      string   `json:"status"`
	ResolvedBy  string   `json:"resolved_by,omitempty"`
}

// Report is what a draft policy would have done with past interrupts.
type Report struct {
	Interrupts int `json:"interrupts"`
	// Approve, Deny and Ask count the interrupts the policy would approve, deny, and leave to a
	// person (AskByRule of them routed by a rule, the rest matched by none).
	Approve   int `json:"approve"`
	Deny      int `json:"deny"`
	Ask       int `json:"ask"`
	AskByRule int `json:"ask_by_rule"`
	// Rules counts the interrupts each rule decided or routed.
	Rules map[string]int `json:"rules"`
	// Pending counts the interrupts still waiting for a person that the policy would decide.
	Pending int `json:"pending_decided"`
	// Disagreements are the decided interrupts the policy would have decided the other way: it
	// approves what a person denied, or denies what a person approved, edited or answered.
	Disagreements []Disagreement `json:"disagreements"`
	// Errors counts the evaluations that failed (such a rule does not match).
	Errors int `json:"errors"`
}

// WhatIf applies the decision rules of s to past interrupts, newest first as given.
func (s *Set) WhatIf(past []Past) *Report {
	r := &Report{Rules: map[string]int{}, Disagreements: []Disagreement{}}
	for _, p := range past {
		r.Interrupts++
		out := s.Decide(p.Case)
		r.Errors += len(out.Errors)
		if out.Rule != "" {
			r.Rules[out.Rule]++
		}
		switch out.Decision {
		case Approve:
			r.Approve++
		case Deny:
			r.Deny++
		default: // ask and require leave it to people
			r.Ask++
			if out.Rule != "" {
				r.AskByRule++
			}
			continue
		}
		if p.Status == "pending" {
			r.Pending++
			continue
		}
		if disagrees(out.Decision, p.Status) {
			r.Disagreements = append(r.Disagreements, Disagreement{
				InterruptID: p.InterruptID, RunID: p.RunID, Action: p.Action, Tool: p.Tool, Input: p.Input,
				Rule: out.Rule, Policy: out.Decision, Status: p.Status, ResolvedBy: p.ResolvedBy,
			})
		}
	}
	return r
}

func disagrees(d Decision, status string) bool {
	switch d {
	case Approve:
		return status == "denied"
	case Deny:
		return status == "approved" || status == "edited" || status == "responded"
	}
	return false
}

// DecodeJSON decodes stored JSON for a Case's fields; bad or empty JSON is nil.
func DecodeJSON(raw []byte) any {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}
