package engine

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
)

// Flow is a registered, typed unit of work: usually an agent that calls Generate. Running it opens
// the root span ("genkit:type" action, subtype flow) that the generate spans nest under.
type Flow[In, Out, Stream any] struct {
	r    *Registry
	desc ActionDesc
	fn   func(ctx context.Context, in In, send func(context.Context, Stream) error) (Out, error)
}

// FlowFunc is a plain flow.
type FlowFunc[In, Out any] func(ctx context.Context, in In) (Out, error)

// StreamingFlowFunc is a streaming flow; send delivers a chunk to the caller, and its error
// should end the flow.
type StreamingFlowFunc[In, Out, Stream any] func(ctx context.Context, in In, send func(context.Context, Stream) error) (Out, error)

// DefineFlow registers a plain flow under /flow/<name>. It panics on a duplicate name or a bad
// schema.
func DefineFlow[In, Out any](r *Registry, name string, fn FlowFunc[In, Out]) *Flow[In, Out, struct{}] {
	return defineFlow[In, Out, struct{}](r, name, func(ctx context.Context, in In, _ func(context.Context, struct{}) error) (Out, error) {
		return fn(ctx, in)
	}, false)
}

// DefineStreamingFlow registers a streaming flow under /flow/<name>. It panics on a duplicate name
// or a bad schema.
func DefineStreamingFlow[In, Out, Stream any](r *Registry, name string, fn StreamingFlowFunc[In, Out, Stream]) *Flow[In, Out, Stream] {
	return defineFlow(r, name, fn, true)
}

func defineFlow[In, Out, Stream any](r *Registry, name string, fn func(context.Context, In, func(context.Context, Stream) error) (Out, error), streaming bool) *Flow[In, Out, Stream] {
	// An unconstrained type has a nil schema, which accepts everything.
	in, _, err := SchemaFor[In]()
	if err != nil {
		panic(err)
	}
	out, _, err := SchemaFor[Out]()
	if err != nil {
		panic(err)
	}
	f := &Flow[In, Out, Stream]{r: r, fn: fn, desc: ActionDesc{
		Key: ActionKey(ActionTypeFlow, name), Name: name, Type: ActionTypeFlow,
		InputSchema: in, OutputSchema: out, Metadata: map[string]any{"streaming": streaming},
	}}
	if streaming {
		if f.desc.StreamSchema, _, err = SchemaFor[Stream](); err != nil {
			panic(err)
		}
	}
	r.mustRegister(f)
	return f
}

// Desc implements Action.
func (f *Flow[In, Out, Stream]) Desc() *ActionDesc { return &f.desc }

// Name returns the flow's name.
func (f *Flow[In, Out, Stream]) Name() string { return f.desc.Name }

// Run runs the flow without streaming.
func (f *Flow[In, Out, Stream]) Run(ctx context.Context, in In) (Out, error) {
	return f.Stream(ctx, in, nil)
}

// Stream runs the flow, delivering its chunks to cb (which may be nil).
func (f *Flow[In, Out, Stream]) Stream(ctx context.Context, in In, cb func(context.Context, Stream) error) (Out, error) {
	ctx, span := f.r.startSpan(ctx, f.desc.Name, "action", "flow", attribute.String(AttrGenAIOp, "invoke_agent"))
	ctx = withRegistry(ctx, f.r)
	f.r.setJSONAttr(span, AttrInput, in)
	send := func(ctx context.Context, s Stream) error {
		if cb == nil {
			return nil
		}
		return cb(ctx, s)
	}
	out, err := f.fn(ctx, in, send)
	if err != nil {
		err = asStatusError(ctx, err, "flow "+f.desc.Name)
	} else {
		f.r.setJSONAttr(span, AttrOutput, out)
	}
	f.r.endSpan(span, err)
	return out, err
}

// RunJSON implements Action: the input is validated against the input schema and decoded; chunks
// and the output are encoded as JSON.
func (f *Flow[In, Out, Stream]) RunJSON(ctx context.Context, input json.RawMessage, cb StreamFunc) (json.RawMessage, error) {
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if err := f.desc.InputSchema.ValidateJSON(input); err != nil {
		return nil, Errorf(StatusInvalidArgument, "flow %s input: %w", f.desc.Name, err)
	}
	var in In
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, Errorf(StatusInvalidArgument, "flow %s: decode input: %w", f.desc.Name, err)
	}
	var scb func(context.Context, Stream) error
	if cb != nil {
		scb = func(ctx context.Context, s Stream) error {
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			return cb(ctx, b)
		}
	}
	out, err := f.Stream(ctx, in, scb)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}
