package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/notify"
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
		p, err := st.PolicyGet(ctx, v)
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
	v, err := st.PolicyInForceVersion(ctx)
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
	required := false
	if call.Tool != nil {
		if d := call.Tool.Definition(); d != nil && d.Metadata[engine.MetaRequireApproval] == true {
			required = true
		}
	}
	return s.gateCall(ctx, run, call.Name, call.Input, required)
}

// gateCall is gate for a call of the tool name with input, which asks for approval by its
// definition when required: a tool of this program's, or of a generate that runs in another
// process (External.Gate).
func (s *Service) gateCall(ctx context.Context, run *store.Run, name string, input json.RawMessage, required bool) (map[string]any, bool, error) {
	if required {
		return map[string]any{
			"approval": "required",
			"message":  fmt.Sprintf("%s asks for approval before it runs", name),
		}, true, nil
	}
	set, err := s.gatePolicy(ctx)
	if err != nil || !set.HasGates() {
		return nil, false, err
	}
	var in, runInput any
	_ = json.Unmarshal(input, &in)
	_ = json.Unmarshal(run.Input, &runInput)
	out, gated := set.Gate(policy.Case{Action: run.Action, Tool: name, Input: in, RunInput: runInput, Labels: run.Labels})
	if !gated {
		return nil, false, nil
	}
	msg := out.Reason
	if msg == "" {
		msg = fmt.Sprintf("%s needs approval (policy rule %s)", name, out.Rule)
	}
	return map[string]any{
		"approval": "required", "message": msg,
		"policy": map[string]any{"rule": out.Rule, "version": out.Version, "decision": "gate", "reason": out.Reason},
	}, true, nil
}

