package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/store"
)

// PolicyActor is the audit actor of the decisions a policy makes.
const PolicyActor = "policy"

// gateRecheck is how long a compiled policy is used for the gates of tool calls before the store is
// asked whether a newer version is in force. Decisions on interrupts always use the version in
// force in their transaction.
const gateRecheck = 2 * time.Second

// policies caches the compiled policy in force, by version.
type policies struct {
	mu      sync.Mutex
	set     *policy.Set
	version int64
	checked time.Time
}

// policyAt returns the compiled policy whose version is v, compiling the stored source when the
// cached one is older. A stored version that does not compile (it was checked when saved, so a
// newer build refusing it) is logged and treated as the empty policy: everything is asked.
func (s *Service) policyAt(ctx context.Context, st *store.Store, v int64) (*policy.Set, error) {
	s.pol.mu.Lock()
	defer s.pol.mu.Unlock()
	if s.pol.set != nil && s.pol.version == v {
		s.pol.checked = time.Now()
		return s.pol.set, nil
	}
	set := &policy.Set{}
	if v > 0 {
		p, err := st.PolicyLatest(ctx)
		if err != nil {
			return nil, err
		}
		if set, err = policy.Parse([]byte(p.Source)); err != nil {
			s.log.Error("the policy in force does not compile; every interrupt waits for a person", "version", p.Version, "err", err)
			set = &policy.Set{}
		}
		set.Version, v = p.Version, p.Version
	}
	s.pol.set, s.pol.version, s.pol.checked = set, v, time.Now()
	return set, nil
}

// currentPolicy returns the policy in force as seen by st (in a transaction: its snapshot).
func (s *Service) currentPolicy(ctx context.Context, st *store.Store) (*policy.Set, error) {
	v, err := st.PolicyLatestVersion(ctx)
	if err != nil {
		return nil, err
	}
	return s.policyAt(ctx, st, v)
}

// gatePolicy returns the policy for gating tool calls, checked against the store at most every
// gateRecheck.
func (s *Service) gatePolicy(ctx context.Context) (*policy.Set, error) {
	s.pol.mu.Lock()
	fresh := s.pol.set != nil && time.Since(s.pol.checked) < gateRecheck
	set := s.pol.set
	s.pol.mu.Unlock()
	if fresh {
		return set, nil
	}
	return s.currentPolicy(ctx, s.store)
}

// gate reports whether a tool call must ask a person before the tool runs, and the metadata of the
// interrupt it raises: the tool asks for approval by its definition (loupe.RequireApproval), or a
// gate rule of the policy matches the call. A restarted call (approved or edited) runs.
func (s *Service) gate(ctx context.Context, run *store.Run, call *engine.ToolCall) (map[string]any, bool, error) {
	if call.Resumed != nil {
		return nil, false, nil
	}
	if call.Tool != nil {
		if d := call.Tool.Definition(); d != nil && d.Metadata[engine.MetaRequireApproval] == true {
			return map[string]any{
				"approval": "required",
				"message":  fmt.Sprintf("%s asks for approval before it runs", call.Name),
			}, true, nil
		}
	}
	set, err := s.gatePolicy(ctx)
	if err != nil || !set.HasGates() {
		return nil, false, err
	}
	var input, runInput any
	_ = json.Unmarshal(call.Input, &input)
	_ = json.Unmarshal(run.Input, &runInput)
	out, gated := set.Gate(policy.Case{Action: run.Action, Tool: call.Name, Input: input, RunInput: runInput, Labels: run.Labels})
	if !gated {
		return nil, false, nil
	}
	msg := out.Reason
	if msg == "" {
		msg = fmt.Sprintf("%s needs approval (policy rule %s)", call.Name, out.Rule)
	}
	return map[string]any{
		"approval": "required", "message": msg,
		"policy": map[string]any{"rule": out.Rule, "version": out.Version, "decision": "gate", "reason": out.Reason},
	}, true, nil
}

