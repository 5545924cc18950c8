package loupe

import (
	"context"

	"github.com/loupe-dev/loupe/internal/engine"
)

// DefineFlow registers a flow under /flow/<name>. Its input and output schemas come from In and
// Out. Run it with Flow.Run, or durably through Loupe's run service. It panics on a duplicate name.
func DefineFlow[In, Out any](app *App, name string, fn func(ctx context.Context, in In) (Out, error)) *Flow[In, Out, struct{}] {
	return engine.DefineFlow(app.reg, name, engine.FlowFunc[In, Out](fn))
}

// DefineStreamingFlow registers a flow that sends chunks of type Stream as it goes; send delivers
// one to the caller (and, in a durable run, to the run's live stream).
func DefineStreamingFlow[In, Out, Stream any](app *App, name string,
	fn func(ctx context.Context, in In, send func(Stream) error) (Out, error)) *Flow[In, Out, Stream] {
	return engine.DefineStreamingFlow(app.reg, name, engine.StreamingFlowFunc[In, Out, Stream](fn))
}

// DefineTool registers a tool under /tool/<name>. The model sees its description and the JSON
// schema of In; the output is validated against Out's. A tool asks a person by returning
// tc.Interrupt(metadata), and acts when it is restarted (tc.IsResumed). It panics on a duplicate
// name or a bad schema.
func DefineTool[In, Out any](app *App, name, description string, fn func(tc *ToolContext, in In) (Out, error), opts ...ToolOption) *TypedTool[In, Out] {
	return engine.DefineTool(app.reg, name, description, engine.ToolFunc[In, Out](fn), opts...)
}

// DefineMultipartTool registers a tool that answers with content parts (media, say) besides its
// output.
func DefineMultipartTool[In any](app *App, name, description string, fn func(tc *ToolContext, in In) (*ToolOutput, error), opts ...ToolOption) *TypedTool[In, any] {
	return engine.DefineMultipartTool(app.reg, name, description, engine.MultipartToolFunc[In](fn), opts...)
}

// DefineInterrupt registers a tool that always asks a person: the model's call stops the loop, and
// the reviewer's answer (of type Out) becomes the tool's output.
func DefineInterrupt[In, Out any](app *App, name, description string, opts ...ToolOption) *TypedTool[In, Out] {
	return engine.DefineInterrupt[In, Out](app.reg, name, description, opts...)
}

// DefinePrompt registers a prompt under /prompt/<name>: render turns the input into the user's
// message, and cfg gives the model, system instruction and tools. A prompt is also a tool (pass it
// to WithTools, or its name to WithToolNames): as in Genkit, a model that calls it transfers the
// conversation to it, and the next turns run with its rendered messages in front of the history
// (tagged metadata.preamble) and with its model, tools and config.
func DefinePrompt[In any](app *App, name, description string, render func(In) (string, error), cfg PromptConfig) *Prompt[In] {
	return engine.DefinePrompt(app.reg, name, description, render, cfg)
}

// DefineModel registers a model under /model/<name>.
func DefineModel(app *App, name string, info ModelInfo, fn ModelFunc) Model {
	return engine.DefineModel(app.reg, name, info, fn)
}

// WithDenial gives a tool its own answer for a reviewer's denial (what the model reads), instead
// of the standard {"denied": true, "by", "reason", "message"}.
func WithDenial(f func(by, reason string) any) ToolOption { return engine.WithDenial(f) }

// WithToolInputSchema gives a tool an explicit input JSON schema instead of the one derived from In.
func WithToolInputSchema(schema any) ToolOption { return engine.WithToolInputSchema(schema) }

// WithToolOutputSchema gives a tool an explicit output JSON schema.
func WithToolOutputSchema(schema any) ToolOption { return engine.WithToolOutputSchema(schema) }
