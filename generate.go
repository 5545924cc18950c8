package loupe

import (
	"context"

	"github.com/loupe-dev/loupe/internal/engine"
)

// Generate runs Genkit's generate loop: it calls the model, runs the tools it asks for (in
// parallel, answers in the model's order), and calls it again, until the model answers without a
// tool request, a tool interrupts (FinishReason is FinishReasonInterrupted; resume with
// WithRespond or WithRestart and the response's History), or the turn limit is reached (an ABORTED
// error that carries the last response).
func Generate(ctx context.Context, app *App, opts ...GenerateOption) (*ModelResponse, error) {
	return engine.Generate(ctx, app.reg, opts...)
}

// GenerateText is Generate that returns the answer's text.
func GenerateText(ctx context.Context, app *App, opts ...GenerateOption) (string, error) {
	resp, err := engine.Generate(ctx, app.reg, opts...)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

// WithModel calls m.
func WithModel(m Model) GenerateOption { return engine.WithModel(m) }

// WithModelName calls the registered model of that name ("openai/gpt-4o-mini") or key.
func WithModelName(name string) GenerateOption { return engine.WithModelName(name) }

// WithSystem sets the system instruction.
func WithSystem(text string) GenerateOption { return engine.WithSystem(text) }

// WithPrompt adds the user's message.
func WithPrompt(text string) GenerateOption { return engine.WithPrompt(text) }

// WithPromptParts adds a user's message made of parts (text and media, say).
func WithPromptParts(parts ...*Part) GenerateOption { return engine.WithPromptParts(parts...) }

// WithMessages starts from a conversation.
func WithMessages(msgs ...*Message) GenerateOption { return engine.WithMessages(msgs...) }

// WithTools gives the model tools.
func WithTools(tools ...Tool) GenerateOption { return engine.WithTools(tools...) }

// WithToolNames gives the model registered tools by name.
func WithToolNames(names ...string) GenerateOption { return engine.WithToolNames(names...) }

// WithToolChoice tells the model whether it may (auto), must (required) or must not (none) call
// tools.
func WithToolChoice(choice ToolChoice) GenerateOption { return engine.WithToolChoice(choice) }

// WithConfig passes model configuration (temperature, max output tokens, …).
func WithConfig(cfg any) GenerateOption { return engine.WithConfig(cfg) }

// WithDocs gives the model documents as context.
func WithDocs(docs ...*Document) GenerateOption { return engine.WithDocs(docs...) }

// WithMaxTurns sets the turn limit: how many times tools may run before Generate gives up with
// ABORTED (default 5). 0 allows no tool turn: the first tool request is ABORTED.
func WithMaxTurns(n int) GenerateOption { return engine.WithMaxTurns(n) }

// WithReturnToolRequests stops at the model's tool requests instead of running them.
func WithReturnToolRequests(v bool) GenerateOption { return engine.WithReturnToolRequests(v) }

// WithOutputType asks for JSON output of type T: its schema goes to the model, and the answer is
// validated against it (ModelResponse.Output decodes it).
func WithOutputType[T any]() GenerateOption { return engine.WithOutputType[T]() }

// WithOutputFormat asks for an output format: "text" (the default) or "json".
func WithOutputFormat(format string) GenerateOption { return engine.WithOutputFormat(format) }

// WithOutputInstructions replaces the instructions that tell the model the output format.
func WithOutputInstructions(text string) GenerateOption {
	return engine.WithOutputInstructions(text)
}

// WithStreaming streams the model's chunks to cb as they come.
func WithStreaming(cb ModelStreamFunc) GenerateOption { return engine.WithStreaming(cb) }

// WithMiddleware wraps each turn, model call and tool execution.
func WithMiddleware(mws ...*Middleware) GenerateOption { return engine.WithMiddleware(mws...) }

// WithRespond resumes an interrupted generate, answering interrupted tool calls in place of the
// tools (parts from RespondPart or TypedTool.Respond). Pass the interrupted response's History
// with WithMessages.
func WithRespond(parts ...*Part) GenerateOption { return engine.WithRespond(parts...) }

// WithRestart resumes an interrupted generate by running interrupted tool calls again, now with
// tc.IsResumed set (parts from RestartPart or TypedTool.Restart).
func WithRestart(parts ...*Part) GenerateOption { return engine.WithRestart(parts...) }

// RespondPart answers the interrupted call ref of toolName with output.
func RespondPart(toolName, ref string, output any) *Part {
	return engine.RespondPart(toolName, ref, output)
}

// RestartPart restarts the interrupted call ref of toolName, with replaceInput instead of its
// input when not nil, and resumed as the metadata the tool reads from tc.Resumed.
func RestartPart(toolName, ref string, replaceInput any, resumed map[string]any) *Part {
	return engine.RestartPart(toolName, ref, replaceInput, resumed)
}

// ErrInterrupted is in the chain of the error a Generate call of a durable run returns when a
// tool interrupted to ask a person (errors.Is(err, loupe.ErrInterrupted)). Return it from the
// flow as any error: the run waits in the inbox, and once the reviewers have decided, the flow
// runs again and the interrupted call continues where it stopped. Nothing after an interrupted
// call runs meanwhile, even in a flow that ignores the error: every later Generate call and step
// of the run returns it too. Outside a durable run (Flow.Run in your own process) Generate keeps
// Genkit's behaviour: no error, and a response whose FinishReason is FinishReasonInterrupted.
var ErrInterrupted = engine.ErrInterrupted

// Run runs fn as a step named name, as Genkit Go's genkit.Run does: a span of its own in the
// flow's trace. In a durable run it is also a journaled step: its result is stored, as JSON, the
// first time, and returned from the store without calling fn when the run resumes, is taken over
// after a crash, or is replayed exactly. Code that reads the clock, draws random numbers or calls
// an API belongs in a step. A durable flow makes its steps and Generate calls one at a time and
// in the same order on every execution; one that differs from the recording fails the run with a
// non-determinism error naming the step.
func Run[Out any](ctx context.Context, name string, fn func() (Out, error)) (Out, error) {
	return engine.Run(ctx, name, fn)
}
