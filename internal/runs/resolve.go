package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/notify"
	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/store"
)

// Resolution actions a reviewer can take.
const (
	ActionApprove = "approve"
	ActionEdit    = "edit"
	ActionRespond = "respond"
	ActionDeny    = "deny"
)

// MaxCommentBytes caps a reviewer's comment.
const MaxCommentBytes = 16 << 10

// ResolveParams is a reviewer's decision on one interrupt.
type ResolveParams struct {
	InterruptID uuid.UUID
	Action      string          // approve, edit, respond or deny
	Input       json.RawMessage // edit: the replacement input
	Output      json.RawMessage // respond: the tool's output; deny: an optional denial shape
	Comment     string
	// Version, when not zero, must match the interrupt's version: a stale form loses.
	Version int64
	Actor   string
	// Expired says that the policy's deadline makes this decision (the sweep): a reviewer's
	// claim does not hold it back.
	Expired bool
	// Decider is the reviewer's role and groups, checked against the role or group the policy
	// rule that routed the interrupt requires (ErrForbidden). Nil: a caller Loupe trusts (the
	// CLI's operator, a policy, the deadline).
	Decider *policy.Decider
}

// ConflictError says that an interrupt was already resolved, by whom and how.
type ConflictError struct {
	Interrupt *store.Interrupt
	Reason    string
	// ClaimedBy, when set, is the reviewer who has claimed the pending interrupt.
	ClaimedBy string
}

func (e *ConflictError) Error() string { return e.Reason }

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ValidationError says which field of a payload is wrong.
type ValidationError struct {
	Field   string
	Message string
	Cause   error
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *ValidationError) Unwrap() []error { return []error{ErrInvalid, e.Cause} }

