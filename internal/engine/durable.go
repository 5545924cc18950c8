package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// A durable flow's execution is journaled op by op: each Generate call and each step (Run) that
// the flow's own code makes is an op, numbered in the order the flow makes them. A runner that
// re-executes the flow (to resume it after a reviewer's decision, or to take it over after a
// crash) serves the ops an earlier execution finished from its Journal, so their model calls,
// tools and step functions never run twice, and the op that was in flight carries on. Two rules
// keep that safe for any flow:
//   - An interrupt stops the flow. A Generate call that ends interrupted returns an
//     *InterruptedError; every later op of the execution returns it too, without running, so
//     nothing after the interrupt happens before the reviewers decide, even in a flow that
//     ignores the error.
//   - The flow makes the same ops in the same order on every execution. An op that differs
//     from the recording is a *NonDeterminismError, never a silent divergence.
//
// Ops are the flow's own: a Generate or Run called inside a tool's execution is part of that tool
// (whose result the runner records as a whole), not an op of the flow.

// OpResult is what an op ended with: a Generate call's final response (a *ModelResponse as JSON)
// or a step's result as JSON, or its error.
type OpResult struct {
	Output json.RawMessage
	// Error is set when the op failed; a step's error is journaled so that a re-execution takes
	// the branch the first one took.
	Error *OpError
}

// OpError is a journaled op's error: its status and message.
type OpError struct {
	Status  Status `json:"status"`
	Message string `json:"message"`
}

// Journal stores a durable flow's ops; a runner implements it for one execution.
type Journal interface {
	// Op is called as the flow begins op number seq. It returns the op's recorded result and true
	// when an earlier execution finished it (the op then does not run), false when it is to run,
	// or a *NonDeterminismError when the recording holds another op at seq.
	Op(ctx context.Context, seq int, kind OpKind, name string) (*OpResult, bool, error)
	// Finish journals the result of op seq, which ran in this execution. It is not called for an
	// op that was interrupted, nor for a Generate call that failed (a re-execution runs it again).
	Finish(ctx context.Context, seq int, kind OpKind, name string, res *OpResult) error
}

func describeOp(kind OpKind, name string) string {
	if kind == OpStep {
		return fmt.Sprintf("step %q", name)
	}
	return "a generate call"
}

type journalKey struct{}

// durableRun is the state of one durable execution of a flow, shared by its ops.
type durableRun struct {
	journal Journal

	mu          sync.Mutex
	seq         int
	inFlight    string // the op running now, for the error of one started beside it
	interrupted *InterruptedError
}

// WithJournal returns a context whose flow is durable: its Generate calls and steps are journaled
// in j, in order (see Journal).
func WithJournal(ctx context.Context, j Journal) context.Context {
	return context.WithValue(ctx, journalKey{}, &durableRun{journal: j})
}

// durableFrom returns the durable execution of ctx's flow, or nil: outside a durable flow, and
// inside a tool's execution.
func durableFrom(ctx context.Context) *durableRun {
	d, _ := ctx.Value(journalKey{}).(*durableRun)
	return d
}

// inTool marks a tool's context: Generate and Run calls inside it belong to the tool, not to the
// flow, and are neither journaled nor recorded as the flow's.
func inTool(ctx context.Context) context.Context {
	if ctx.Value(journalKey{}) == nil && ctx.Value(contextOptionsKey{}) == nil {
		return ctx
	}
	ctx = context.WithValue(ctx, journalKey{}, (*durableRun)(nil))
	return context.WithValue(ctx, contextOptionsKey{}, (*contextOptions)(nil))
}

// begin starts op kind/name: it returns the op's number and its recorded result (nil when the op
// is to run), or the error the op must return at once: an earlier interrupt, an op still running
// beside it, or a non-determinism.
func (d *durableRun) begin(ctx context.Context, kind OpKind, name string) (int, *OpResult, error) {
	d.mu.Lock()
	if d.interrupted != nil {
		err := d.interrupted
		d.mu.Unlock()
		return 0, nil, err
	}
	if d.inFlight != "" {
		other := d.inFlight
		d.mu.Unlock()
		return 0, nil, Errorf(StatusFailedPrecondition, "%s started while %s was still running: a durable flow makes its generate calls and steps one at a time, so that every execution makes them in the same order",
			describeOp(kind, name), other)
	}
	seq := d.seq
	d.seq++
	d.inFlight = describeOp(kind, name)
	d.mu.Unlock()
	rec, done, err := d.journal.Op(ctx, seq, kind, name)
	if err != nil || done {
		d.end()
	}
	if !done {
		rec = nil
	}
	return seq, rec, err
}

// end marks the running op done.
func (d *durableRun) end() {
	d.mu.Lock()
	d.inFlight = ""
	d.mu.Unlock()
}

// interrupt records that the execution stopped on resp's interrupts, and returns the error every
// later op returns.
func (d *durableRun) interrupt(resp *ModelResponse) *InterruptedError {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inFlight = ""
	if d.interrupted == nil {
		d.interrupted = &InterruptedError{Response: resp}
	}
	return d.interrupted
}

