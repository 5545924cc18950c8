package loupe

import (
	"context"
	"iter"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/engine"
)

// Generate runs Genkit's generate loop: it calls the model, runs the tools it asks for (in
// parallel, answers in the model's order), and calls it again, until the model answers without a
// tool request, a tool interrupts, or the turn limit is reached (an ABORTED *ai.Error that carries
// the last response).
//
// A tool's interrupt ends the generate with FinishReason ai.FinishReasonInterrupted. In a durable
// run it also returns an error wrapping ErrInterrupted (with the response): return it from the
// flow, and the run waits for its reviewers, then goes on from here. In your own process resume
// it yourself with ai.WithToolResponses or ai.WithToolRestarts and the response's History.
func Generate(ctx context.Context, app *App, opts ...ai.GenerateOption) (*ai.ModelResponse, error) {
	return engine.Generate(ctx, app.reg, engine.Public(opts...))
}

// GenerateText is Generate that returns the answer's text.
func GenerateText(ctx context.Context, app *App, opts ...ai.GenerateOption) (string, error) {
	resp, err := Generate(ctx, app, opts...)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

// GenerateData is Generate asking for JSON output of type Out (ai.WithOutputType): it returns the
// answer decoded, and the response.
func GenerateData[Out any](ctx context.Context, app *App, opts ...ai.GenerateOption) (*Out, *ai.ModelResponse, error) {
	var out Out
	resp, err := Generate(ctx, app, append([]ai.GenerateOption{ai.WithOutputType(&out)}, opts...)...)
	if err != nil {
		return nil, resp, err
	}
	if err := resp.Output(&out); err != nil {
		return nil, resp, err
	}
	return &out, resp, nil
}

// GenerateStream is Generate that yields the chunks as they come, then the final response (Done).
// Stopping the iteration early cancels the generate.
func GenerateStream(ctx context.Context, app *App, opts ...ai.GenerateOption) iter.Seq2[*ai.ModelStreamValue, error] {
	return func(yield func(*ai.ModelStreamValue, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stopped := false
		stream := ai.WithStreaming(func(_ context.Context, chunk *ai.ModelResponseChunk) error {
			if !yield(&ai.ModelStreamValue{Chunk: chunk}, nil) {
				stopped = true
				cancel()
				return context.Canceled
			}
			return nil
		})
		resp, err := Generate(ctx, app, append(opts, stream)...)
		switch {
		case stopped:
		case err != nil:
			yield(nil, err)
		default:
			yield(&ai.ModelStreamValue{Done: true, Response: resp}, nil)
		}
	}
}

// ErrInterrupted is ai.ErrInterrupted: it is in the chain of the error a Generate call of a
// durable run returns when a tool interrupted to ask a person (errors.Is(err,
// loupe.ErrInterrupted)). Return it from the flow as any error: the run waits in the inbox, and
// once the reviewers have decided, the flow runs again and the interrupted call continues where it
// stopped. Nothing after an interrupted call runs meanwhile, even in a flow that ignores the
// error: every later Generate call and step of the run returns it too.
var ErrInterrupted = ai.ErrInterrupted

// Run runs fn as a step named name, as Genkit Go's genkit.Run does: a span of its own in the
// flow's trace. In a durable run it is also a journaled step: its result is stored, as JSON, the
// first time, and returned from the store without calling fn when the run resumes, is taken over
// after a crash, or is replayed exactly. Code that reads the clock, draws random numbers or calls
// an API belongs in a step. A durable flow makes its steps and Generate calls one at a time and
// in the same order on every execution; one that differs from the recording fails the run with an
// *ai.NonDeterminismError naming the step.
func Run[Out any](ctx context.Context, name string, fn func() (Out, error)) (Out, error) {
	return engine.Run(ctx, name, fn)
}

// ActionContext is what the caller of an action says about itself, auth above all: Genkit's
// action context (core.ActionContext), sent as "context" to the reflection API's runAction and
// set from the context field of an action's page in Loupe.
type ActionContext = map[string]any

// FromContext returns the action context a flow runs under, as Genkit Go's core.FromContext does,
// or nil when its caller gave none. A durable run has the context it was started with on every
// execution: the first, each resume after a reviewer's decision, a takeover, and its replays.
func FromContext(ctx context.Context) ActionContext {
	return engine.ActionContextFrom(ctx)
}