// Resolve records a decision exactly once. In one transaction it locks the run and the interrupt,
// checks that the interrupt is still pending (and at the expected version), validates the payload
// against the tool's schema, records the decision and the audit entry, and, when it was the run's
// last pending interrupt, enqueues the resume.
func (s *Service) Resolve(ctx context.Context, p ResolveParams) (*store.Interrupt, error) {
	status, err := statusFor(p.Action)
	if err != nil {
		return nil, err
	}
	if p.Version < 0 {
		// A stale form is a 409, but no interrupt ever had a negative version: that is a bad request.
		return nil, &ValidationError{Field: "version", Message: fmt.Sprintf("must be ≥ 1 (the interrupt's version), or 0 to skip the check; not %d", p.Version)}
	}
	if len(p.Comment) > MaxCommentBytes {
		// The comment reaches the model as a denial's reason and every page that shows the run.
		return nil, &ValidationError{Field: "comment", Message: fmt.Sprintf("is %d bytes; at most %d", len(p.Comment), MaxCommentBytes)}
	}
	if err := storableText("comment", p.Comment); err != nil {
		return nil, err
	}
	if err := storable("input", p.Input); err != nil {
		return nil, err
	}
	if err := storable("output", p.Output); err != nil {
		return nil, err
	}
	peek, err := s.store.InterruptGet(ctx, p.InterruptID, false)
	if err != nil {
		return nil, err
	}
	var resolved *store.Interrupt
	resumed := false
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		// Lock order, shared with Cancel: the run, then its interrupts. It serialises the decisions
		// on one run, so exactly one of them sees no pending interrupt left and enqueues the resume.
		run, err := tx.RunLock(ctx, peek.RunID)
		if err != nil {
			return err
		}
		it, err := tx.InterruptGet(ctx, p.InterruptID, true)
		if err != nil {
			return err
		}
		if it.Status != store.InterruptPending {
			return alreadyResolved(it)
		}
		if it.ClaimedBy != nil && *it.ClaimedBy != "" && *it.ClaimedBy != p.Actor && !p.Expired {
			// Claims keep two reviewers off one item: the claimant decides, or releases it.
			return &ConflictError{Interrupt: it, ClaimedBy: *it.ClaimedBy,
				Reason: fmt.Sprintf("interrupt %s is claimed by %s: they decide it, unless they release it or it is taken over", it.ID, *it.ClaimedBy)}
		}
		if err := mayDecide(it, p.Decider, p.Actor); err != nil {
			return err
		}
		// A policy rule that requires several approvers keeps the interrupt pending until enough
		// distinct ones approved (policies.go); each approval bumps its version, so none is stale.
		need, rule := requiredApprovals(it)
		if need > 1 {
			switch p.Action {
			case ActionApprove:
				list, added, err := tx.InterruptApprove(ctx, it.ID, p.Actor, p.Comment)
				if err != nil {
					return err
				}
				if !added {
					return &ConflictError{Interrupt: it, Reason: fmt.Sprintf("%s approved interrupt %s already: it needs %d distinct approvals (%d so far, policy rule %s)",
						p.Actor, it.ID, need, len(list), rule)}
				}
				if len(list) < need {
					if resolved, err = tx.InterruptTouch(ctx, it.ID); err != nil {
						return err
					}
					return tx.AuditInsert(ctx, p.Actor, "interrupt.approval", "interrupt", it.ID.String(), map[string]any{
						"run_id": it.RunID, "tool": it.Tool, "ref": it.Ref, "comment": p.Comment,
						"approvals": len(list), "required": need, "rule": rule})
				}
				names := make([]string, len(list))
				for i, a := range list {
					names[i] = a.Actor
				}
				p.Actor, p.Version = strings.Join(names, ", "), 0
			case ActionDeny:
			default:
				return &ValidationError{Field: "action", Message: fmt.Sprintf("interrupt %s needs %d distinct approvals (policy rule %s): approve it or deny it", it.ID, need, rule)}
			}
		}
		if p.Version != 0 && p.Version != it.Version {
			return &ConflictError{Interrupt: it, Reason: fmt.Sprintf("interrupt %s changed since version %d (now %d): reload it", it.ID, p.Version, it.Version)}
		}
		res, err := s.resolution(ctx, run, it, p)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("encode resolution: %w", err)
		}
		resolved, err = tx.InterruptResolve(ctx, store.InterruptResolveParams{
			ID: it.ID, Status: status, Resolution: raw, ResolvedBy: p.Actor, Comment: p.Comment,
		})
		if err != nil {
			return err
		}
		if err := tx.AuditInsert(ctx, p.Actor, "interrupt."+p.Action, "interrupt", it.ID.String(),
			map[string]any{"run_id": it.RunID, "tool": it.Tool, "ref": it.Ref, "comment": p.Comment, "resolution": res}); err != nil {
			return err
		}
		if p.Expired {
			// The deadline decided it: notified in the same transaction, so once and only if it won.
			if err := s.Notify(ctx, tx, run, resolved, NotifyEvent{Event: notify.EventExpired}); err != nil {
				return err
			}
		}
		pending, err := tx.InterruptCountPendingByRun(ctx, it.RunID)
		if err != nil {
			return err
		}
		s.fault(FaultAfterResolve)
		if pending > 0 || run.Status != store.RunInterrupted {
			return nil
		}
		if err := tx.RunRequeue(ctx, run.ID); err != nil {
			return err
		}
		resumed = true
		return s.enqueue(ctx, tx, run)
	})
	if err != nil {
		return nil, err
	}
	s.publish(resolved.RunID, event.InterruptChangedData{InterruptID: resolved.ID.String(), Status: resolved.Status})
	if resumed {
		s.publish(resolved.RunID, event.RunStatusData{Status: store.RunQueued})
	}
	return resolved, nil
}

// CheckResolve validates a decision's payload against the tool's schemas, as Resolve would,
// without recording anything: the inbox checks a decision before asking to confirm it.
func (s *Service) CheckResolve(ctx context.Context, p ResolveParams) error {
	if _, err := statusFor(p.Action); err != nil {
		return err
	}
	it, err := s.store.InterruptGet(ctx, p.InterruptID, false)
	if err != nil {
		return err
	}
	run, err := s.store.RunGet(ctx, it.RunID)
	if err != nil {
		return err
	}
	_, err = s.resolution(ctx, run, it, p)
	return err
}

