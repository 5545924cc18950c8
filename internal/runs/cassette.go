package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// cassette serves a tool call from the original's ledger.
//
// A call whose input differs from the recorded one (a reviewer of this replay edited the
// arguments of an interrupt it raised again, so they differ from what the original's reviewer
// approved) is not served: the recording answers other arguments, and serving it would show an
// output the tool never gave for this input. The difference is stored as the replay's divergence
// (tool_input, at the call's turn and ref) and the call runs live, as that reviewer approved it.
// Only a reviewer's decision can change a cassette call's input (the model's requests are served
// from the recording too), so a cassette replay still runs no tool nobody approved.
func (p *replayer) cassette(ctx context.Context, call *engine.ToolCall, turn int, orig *store.ToolCall, origInterrupt *store.Interrupt, next engine.ToolNext) (*engine.ToolOutput, error) {
	if call.Resumed == nil && origInterrupt != nil {
		return nil, &engine.InterruptError{Metadata: interruptMetadata(origInterrupt.Metadata)}
	}
	if orig == nil {
		msg := fmt.Sprintf("the original run recorded no call %s (ref %s) in turn %d", call.Name, call.Ref, turn)
		if err := p.diverge(ctx, Divergence{Turn: turn, Part: "tool_call", Ref: call.Ref, Tool: call.Name, Message: msg}); err != nil {
			return nil, err
		}
		return nil, engine.Errorf(engine.StatusFailedPrecondition, "cassette replay: %s", msg)
	}
	if d := (Divergence{Turn: turn, Ref: call.Ref, Tool: call.Name}); p.inputDiffers(call, orig, turn, &d) {
		if err := p.diverge(ctx, d); err != nil {
			return nil, err
		}
		return next(ctx, call)
	}
	if err := p.svc.store.ToolCallMarkCassette(ctx, p.rec.lease.fence, turn, call.Ref); err != nil {
		return nil, err
	}
	return servedOutput(call, orig)
}

// servedOutput is what a recorded call answers: its output, its interrupt, or its error.
func servedOutput(call *engine.ToolCall, orig *store.ToolCall) (*engine.ToolOutput, error) {
	switch orig.Status {
	case store.ToolCallCompleted:
		var out engine.ToolOutput
		if err := json.Unmarshal(orig.Output, &out); err != nil {
			return nil, fmt.Errorf("recorded output of %s (ref %s): %w", call.Name, call.Ref, err)
		}
		return &out, nil
	case store.ToolCallInterrupted:
		var e struct {
			Interrupt any `json:"interrupt"`
		}
		_ = json.Unmarshal(orig.Error, &e)
		md, _ := e.Interrupt.(map[string]any)
		return nil, &engine.InterruptError{Metadata: md}
	default:
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(orig.Error, &e)
		if e.Message == "" {
			e.Message = "the recorded call ended " + orig.Status
		}
		return nil, errors.New(e.Message)
	}
}

func interruptMetadata(raw json.RawMessage) map[string]any {
	var md map[string]any
	if json.Unmarshal(raw, &md) != nil {
		return nil
	}
	return md
}

// replayInterrupts runs in the transaction that stores a derived run's interrupts. Each interrupt
// matching one of the original run's gets that reviewer's decision as its suggested resolution;
// an exact replay asked to apply the recorded resolutions resolves them with it, and when none is
// left pending, requeues the run in the same transaction, for the execution that stored the
// interrupts to go on with (errExecuteAgain). It reports whether the run was requeued.
func (s *Service) replayInterrupts(ctx context.Context, tx *store.Store, run *store.Run, created []*store.Interrupt) (bool, error) {
	settings, err := tx.ReplayGet(ctx, run.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && settings.SourceRunID == nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	originals, err := tx.InterruptListByRun(ctx, *settings.SourceRunID)
	if err != nil {
		return false, err
	}
	used := map[uuid.UUID]bool{}
	applied := 0
	for _, it := range created {
		if it.Status != store.InterruptPending {
			continue // stored by an earlier execution of this run already
		}
		orig := matchInterrupt(it, originals, used)
		if orig == nil {
			continue
		}
		used[orig.ID] = true
		suggestion := map[string]any{
			"source_run_id": orig.RunID, "source_interrupt_id": orig.ID, "status": orig.Status,
			"resolution": orig.Resolution, "resolved_by": orig.ResolvedBy, "resolved_at": orig.ResolvedAt, "comment": orig.Comment,
		}
		raw, err := json.Marshal(suggestion)
		if err != nil {
			return false, fmt.Errorf("encode suggested resolution: %w", err)
		}
		if err := tx.InterruptSuggest(ctx, it.ID, raw); err != nil {
			return false, err
		}
		if !settings.ApplyResolutions {
			continue
		}
		by, comment := "replay", ""
		if orig.ResolvedBy != nil {
			by = *orig.ResolvedBy
		}
		if orig.Comment != nil {
			comment = *orig.Comment
		}
		if _, err := tx.InterruptResolve(ctx, store.InterruptResolveParams{
			ID: it.ID, Status: orig.Status, Resolution: orig.Resolution, ResolvedBy: by, Comment: comment,
		}); err != nil {
			return false, err
		}
		if err := tx.AuditInsert(ctx, "replay", "interrupt.replay_applied", "interrupt", it.ID.String(),
			map[string]any{"run_id": run.ID, "source_interrupt_id": orig.ID, "status": orig.Status}); err != nil {
			return false, err
		}
		applied++
	}
	if applied == 0 {
		return false, nil
	}
	pending, err := tx.InterruptCountPendingByRun(ctx, run.ID)
	if err != nil || pending > 0 {
		return false, err
	}
	return true, tx.RunRequeue(ctx, run.ID)
}

// matchInterrupt finds the original's decided interrupt that a replayed one repeats: the same turn,
// ref and round, else the same turn and ref, else the same tool and input.
func matchInterrupt(it *store.Interrupt, originals []*store.Interrupt, used map[uuid.UUID]bool) *store.Interrupt {
	decided := func(o *store.Interrupt) bool {
		switch o.Status {
		case store.InterruptApproved, store.InterruptEdited, store.InterruptResponded, store.InterruptDenied:
			return !used[o.ID]
		}
		return false
	}
	for _, o := range originals {
		if decided(o) && o.Turn == it.Turn && o.Ref == it.Ref && o.Round == it.Round {
			return o
		}
	}
	for _, o := range originals {
		if decided(o) && o.Turn == it.Turn && o.Ref == it.Ref {
			return o
		}
	}
	for _, o := range originals {
		if decided(o) && o.Tool == it.Tool && len(diffJSON(o.Input, it.Input)) == 0 {
			return o
		}
	}
	return nil
}
