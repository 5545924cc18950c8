package loupe

import (
	"context"
	"iter"

	"github.com/loupe-dev/loupe/internal/engine"
)

// Flow is a registered flow with input In, output Out and stream chunks Stream (struct{} for a
// flow that does not stream).
type Flow[In, Out, Stream any] struct {
	f *engine.Flow[In, Out, Stream]
}

// Name returns the flow's name.
func (f *Flow[In, Out, Stream]) Name() string { return f.f.Name() }

// Run runs the flow in this process, in a span of its own (the root of a trace when ctx has
// none), and returns its output. It is not durable: an interrupt in it is Genkit's, a response
// with FinishReason ai.FinishReasonInterrupted. Start a durable run through Loupe's run service
// (package devui) to have it wait for a reviewer.
func (f *Flow[In, Out, Stream]) Run(ctx context.Context, in In) (Out, error) {
	return f.f.Stream(ctx, in, nil)
}

// StreamingFlowValue is one value of a flow's stream: a chunk, or, last, the output (Done).
type StreamingFlowValue[Out, Stream any] struct {
	// Done is set on the last value, which carries Output instead of a chunk.
	Done bool
	// Output is the flow's output, when Done.
	Output Out
	// Stream is the chunk the flow sent, while Done is false.
	Stream Stream
}

// Stream runs the flow in this process, as Run, and yields its chunks as it sends them, then its
// output. Stopping the iteration early cancels the flow.
func (f *Flow[In, Out, Stream]) Stream(ctx context.Context, in In) iter.Seq2[*StreamingFlowValue[Out, Stream], error] {
	return func(yield func(*StreamingFlowValue[Out, Stream], error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stopped := false
		out, err := f.f.Stream(ctx, in, func(_ context.Context, chunk Stream) error {
			if !yield(&StreamingFlowValue[Out, Stream]{Stream: chunk}, nil) {
				stopped = true
				cancel()
				return context.Canceled
			}
			return nil
		})
		switch {
		case stopped:
		case err != nil:
			yield(nil, err)
		default:
			yield(&StreamingFlowValue[Out, Stream]{Done: true, Output: out}, nil)
		}
	}
}