func statusFor(action string) (string, error) {
	switch action {
	case ActionApprove:
		return store.InterruptApproved, nil
	case ActionEdit:
		return store.InterruptEdited, nil
	case ActionRespond:
		return store.InterruptResponded, nil
	case ActionDeny:
		return store.InterruptDenied, nil
	}
	return "", &ValidationError{Field: "action", Message: fmt.Sprintf("%q is not one of approve, edit, respond, deny", action)}
}

func alreadyResolved(it *store.Interrupt) error {
	who, when := "someone", ""
	if it.ResolvedBy != nil {
		who = *it.ResolvedBy
	}
	if it.ResolvedAt != nil {
		when = " at " + it.ResolvedAt.UTC().Format(time.RFC3339)
	}
	return &ConflictError{Interrupt: it, Reason: fmt.Sprintf("interrupt %s was already %s by %s%s", it.ID, it.Status, who, when)}
}

// resolution validates the payload of a decision against the tool's schemas: this program's, or
// those the program that has the tool announced in the catalogue.
func (s *Service) resolution(ctx context.Context, run *store.Run, it *store.Interrupt, p ResolveParams) (*resolution, error) {
	res := &resolution{Action: p.Action}
	if p.Action == ActionApprove || p.Action == ActionEdit {
		// Approving runs the tool again; an interrupt that only asks (restartable=false, as
		// defineInterrupt makes them) has nothing to run. Refused here, the reviewer can still
		// answer it, instead of the resume failing (or, in a Genkit app, crashing).
		d, found, err := s.toolDesc(ctx, run.Action, it.Tool)
		if err != nil {
			return nil, err
		}
		if found && !descRestartable(d) {
			return nil, &ValidationError{Field: "action", Message: fmt.Sprintf("%s only asks a person and has nothing to run again: respond to it or deny it", it.Tool)}
		}
	}
	switch p.Action {
	case ActionEdit:
		if len(p.Input) == 0 || string(p.Input) == "null" {
			return nil, &ValidationError{Field: "input", Message: "edit needs the replacement input"}
		}
		if err := s.validate(ctx, it, "input", p.Input); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(p.Input, &res.Input); err != nil {
			return nil, &ValidationError{Field: "input", Message: "not valid JSON", Cause: err}
		}
	case ActionRespond:
		if len(p.Output) == 0 {
			return nil, &ValidationError{Field: "output", Message: "respond needs the tool's output"}
		}
		if err := s.validate(ctx, it, "output", p.Output); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(p.Output, &res.Output); err != nil {
			return nil, &ValidationError{Field: "output", Message: "not valid JSON", Cause: err}
		}
	case ActionDeny:
		if len(p.Output) > 0 {
			if err := json.Unmarshal(p.Output, &res.Output); err != nil {
				return nil, &ValidationError{Field: "output", Message: "not valid JSON", Cause: err}
			}
			switch res.Output.(type) {
			case map[string]any, string:
			default:
				// A number or a list would reach the model as if the tool had answered it.
				return nil, &ValidationError{Field: "output", Message: "a denial's answer is an object or a string, or omit it for the standard denial"}
			}
		} else if _, ok := s.registry.LookupTool(it.Tool); ok {
			res.Output = s.denial(it.Tool, p.Actor, p.Comment)
		}
		// A tool of another program: the worker that resumes the run has the tool, and gives the
		// denial the tool's own shape then (resume.go).
	}
	return res, nil
}

// denial is the answer a denied call gets: the tool's own shape when it has one, else Denial.
func (s *Service) denial(tool, by, reason string) any {
	if t, ok := s.registry.LookupTool(tool); ok {
		if d, ok := t.(engine.Denier); ok {
			if v, ok := d.Denial(by, reason); ok {
				return v
			}
		}
	}
	return Denial(by, reason)
}

