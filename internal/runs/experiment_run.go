package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// ExperimentRunParams asks for the run of one example of an experiment: a re-execution of the
// action on the example's input, with the flow's current code and the live (or overriding) model,
// whose tools are served from the example's recorded run (Tools recorded) or run live.
type ExperimentRunParams struct {
	Action string
	Input  json.RawMessage
	// SourceRunID is the run the example came from, whose recording serves the tools and whose
	// reviewers' decisions are applied; nil for an example written by hand. A source run deleted
	// since is as nil: the example runs with an empty recording.
	SourceRunID *uuid.UUID
	Tools       string // recorded (the default) or live
	Overrides   *Overrides
	Labels      map[string]string
	CreatedBy   string
	// InTx runs in the transaction that creates the run, before its job is enqueued; an error
	// rolls it all back, and ErrConflict from it means the example was started already.
	InTx func(tx *store.Store, run *store.Run) error
}

// ResolveExperimentAction returns the key of the action an experiment runs (a key, or a flow's
// name), checking that its tools can be served as asked: a Genkit app's action runs its tools in
// the app, out of Loupe's reach, so only tools live can run it, and saying so is the caller's.
func (s *Service) ResolveExperimentAction(ctx context.Context, action, tools string) (string, error) {
	switch tools {
	case store.ReplayToolsRecorded, store.ReplayToolsLive:
	default:
		return "", &ValidationError{Field: "tools", Message: fmt.Sprintf("%q is not one of recorded, live", tools)}
	}
	key, _, err := s.resolveAction(ctx, action)
	if err != nil {
		return "", err
	}
	if tools == store.ReplayToolsRecorded && strings.Index(key, ":/") > 0 {
		return "", &ValidationError{Field: "tools", Message: fmt.Sprintf(
			"%s is a Genkit app's action, whose tools run in the app where Loupe cannot serve them from a recording; run it with tools live, knowing its tools act again", key)}
	}
	return key, nil
}

// CheckRerunOverrides validates the overrides of a re-run (an experiment's runs): the model
// registered, the turn limit and system message sensible.
func (s *Service) CheckRerunOverrides(ctx context.Context, o *Overrides) error {
	return s.checkOverrides(ctx, store.ReplayRerun, o)
}

// StartExperimentRun creates the run, its replay settings and its job in one transaction.
func (s *Service) StartExperimentRun(ctx context.Context, p ExperimentRunParams) (*store.Run, error) {
	if p.Tools == "" {
		p.Tools = store.ReplayToolsRecorded
	}
	key, err := s.ResolveExperimentAction(ctx, p.Action, p.Tools)
	if err != nil {
		return nil, err
	}
	_, desc, err := s.resolveAction(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := desc.InputSchema.ValidateJSON(p.Input); err != nil {
		return nil, fieldError("input", err)
	}
	if p.Overrides != nil {
		o := *p.Overrides // checkOverrides normalises it, and an experiment starts its runs with one at once
		p.Overrides = &o
	}
	if err := s.checkOverrides(ctx, store.ReplayRerun, p.Overrides); err != nil {
		return nil, err
	}
	var actx json.RawMessage
	if p.SourceRunID != nil {
		src, err := s.store.RunGet(ctx, *p.SourceRunID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			p.SourceRunID = nil
		case err != nil:
			return nil, fmt.Errorf("the example's recorded run: %w", err)
		default:
			actx = src.Context // the example runs under the context its run was started with
		}
	}
	settings := store.Replay{SourceRunID: p.SourceRunID, Mode: store.ReplayRerun, Tools: p.Tools, ApplyResolutions: p.Tools == store.ReplayToolsRecorded}
	if p.Overrides != nil {
		if settings.Overrides, err = json.Marshal(p.Overrides); err != nil {
			return nil, fmt.Errorf("encode overrides: %w", err)
		}
	}
	var run *store.Run
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		var err error
		if run, err = tx.RunCreate(ctx, store.RunCreateParams{Action: key, Input: p.Input, Context: actx, CreatedBy: p.CreatedBy,
			ReplayOf: p.SourceRunID, ReplayMode: store.ReplayRerun, Labels: p.Labels}); err != nil {
			return err
		}
		settings.RunID = run.ID
		if err := tx.ReplayCreate(ctx, settings); err != nil {
			return err
		}
		if p.InTx != nil {
			if err := p.InTx(tx, run); err != nil {
				return err
			}
		}
		return s.enqueue(ctx, tx, run)
	})
	if err != nil {
		return nil, err
	}
	s.publish(run.ID, event.RunStatusData{Status: store.RunQueued, Action: run.Action})
	return run, nil
}
