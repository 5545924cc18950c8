package server

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// inboxRouting reads the policy record of an interrupt a rule left to people (its decision gate,
// require or ask; rules that approved or denied it leave nothing pending) and its deadline, with
// the time left from now; nil when no rule routed it.
func inboxRouting(it *store.Interrupt, now time.Time) *templates.InboxRouting {
	if len(it.Policy) == 0 {
		return nil
	}
	var rec struct {
		Rule      string `json:"rule"`
		Version   int    `json:"version"`
		Decision  string `json:"decision"`
		Reason    string `json:"reason"`
		Approvals int    `json:"approvals"`
		Role      string `json:"role"`
		Group     string `json:"group"`
		Escalate  string `json:"escalate"`
		Escalated bool   `json:"escalated"`
		From      string `json:"escalated_from"`
	}
	if json.Unmarshal(it.Policy, &rec) != nil || rec.Rule == "" {
		return nil
	}
	r := &templates.InboxRouting{Rule: rec.Rule, Version: rec.Version, Decision: rec.Decision, Reason: rec.Reason,
		Required: rec.Approvals, ExpiresAt: it.ExpiresAt}
	switch {
	case rec.Group != "" && rec.Role == "admin":
		r.Who = "admins"
	case rec.Group != "":
		r.Who = "members of group " + rec.Group
	case rec.Role == "admin":
		r.Who = "admins"
	}
	if !rec.Escalated {
		r.Escalate = rec.Escalate
	} else {
		r.EscalatedFrom = strings.TrimPrefix(rec.From, "group:")
		if r.EscalatedFrom == "" {
			r.EscalatedFrom = "any reviewer"
		}
	}
	if it.ExpiresAt != nil {
		switch left := it.ExpiresAt.Sub(now); {
		case left > 0:
			r.TimeLeft = humanAge(left) + " left"
		case r.Escalate != "":
			r.TimeLeft = "expired: being escalated"
		default:
			r.TimeLeft = "expired: being denied"
		}
	}
	return r
}

// withApprovers adds, for a rule that requires several approvals, who approved so far.
func (s *Server) withApprovers(ctx context.Context, it *store.Interrupt, r *templates.InboxRouting) error {
	if r == nil || r.Required < 2 {
		return nil
	}
	list, err := s.store.InterruptApprovals(ctx, it.ID)
	if err != nil {
		return err
	}
	for _, a := range list {
		r.Approvers = append(r.Approvers, a.Actor)
	}
	return nil
}
