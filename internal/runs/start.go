package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// StartParams asks for a new run.
type StartParams struct {
	// Action is a registry key such as /flow/travelAgent, or a bare flow name.
	Action string
	Input  json.RawMessage
	// CreatedBy is the user who started it.
	CreatedBy string
	// Labels are extra attributes of the run's root span (Genkit's telemetryLabels).
	Labels map[string]string
	// Context is the run's action context (Genkit's runAction context, auth and the like): a
	// JSON object, or nil. The flow reads it with loupe.FromContext on every execution.
	Context json.RawMessage
}

// StartRun inserts a run and its job in one transaction and returns the queued run at once.
func (s *Service) StartRun(ctx context.Context, p StartParams) (*store.Run, error) {
	key, desc, err := s.resolveAction(ctx, p.Action)
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
	if err := desc.InputSchema.ValidateJSON(input); err != nil {
		return nil, fieldError("input", err)
	}
	actx, err := actionContext(p.Context)
	if err != nil {
		return nil, err
	}
	var run *store.Run
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		var err error
		run, err = tx.RunCreate(ctx, store.RunCreateParams{Action: key, Input: input, CreatedBy: p.CreatedBy, Labels: p.Labels, Context: actx})
		if err != nil {
			return err
		}
		return s.enqueue(ctx, tx, run)
	})
	if err != nil {
		return nil, err
	}
	s.publish(run.ID, event.RunStatusData{Status: store.RunQueued, Action: run.Action})
	return run, nil
}

// enqueue inserts the run's job in the store's transaction, into the queue of a program that has
// its action (route), or into HeldQueue when no live program has it.
func (s *Service) enqueue(ctx context.Context, tx *store.Store, run *store.Run) error {
	queue, err := s.route(ctx, tx, run.Action)
	if err != nil {
		return fmt.Errorf("enqueue run %s: %w", run.ID, err)
	}
	if _, err := s.river.InsertTx(ctx, tx.Tx(), RunArgs{RunID: run.ID, Action: run.Action}, &river.InsertOpts{Queue: queue}); err != nil {
		return fmt.Errorf("enqueue run %s: %w", run.ID, err)
	}
	return nil
}

// UnknownActionError is a run of an action that neither this program nor any announced in the
// catalogue has.
type UnknownActionError struct {
	Action string
}

func (e *UnknownActionError) Error() string {
	return fmt.Sprintf("action %q is not registered", e.Action)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *UnknownActionError) Unwrap() error { return ErrInvalid }

// resolveAction accepts a registry key or a bare flow name, of an action this program has or one
// that a program announced in the catalogue (the run waits when none is live), and returns its
// description.
func (s *Service) resolveAction(ctx context.Context, action string) (string, *engine.ActionDesc, error) {
	if action == "" {
		return "", nil, fmt.Errorf("action is required: %w", ErrInvalid)
	}
	d, found, err := s.lookupAction(ctx, action, "/flow/"+action)
	if err != nil {
		return "", nil, err
	}
	if !found {
		return "", nil, &UnknownActionError{Action: action}
	}
	return d.Key, d, nil
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

// actionContext checks a run's context: a JSON object PostgreSQL can store, or nothing (absent or
// null).
func actionContext(raw json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return nil, &ValidationError{Field: "context", Message: "must be a JSON object", Cause: err}
	}
	if err := storable("context", trimmed); err != nil {
		return nil, err
	}
	return trimmed, nil
}
