package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/store"
)

// ReplayParams asks for a new run derived from a stored one. Every mode creates a new run linked to
// the original; the original is never modified.
//   - exact: the same action and input, with a model that serves the original's recorded
//     responses and chunks turn by turn and never calls a real model. Tools serve their recorded
//     outputs (Tools "cassette", the default, so that replaying a run never repeats what its
//     tools did), except a call whose input a reviewer of the replay edited (see cassette); with
//     Tools "live" they run again. The first model request, tool input or tool output that
//     differs from the recording is stored as the replay's divergence.
//   - rerun: the same action and input against the live model, with optional Overrides.
//   - fork: the history up to Turn copied as stored, optionally with Edits, then continued live.
type ReplayParams struct {
	RunID     uuid.UUID
	Mode      string
	Turn      *int
	Overrides *Overrides
	Edits     []Edit
	// Tools is cassette or live. Exact replays default to cassette, and only they may use it:
	// re-runs and forks call a live model, which makes new tool calls, and run them live.
	Tools string
	// ApplyResolutions makes an exact replay apply the original reviewers' decisions to the
	// interrupts it raises again, instead of waiting for a reviewer.
	ApplyResolutions bool
	CreatedBy        string
}

// Overrides change a re-execution or a fork. They reach the flow's generate call through engine
// context options, so they win over the flow's own options; a system prompt only applies when the
// generate starts from scratch (not to a fork, whose history already holds one: edit it instead).
type Overrides struct {
	Model    string          `json:"model,omitempty"`
	Config   json.RawMessage `json:"config,omitempty"`
	System   *string         `json:"system,omitempty"`
	MaxTurns *int            `json:"max_turns,omitempty"`
}

// Edit changes one message, or one tool output, of a fork's copied history: Seq and Message
// replace the message at that position; Turn, Ref and Output replace a tool call's output.
type Edit struct {
	Seq     *int            `json:"seq,omitempty"`
	Message json.RawMessage `json:"message,omitempty"`
	Turn    *int            `json:"turn,omitempty"`
	Ref     string          `json:"ref,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
}

// Replay creates the derived run, with its lineage, settings and (for a fork) copied history, and
// enqueues it, all in one transaction.
//
// A run derived from a derived run keeps the settings that made its source what it is, so that an
// exact replay reproduces the run it replays and a re-run or fork changes only what it is asked to:
//   - the source's effective overrides (model, config, system, turn limit) carry over, and each
//     override given replaces the inherited one (a config as a whole); the result is stored as
//     the new run's overrides;
//   - a source that copied its history from a turn on (a fork, or a replay of one) has its history
//     before that turn, edits included, copied again, and the exact replay or re-run goes on from
//     there: it is linked as a replay of the source (replay_of) that copies the source's history
//     before the turn (fork_of, fork_turn);
//   - a system override is dropped whenever the history is copied, which holds the system
//     message already.
func (s *Service) Replay(ctx context.Context, p ReplayParams) (*store.Run, error) {
	orig, err := s.store.RunGet(ctx, p.RunID)
	if err != nil {
		return nil, err
	}
	if err := s.checkReplay(ctx, orig, &p); err != nil {
		return nil, err
	}
	var fork *forkPlan
	switch {
	case p.Mode == store.ReplayFork:
		if fork, err = s.planFork(ctx, orig, *p.Turn, p.Edits); err != nil {
			return nil, err
		}
	case orig.ForkTurn != nil:
		if fork, err = s.planCopy(ctx, orig, *orig.ForkTurn); err != nil {
			return nil, err
		}
	}
	inherited, err := s.effectiveOverrides(ctx, orig)
	if err != nil {
		return nil, err
	}
	overrides := mergeOverrides(&inherited, p.Overrides, fork != nil)
	settings := store.Replay{SourceRunID: &orig.ID, Mode: p.Mode, Tools: p.Tools, ApplyResolutions: p.ApplyResolutions}
	if overrides != nil {
		if settings.Overrides, err = json.Marshal(overrides); err != nil {
			return nil, fmt.Errorf("encode overrides: %w", err)
		}
	}
	if len(p.Edits) > 0 {
		if settings.Edits, err = json.Marshal(p.Edits); err != nil {
			return nil, fmt.Errorf("encode edits: %w", err)
		}
	}
	// A replay runs under the context its original was started with (its auth, say).
	create := store.RunCreateParams{Action: orig.Action, Input: orig.Input, Context: orig.Context, CreatedBy: p.CreatedBy, ReplayMode: p.Mode}
	switch {
	case p.Mode == store.ReplayFork:
		create.ForkOf, create.ForkTurn = &orig.ID, p.Turn
	case fork != nil:
		create.ReplayOf, create.ForkOf, create.ForkTurn = &orig.ID, &orig.ID, orig.ForkTurn
	default:
		create.ReplayOf = &orig.ID
	}
	var run *store.Run
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		var err error
		if run, err = tx.RunCreate(ctx, create); err != nil {
			return err
		}
		settings.RunID = run.ID
		if err := tx.ReplayCreate(ctx, settings); err != nil {
			return err
		}
		if fork != nil {
			if err := fork.apply(ctx, tx, orig.ID, run.ID); err != nil {
				return err
			}
			// The copy changed the row (turns, usage); return it as stored, before a worker
			// can pick it up.
			if run, err = tx.RunGet(ctx, run.ID); err != nil {
				return err
			}
		}
		if err := tx.AuditInsert(ctx, p.CreatedBy, "run."+p.Mode, "run", orig.ID.String(),
			map[string]any{"run_id": run.ID, "turn": p.Turn, "tools": settings.Tools, "apply_resolutions": p.ApplyResolutions,
				"overrides": p.Overrides, "edits": len(p.Edits)}); err != nil {
			return err
		}
		return s.enqueue(ctx, tx, run)
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

// effectiveOverrides returns the overrides a derived run ran with: none (the zero Overrides) for an
// original run, or a derived run without any.
func (s *Service) effectiveOverrides(ctx context.Context, run *store.Run) (Overrides, error) {
	var o Overrides
	if run.ReplayMode == nil && run.ForkOf == nil {
		return o, nil
	}
	settings, err := s.store.ReplayGet(ctx, run.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(settings.Overrides) == 0) {
		return o, nil
	}
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(settings.Overrides, &o); err != nil {
		return Overrides{}, fmt.Errorf("decode overrides of run %s: %w", run.ID, err)
	}
	return o, nil
}

// mergeOverrides lays the requested overrides over the inherited ones; copied says the new run
// starts from a copied history, whose system message a system override cannot change. It returns
// nil when nothing is overridden.
func mergeOverrides(inherited, requested *Overrides, copied bool) *Overrides {
	var m Overrides
	if inherited != nil {
		m = *inherited
	}
	if o := requested; o != nil {
		if o.Model != "" {
			m.Model = o.Model
		}
		if len(o.Config) > 0 {
			m.Config = o.Config
		}
		if o.System != nil {
			m.System = o.System
		}
		if o.MaxTurns != nil {
			m.MaxTurns = o.MaxTurns
		}
	}
	if copied {
		m.System = nil
	}
	if m.Model == "" && len(m.Config) == 0 && m.System == nil && m.MaxTurns == nil {
		return nil
	}
	return &m
}