// applyPolicy runs in the transaction that stores a run's new interrupts: the policy in force
// decides each pending one it has a rule for, exactly as a reviewer's Resolve would (the same
// validation, resolution and audit entry, signed "policy <rule> v<version>"), and records the rule
// that routed the others. When none is left pending, the run is requeued in the same transaction:
// a crash anywhere before the commit leaves nothing decided, after it the resume is enqueued.
func (s *Service) applyPolicy(ctx context.Context, tx *store.Store, run *store.Run, created []*store.Interrupt) (bool, error) {
	set, err := s.currentPolicy(ctx, tx)
	if err != nil {
		return false, err
	}
	var runInput any
	_ = json.Unmarshal(run.Input, &runInput)
	decided := 0
	for _, it := range created {
		if it.Status != store.InterruptPending {
			continue
		}
		var input, md any
		_ = json.Unmarshal(it.Input, &input)
		_ = json.Unmarshal(it.Metadata, &md)
		out := set.Decide(policy.Case{Action: run.Action, Tool: it.Tool, Input: input, RunInput: runInput, Metadata: md, Labels: run.Labels})
		for _, e := range out.Errors {
			s.log.Warn("a policy rule failed on an interrupt and did not match", "run", run.ID, "interrupt", it.ID, "err", e)
		}
		if out.Rule == "" {
			continue
		}
		rec := map[string]any{"rule": out.Rule, "version": out.Version, "decision": out.Decision, "reason": out.Reason}
		if out.Decision == policy.Require {
			rec["approvals"] = out.Approvals
		}
		if out.Expires > 0 {
			rec["expires"] = out.Expires.String()
		}
		record, err := json.Marshal(rec)
		if err != nil {
			return false, err
		}
		if err := tx.InterruptSetPolicy(ctx, it.ID, record); err != nil {
			return false, err
		}
		if out.Decision != policy.Approve && out.Decision != policy.Deny {
			if out.Expires > 0 {
				if err := tx.InterruptSetExpiry(ctx, it.ID, out.Expires); err != nil {
					return false, err
				}
			}
			continue
		}
		p := ResolveParams{InterruptID: it.ID, Action: string(out.Decision), Actor: out.By(), Comment: out.Reason}
		res, err := s.resolution(ctx, run, it, p)
		var ve *ValidationError
		if errors.As(err, &ve) {
			// An interrupt that only asks cannot be approved: a person answers it.
			s.log.Warn("a policy rule cannot decide this interrupt; it waits for a person", "run", run.ID, "interrupt", it.ID, "rule", out.Rule, "err", err)
			continue
		}
		if err != nil {
			return false, err
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return false, fmt.Errorf("encode resolution: %w", err)
		}
		status, _ := statusFor(p.Action)
		if _, err := tx.InterruptResolve(ctx, store.InterruptResolveParams{
			ID: it.ID, Status: status, Resolution: raw, ResolvedBy: p.Actor, Comment: p.Comment,
		}); err != nil {
			return false, err
		}
		if err := tx.AuditInsert(ctx, PolicyActor, "interrupt."+p.Action, "interrupt", it.ID.String(), map[string]any{
			"run_id": it.RunID, "tool": it.Tool, "ref": it.Ref, "rule": out.Rule, "version": out.Version,
			"reason": out.Reason, "by": p.Actor, "resolution": res,
		}); err != nil {
			return false, err
		}
		decided++
	}
	if decided == 0 {
		return false, nil
	}
	pending, err := tx.InterruptCountPendingByRun(ctx, run.ID)
	if err != nil || pending > 0 {
		return false, err
	}
	if err := tx.RunRequeue(ctx, run.ID); err != nil {
		return false, err
	}
	return true, s.enqueue(ctx, tx, run)
}

// MaxWhatIf caps how many past interrupts a what-if reads.
const MaxWhatIf = 100_000

// SavePolicy checks a policy's source and stores it as the version in force (unless it is that
// version's source already). A policy that does not compile is a *policy.Error, and nothing is
// stored.
func SavePolicy(ctx context.Context, st *store.Store, src []byte, origin, by string) (*store.Policy, bool, error) {
	if _, err := policy.Parse(src); err != nil {
		return nil, false, err
	}
	return st.PolicySave(ctx, store.PolicySaveParams{Source: string(src), Origin: origin, CreatedBy: by})
}

// PolicyWhatIf applies a draft policy to the last interrupts stored, newest first.
func PolicyWhatIf(ctx context.Context, st *store.Store, src []byte, last int) (*policy.Report, error) {
	set, err := policy.Parse(src)
	if err != nil {
		return nil, err
	}
	if last <= 0 || last > MaxWhatIf {
		return nil, &ValidationError{Field: "last", Message: fmt.Sprintf("must be from 1 to %d", MaxWhatIf)}
	}
	list, err := st.InterruptListRecent(ctx, last)
	if err != nil {
		return nil, err
	}
	past := make([]policy.Past, len(list))
	for i, it := range list {
		past[i] = policy.Past{
			Case: policy.Case{Action: it.Action, Tool: it.Tool, Input: policy.DecodeJSON(it.Input),
				RunInput: policy.DecodeJSON(it.RunInput), Metadata: policy.DecodeJSON(it.Metadata), Labels: it.Labels},
			InterruptID: it.ID.String(), RunID: it.RunID.String(), Status: it.Status, ResolvedBy: deref(it.ResolvedBy),
		}
	}
	return set.WhatIf(past), nil
}

// requiredApprovals is how many distinct approvals the policy rule that routed the interrupt
// requires (0 when none), and the rule.
func requiredApprovals(it *store.Interrupt) (int, string) {
	if len(it.Policy) == 0 {
		return 0, ""
	}
	var rec struct {
		Rule      string          `json:"rule"`
		Decision  policy.Decision `json:"decision"`
		Approvals int             `json:"approvals"`
	}
	if json.Unmarshal(it.Policy, &rec) != nil || rec.Decision != policy.Require {
		return 0, ""
	}
	return rec.Approvals, rec.Rule
}

// expireInterrupts denies the pending interrupts whose policy deadline passed, each through
// Resolve: a reviewer deciding at the same moment and the deadline are serialised by its locks,
// and exactly one of them decides. It runs in the recovery sweep, so a deadline passed during a
// crash is applied by whichever process sweeps next.
func (s *Service) expireInterrupts(ctx context.Context) {
	list, err := s.store.InterruptListExpired(ctx, 100)
	if err != nil {
		s.log.Warn("recovery sweep: expired interrupts", "err", err)
		return
	}
	for _, it := range list {
		var rec struct {
			Rule    string `json:"rule"`
			Version int64  `json:"version"`
			Expires string `json:"expires"`
		}
		_ = json.Unmarshal(it.Policy, &rec)
		by := policy.Outcome{Rule: rec.Rule, Version: rec.Version}.By()
		_, err := s.Resolve(ctx, ResolveParams{InterruptID: it.ID, Action: ActionDeny, Actor: by, Expired: true,
			Comment: fmt.Sprintf("nobody decided within %s (policy rule %s): denied", rec.Expires, rec.Rule)})
		switch {
		case err == nil:
			s.log.Info("denied an interrupt nobody decided in time", "interrupt", it.ID, "run", it.RunID, "rule", rec.Rule)
		case errors.Is(err, ErrConflict):
			// A reviewer decided it first.
		default:
			s.log.Warn("recovery sweep: expire interrupt", "interrupt", it.ID, "err", err)
		}
	}
}