// Denial is the structured answer a denied tool call gets, so that the model can read that a person
// refused it and why.
func Denial(by, reason string) map[string]any {
	if reason == "" {
		reason = "no reason given"
	}
	return map[string]any{"denied": true, "by": by, "reason": reason,
		"message": "A reviewer denied this tool call. Do not retry it; tell the user."}
}

func (s *Service) validate(ctx context.Context, it *store.Interrupt, field string, value json.RawMessage) error {
	if !json.Valid(value) {
		return &ValidationError{Field: field, Message: "not valid JSON"}
	}
	tool := it.Tool
	in, out, found, err := s.toolSchemas(ctx, tool)
	if err != nil {
		return err
	}
	if !found {
		// A tool that no program announces under its name (a Genkit app's, whose actions are
		// announced under the app's name): the schemas stored with the interrupt.
		in, out, found, err = storedSchemas(it)
		if err != nil {
			return err
		}
	}
	if !found {
		return &ValidationError{Field: field, Message: fmt.Sprintf("tool %s is no longer registered, so its schema cannot be checked", tool),
			Cause: engine.Errorf(engine.StatusNotFound, "tool %q not found", tool)}
	}
	schema := in
	if field == "output" {
		schema = out
	}
	if err := schema.ValidateJSON(value); err != nil {
		return fieldError(field, err)
	}
	return nil
}

// fieldError turns a schema violation into a ValidationError naming the first failing field, as a
// JSON-pointer-like path under field ("input/amount").
func fieldError(field string, err error) *ValidationError {
	var ve *engine.ValidationError
	if errors.As(err, &ve) && len(ve.Fields) > 0 {
		f := ve.Fields[0]
		path := field + f.Path
		if f.Field != "" && !strings.HasSuffix(path, "/"+f.Field) {
			path += "/" + f.Field
		}
		return &ValidationError{Field: path, Message: f.Message, Cause: err}
	}
	return &ValidationError{Field: field, Message: err.Error(), Cause: err}
}

// storedSchemas are the tool schemas an interrupt was stored with; found is false when it has none.
func storedSchemas(it *store.Interrupt) (in, out *engine.Schema, found bool, err error) {
	if len(it.InputSchema) == 0 && len(it.OutputSchema) == 0 {
		return nil, nil, false, nil
	}
	// compile leaves *into nil, a schema that accepts everything, when none is stored.
	compile := func(raw json.RawMessage, into **engine.Schema) error {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		sch, err := engine.NewSchema(raw)
		if err != nil {
			return fmt.Errorf("compile the schema stored with interrupt %s: %w", it.ID, err)
		}
		*into = sch
		return nil
	}
	if err = compile(it.InputSchema, &in); err != nil {
		return nil, nil, false, err
	}
	if err = compile(it.OutputSchema, &out); err != nil {
		return nil, nil, false, err
	}
	return in, out, true, nil
}

// toolDesc finds a tool's description: this program's, else the catalogue's under the tool's name,
// or under the scope of the run's action: a program that announces another program's actions
// under a "<scope>:" prefix ("app:/flow/x", as internal/genkitapp does) announces their tools so
// too. found is false when none is found.
func (s *Service) toolDesc(ctx context.Context, runAction, name string) (d *engine.ActionDesc, found bool, err error) {
	if t, ok := s.registry.LookupTool(name); ok {
		return engine.ToolDesc(t), true, nil
	}
	keys := make([]string, 0, 2*len(toolPrefixes))
	if i := strings.Index(runAction, ":/"); i > 0 {
		for _, p := range toolPrefixes[1:] {
			keys = append(keys, runAction[:i+1]+p+name)
		}
	}
	for _, p := range toolPrefixes {
		keys = append(keys, p+name)
	}
	return s.lookupAction(ctx, keys...)
}

// descRestartable reads Genkit's metadata.tool.restartable, true unless it says false.
func descRestartable(d *engine.ActionDesc) bool {
	if m, ok := d.Metadata["tool"].(map[string]any); ok {
		if v, ok := m["restartable"].(bool); ok {
			return v
		}
	}
	return true
}
