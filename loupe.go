// Package loupe is Loupe's Go API. Define your agent's flows, tools, interrupts, prompts and models
// much as with Genkit Go, and run them with Genkit's generate semantics: a tool loop with a turn
// limit, parallel tools, middleware, streaming chunks, and tools that interrupt to ask a person,
// resumed with a response or a restart.
//
// Porting a Genkit Go program is mostly an import change:
//
//	Genkit Go                          Loupe
//	g := genkit.Init(ctx, ...)         app := loupe.New()
//	genkit.DefineFlow(g, name, fn)     loupe.DefineFlow(app, name, fn)
//	genkit.DefineTool(g, name, d, fn)  loupe.DefineTool(app, name, d, fn)
//	genkit.Generate(ctx, g, opts...)   loupe.Generate(ctx, app, opts...)
//	ai.WithPrompt, ai.WithTools, …     loupe.WithPrompt, loupe.WithTools, …
//	tc.Interrupt, tc.IsResumed         the same, on *loupe.ToolContext
//
// Models come from the subpackages openai (any OpenAI-compatible endpoint: OpenAI, Ollama, vLLM,
// LM Studio) and scripted (deterministic models for tests and offline demos), or from DefineModel.
//
// Flows run in-process with Flow.Run and Flow.Stream. Run durably, with the trace explorer and
// the reviewers' inbox, they are executed by Loupe's run service: each turn is checkpointed, an
// interrupt waits for a reviewer in PostgreSQL, and a run survives crashes and restarts. Code in a
// flow between its generate calls must then be deterministic (see the README's "Durability").
package loupe

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/engine"
)

// App holds an agent program's actions: its flows, tools, prompts and models. Define them on it
// with the Define functions; it is safe for concurrent use.
type App struct {
	reg *engine.Registry
}

// Option configures an App.
type Option func(*options)

type options struct {
	tp trace.TracerProvider
}

// WithTracerProvider makes the app's actions report their spans (flow, one generate span per
// turn, model and tool calls, Genkit's attribute names) to tp. Without it spans are not recorded;
// Loupe's own commands set it to export to PostgreSQL.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// New returns an empty App.
func New(opts ...Option) *App {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var ropts []engine.RegistryOption
	if o.tp != nil {
		ropts = append(ropts, engine.WithTracerProvider(o.tp))
	}
	return &App{reg: engine.NewRegistry(ropts...)}
}

func init() {
	bridge.AppRegistry = func(app any) *engine.Registry { return app.(*App).reg }
	bridge.NewApp = func(reg *engine.Registry) any { return &App{reg: reg} }
}
