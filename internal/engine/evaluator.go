package engine

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/trace"
)

// Evaluator is a registered scoring function, /evaluator/<name>: it takes one example's case and
// returns its score. Running it opens its own span (subtype evaluator), whose trace is the
// evaluator's trace that an experiment stores beside the score.
type Evaluator[In, Out any] struct {
	r    *Registry
	desc ActionDesc
	fn   func(ctx context.Context, in In) (Out, error)
}

// DefineEvaluator registers an evaluator under /evaluator/<name>. It panics on a duplicate name.
func DefineEvaluator[In, Out any](r *Registry, name, description string, fn func(ctx context.Context, in In) (Out, error)) *Evaluator[In, Out] {
	e := &Evaluator[In, Out]{r: r, fn: fn, desc: ActionDesc{
		Key: ActionKey(ActionTypeEvaluator, name), Name: name, Type: ActionTypeEvaluator, Description: description,
	}}
	r.mustRegister(e)
	return e
}

// Desc implements Action.
func (e *Evaluator[In, Out]) Desc() *ActionDesc { return &e.desc }

// Run scores one case in the evaluator's span.
func (e *Evaluator[In, Out]) Run(ctx context.Context, in In) (Out, error) {
	ctx, span := e.r.startSpan(ctx, e.desc.Name, "action", "evaluator")
	e.r.setJSONAttr(span, AttrInput, in)
	out, err := e.fn(ctx, in)
	if err != nil {
		err = asStatusError(ctx, err, "evaluator "+e.desc.Name)
	} else {
		e.r.setJSONAttr(span, AttrOutput, out)
	}
	e.r.endSpan(span, err)
	return out, err
}

// RunJSON implements Action.
func (e *Evaluator[In, Out]) RunJSON(ctx context.Context, input json.RawMessage, _ StreamFunc) (json.RawMessage, error) {
	var in In
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, Errorf(StatusInvalidArgument, "evaluator %s: decode input: %w", e.desc.Name, err)
	}
	out, err := e.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Tracer is the tracer the registry's actions report to (a no-op one before SetTracerProvider), for
// the spans a caller opens around them: an experiment's evaluation of a built-in evaluator, say.
func (r *Registry) Tracer() trace.Tracer { return r.tracer.Load().Tracer }

// RunEvaluatorSpan runs fn as the evaluator name, in an evaluator action span of its own whose
// genkit:input is input and genkit:output fn's output: how an evaluator that is no registered
// action (a built-in, scored for Genkit's eval tools) is traced as one, a root span when ctx has
// none (WithRootSpan's callback sees it start).
func (r *Registry) RunEvaluatorSpan(ctx context.Context, name string, input json.RawMessage, fn func(ctx context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	ctx, span := r.startSpan(ctx, name, "action", "evaluator")
	r.setJSONAttr(span, AttrInput, input)
	out, err := fn(ctx)
	if err == nil {
		r.setJSONAttr(span, AttrOutput, out)
	}
	r.endSpan(span, err)
	return out, err
}