// opError is the journaled form of err.
func opError(err error) *OpError {
	return &OpError{Status: StatusOf(err), Message: errorMessage(err)}
}

// errorMessage is err's message without the status prefix *Error adds.
func errorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Error() == err.Error() {
		return e.Message
	}
	return err.Error()
}

// err is the journaled error as the op returns it again.
func (e *OpError) err() error { return &Error{Status: e.Status, Message: e.Message} }

// generateOp runs a Generate call as an op of ctx's durable flow, or as it is outside one.
func generateOp(ctx context.Context, run func() (*ModelResponse, error)) (*ModelResponse, error) {
	d := durableFrom(ctx)
	if d == nil {
		return run()
	}
	seq, rec, err := d.begin(ctx, OpGenerate, "")
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if rec.Error != nil {
			return nil, rec.Error.err()
		}
		var resp ModelResponse
		if err := json.Unmarshal(rec.Output, &resp); err != nil {
			return nil, fmt.Errorf("journaled response of generate op %d: %w", seq, err)
		}
		return &resp, nil
	}
	resp, err := run()
	if err != nil {
		d.end()
		return nil, err
	}
	if resp.FinishReason == FinishReasonInterrupted {
		return resp, d.interrupt(resp)
	}
	defer d.end()
	out, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("journal generate op %d: %w", seq, err)
	}
	if err := d.journal.Finish(ctx, seq, OpGenerate, "", &OpResult{Output: out}); err != nil {
		return nil, err
	}
	return resp, nil
}

type registryKey struct{}

// withRegistry puts the registry of a running flow in its context, for the spans of its steps.
func withRegistry(ctx context.Context, r *Registry) context.Context {
	return context.WithValue(ctx, registryKey{}, r)
}

// Run runs fn as a step named name: a span of its own (genkit:type flowStep, as Genkit's
// genkit.Run) in the flow's trace and, in a durable flow, an op of its journal. There its result
// is stored the first time, as JSON, and returned from the journal on every later execution of
// the flow (resume, takeover, exact replay) without calling fn: code inside a step may read the
// clock, draw random numbers or call an API. The result is returned as the journal holds it, so
// the first execution sees what the later ones will (what encoding/json drops is dropped). An
// error fn returns is journaled as well, and returned again as an *Error with its status and
// message. Outside a durable flow, and inside a tool, Run only traces fn.
func Run[Out any](ctx context.Context, name string, fn func() (Out, error)) (Out, error) {
	r, _ := ctx.Value(registryKey{}).(*Registry)
	d := durableFrom(ctx)
	if d == nil {
		span := startStep(ctx, r, name, false)
		out, err := fn()
		endStep(r, span, out, err)
		return out, err
	}
	seq, rec, err := d.begin(ctx, OpStep, name)
	if err != nil {
		var zero Out
		return zero, err
	}
	if rec != nil {
		span := startStep(ctx, r, name, true)
		out, err := stepValue[Out](name, rec)
		endStep(r, span, out, err)
		return out, err
	}
	defer d.end()
	span := startStep(ctx, r, name, false)
	out, err := fn()
	res := &OpResult{}
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping or cancelled: nothing is journaled, and the next execution runs the step again.
		endStep(r, span, out, err)
		return out, err
	case err != nil:
		res.Error = opError(err)
	default:
		if res.Output, err = json.Marshal(out); err != nil {
			err = Errorf(StatusInvalidArgument, "step %q: its result cannot be journaled as JSON: %w", name, err)
			endStep(r, span, out, err)
			var zero Out
			return zero, err
		}
	}
	if err := d.journal.Finish(ctx, seq, OpStep, name, res); err != nil {
		endStep(r, span, out, err)
		var zero Out
		return zero, err
	}
	out, err = stepValue[Out](name, res)
	endStep(r, span, out, err)
	return out, err
}

// stepValue decodes a step's journaled result, or returns its journaled error.
func stepValue[Out any](name string, res *OpResult) (Out, error) {
	var out Out
	if res.Error != nil {
		return out, res.Error.err()
	}
	if err := json.Unmarshal(res.Output, &out); err != nil {
		return out, Errorf(StatusInternal, "step %q: decode its journaled result: %w", name, err)
	}
	return out, nil
}

// startStep starts a step's span, in the trace of the flow that registry r runs (none outside a
// flow); journaled marks a step served from the journal.
func startStep(ctx context.Context, r *Registry, name string, journaled bool) trace.Span {
	if r == nil {
		return nil
	}
	_, span := r.startSpan(ctx, name, "flowStep", "flowStep")
	if journaled {
		span.SetAttributes(attribute.Bool(AttrStepJournaled, true))
	}
	return span
}

func endStep(r *Registry, span trace.Span, out any, err error) {
	if span == nil {
		return
	}
	if err == nil {
		r.setJSONAttr(span, AttrOutput, out)
	}
	r.endSpan(span, err)
}