// applyPolicy runs in the transaction that stores a run's new interrupts: the policy in force
// decides each pending one it has a rule for, exactly as a reviewer's Resolve would (the same
// validation, resolution and audit entry, signed "policy <rule> v<version>"), and records the rule
// that routed the others. When none is left pending, the run is requeued in the same transaction,
// for the execution that stored the interrupts to go on with (errExecuteAgain): a crash anywhere
// before the commit leaves nothing decided, after it the sweep finds the queued run.
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
		for k, v := range map[string]string{"role": out.Role, "group": out.Group, "escalate": out.Escalate} {
			if v != "" {
				rec[k] = v
			}
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
	return true, tx.RunRequeue(ctx, run.ID)
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

// SavePolicyDraft checks a policy's source and stores it as a new version that is not in force:
// it can be tried (PolicyWhatIf) and put in force later (store.PolicyActivate).
func SavePolicyDraft(ctx context.Context, st *store.Store, src []byte, origin, by string) (*store.Policy, bool, error) {
	if _, err := policy.Parse(src); err != nil {
		return nil, false, err
	}
	return st.PolicySave(ctx, store.PolicySaveParams{Source: string(src), Origin: origin, CreatedBy: by, Draft: true})
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

// routing is what a policy rule recorded on the interrupt it routed (applyPolicy): who may
// decide it, and its deadline and escalation.
type routing struct {
	Rule      string          `json:"rule"`
	Version   int64           `json:"version"`
	Decision  policy.Decision `json:"decision"`
	Approvals int             `json:"approvals,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Expires   string          `json:"expires,omitempty"`
	Role      string          `json:"role,omitempty"`
	Group     string          `json:"group,omitempty"`
	Escalate  string          `json:"escalate,omitempty"`
	// Escalated says that the deadline passed once and routed the interrupt to Role or Group
	// (from EscalatedFrom); the next deadline denies it.
	Escalated     bool   `json:"escalated,omitempty"`
	EscalatedFrom string `json:"escalated_from,omitempty"`
}

func routingOf(it *store.Interrupt) routing {
	var r routing
	if len(it.Policy) > 0 {
		_ = json.Unmarshal(it.Policy, &r)
	}
	return r
}

// mayDecide refuses a reviewer's decision on an interrupt whose rule requires a role or a group
// they do not have. A nil decider is a caller Loupe trusts (the CLI's operator, a policy, the
// deadline).
func mayDecide(it *store.Interrupt, d *policy.Decider, actor string) error {
	if d == nil {
		return nil
	}
	r := routingOf(it)
	if d.MayDecide(r.Role, r.Group) {
		return nil
	}
	who := "reviewers of role " + r.Role
	if r.Group != "" {
		who = "members of group " + r.Group
		if r.Role != "" {
			who = "members of group " + r.Group + " of role " + r.Role
		}
	}
	return fmt.Errorf("%s may not decide interrupt %s: policy rule %s leaves it to %s (or an admin): %w", actor, it.ID, r.Rule, who, ErrForbidden)
}

// expireInterrupts applies the deadlines of pending interrupts that passed: one whose rule
// escalates, and which was not escalated yet, is routed to the rule's escalation for another
// period (escalate); any other is denied through Resolve. A reviewer deciding at the same moment
// and the deadline are serialised by the locks of either, and exactly one of them acts. It runs
// in the recovery sweep, so a deadline passed during a crash is applied by whichever process
// sweeps next.
func (s *Service) expireInterrupts(ctx context.Context) {
	list, err := s.store.InterruptListExpired(ctx, 100)
	if err != nil {
		s.log.Warn("recovery sweep: expired interrupts", "err", err)
		return
	}
	for _, it := range list {
		rec := routingOf(it)
		if rec.Escalate != "" && !rec.Escalated {
			switch err := s.escalate(ctx, it.ID); {
			case err == nil:
				s.log.Info("escalated an interrupt nobody decided in time", "interrupt", it.ID, "run", it.RunID, "rule", rec.Rule, "to", rec.Escalate)
			case errors.Is(err, ErrConflict):
			default:
				s.log.Warn("recovery sweep: escalate interrupt", "interrupt", it.ID, "err", err)
			}
			continue
		}
		by := policy.Outcome{Rule: rec.Rule, Version: rec.Version}.By()
		comment := fmt.Sprintf("nobody decided within %s (policy rule %s): denied", rec.Expires, rec.Rule)
		if rec.Escalated {
			comment = fmt.Sprintf("nobody decided within %s, nor within %s more after it was escalated to %s (policy rule %s): denied",
				rec.Expires, rec.Expires, rec.Escalate, rec.Rule)
		}
		_, err := s.Resolve(ctx, ResolveParams{InterruptID: it.ID, Action: ActionDeny, Actor: by, Expired: true, Comment: comment})
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

// escalate routes an interrupt whose deadline passed to its rule's escalation (a role, or a
// group), with a new deadline as long as the first, under the same locks as Resolve: a decision
// made meanwhile wins (ErrConflict), and the escalation is recorded once, with an audit entry.
func (s *Service) escalate(ctx context.Context, id uuid.UUID) error {
	peek, err := s.store.InterruptGet(ctx, id, false)
	if err != nil {
		return err
	}
	var rec routing
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		run, err := tx.RunLock(ctx, peek.RunID)
		if err != nil {
			return err
		}
		it, err := tx.InterruptGet(ctx, id, true)
		if err != nil {
			return err
		}
		rec = routingOf(it)
		if it.Status != store.InterruptPending || rec.Escalated || it.ExpiresAt == nil || it.ExpiresAt.After(time.Now()) {
			return fmt.Errorf("interrupt %s was decided or escalated meanwhile: %w", id, ErrConflict)
		}
		role, group, err := policy.ParseRoute(rec.Escalate)
		if err != nil {
			return err
		}
		from := rec.Role
		if rec.Group != "" {
			from = "group:" + rec.Group
		}
		rec.Role, rec.Group, rec.Escalated, rec.EscalatedFrom = role, group, true, from
		raw, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := tx.InterruptSetPolicy(ctx, id, raw); err != nil {
			return err
		}
		d, err := time.ParseDuration(rec.Expires)
		if err != nil {
			return fmt.Errorf("interrupt %s: its rule's expires %q: %w", id, rec.Expires, err)
		}
		if err := tx.InterruptSetExpiry(ctx, id, d); err != nil {
			return err
		}
		touched, err := tx.InterruptTouch(ctx, id)
		if err != nil {
			return err
		}
		if err := tx.AuditInsert(ctx, policy.Outcome{Rule: rec.Rule, Version: rec.Version}.By(), "interrupt.escalate", "interrupt", id.String(),
			map[string]any{"run_id": it.RunID, "tool": it.Tool, "rule": rec.Rule, "to": rec.Escalate, "from": from, "expires": rec.Expires}); err != nil {
			return err
		}
		return s.Notify(ctx, tx, run, touched, NotifyEvent{Event: notify.EventEscalated, EscalatedTo: rec.Escalate})
	})
	if err != nil {
		return err
	}
	s.publish(peek.RunID, event.InterruptChangedData{InterruptID: id.String(), Status: store.InterruptPending})
	return nil
}
