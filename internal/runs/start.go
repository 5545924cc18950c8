package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/loupe-dev/loupe/internal/store"
)

// StartParams asks for a new run.
type StartParams struct {
	// Action is a registry key such as /flow/travelAgent, or a bare flow name.
	Action string
	Input  json.RawMessage
	// CreatedBy is the user who started it.
	CreatedBy string
}

// StartRun inserts a run and its job in one transaction and returns the queued run at once.
func (s *Service) StartRun(ctx context.Context, p StartParams) (*store.Run, error) {
	key, err := s.resolveAction(p.Action)
	if err != nil {
		return nil, err
	}
	input := p.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if !json.Valid(input) {
		return nil, &ValidationError{Field: "input", Message: "not valid JSON"}
	}
	if err := storable("input", input); err != nil {
		return nil, err
	}
	if err := s.validateInput(key, input); err != nil {
		return nil, err
	}
	var run *store.Run
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		var err error
		run, err = tx.RunCreate(ctx, store.RunCreateParams{Action: key, Input: input, CreatedBy: p.CreatedBy})
		if err != nil {
			return err
		}
		return s.enqueue(ctx, tx, run)
	})
	if err != nil {
		return nil, err
	}
	s.publish(run.ID, EventStatus, map[string]any{"status": store.RunQueued, "action": run.Action})
	return run, nil
}

// enqueue inserts the run's job in the store's transaction.
func (s *Service) enqueue(ctx context.Context, tx *store.Store, run *store.Run) error {
	if _, err := s.river.InsertTx(ctx, tx.Tx(), RunArgs{RunID: run.ID}, &river.InsertOpts{}); err != nil {
		return fmt.Errorf("enqueue run %s: %w", run.ID, err)
	}
	return nil
}

// resolveAction accepts a registry key or a bare flow name.
func (s *Service) resolveAction(action string) (string, error) {
	if action == "" {
		return "", fmt.Errorf("action is required: %w", ErrInvalid)
	}
	if s.registry.Lookup(action) != nil {
		return action, nil
	}
	if key := "/flow/" + action; s.registry.Lookup(key) != nil {
		return key, nil
	}
	return "", fmt.Errorf("action %q is not registered (see GET /api/v1/actions): %w", action, ErrInvalid)
}

// validateInput checks the input against the action's input schema, when it has one.
func (s *Service) validateInput(key string, input json.RawMessage) error {
	a := s.registry.Lookup(key)
	desc := a.Desc()
	if desc.InputSchema == nil {
		return nil
	}
	if err := desc.InputSchema.ValidateJSON(input); err != nil {
		return fieldError("input", err)
	}
	return nil
}

// storable refuses a client's JSON that PostgreSQL cannot store (U+0000, a lone surrogate, invalid
// UTF-8), naming the field, for every caller of the service: the API checks it first, the CLI and
// library callers get the same answer here instead of a database error.
func storable(field string, raw json.RawMessage) error {
	var te *store.TextError
	if err := store.CheckJSON(field, raw); errors.As(err, &te) {
		return &ValidationError{Field: te.Field, Message: te.Problem + ", which PostgreSQL cannot store", Cause: err}
	}
	return nil
}

// storableText is storable for plain text.
func storableText(field, s string) error {
	var te *store.TextError
	if err := store.CheckText(field, s); errors.As(err, &te) {
		return &ValidationError{Field: te.Field, Message: te.Problem + ", which PostgreSQL cannot store", Cause: err}
	}
	return nil
}
