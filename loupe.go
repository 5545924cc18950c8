// Package loupe is Loupe's Go API: define your agent's flows, tools, interrupts, prompts and
// models, and run them with Genkit's generate semantics (a tool loop with a turn limit, parallel
// tools, middleware, streaming chunks, and tools that interrupt to ask a person, resumed with a
// response or a restart). Run durably by Loupe's run service (package devui), each run is
// checkpointed at every step, waits for its reviewers in PostgreSQL, and survives crashes and
// restarts.
//
// The API is Genkit Go's, so that a Genkit Go program ports by renaming its imports: package ai
// holds the vocabulary (messages, parts, tools, options such as ai.WithPrompt), and this package
// the functions of Genkit's genkit package:
//
//	Genkit Go                               Loupe
//	"github.com/firebase/genkit/go/genkit"   "github.com/loupe-dev/loupe"   (as genkit, or loupe)
//	"github.com/firebase/genkit/go/ai"       "github.com/loupe-dev/loupe/ai"
//	genkit.Init(ctx, genkit.WithDefaultModel(m))   loupe.Init(ctx, loupe.WithDefaultModel(m))
//	genkit.DefineFlow, DefineStreamingFlow, DefineTool, DefineModel, Generate, GenerateText,
//	GenerateData, GenerateStream, Run       the same names here
//
// Models come from the packages openai (any OpenAI-compatible endpoint: OpenAI, Ollama, vLLM, LM
// Studio) and scripted (deterministic models for tests and offline demos), or from DefineModel.
//
// # Durable runs
//
// A flow run by the run service is durable, and two rules make any flow safe there. An interrupt
// stops the flow: the Generate call returns an error wrapping ErrInterrupted, which the flow
// passes up, and nothing after it runs until the reviewers have decided. Code that reads the
// clock, draws random numbers or calls an API goes in a step (Run), whose result is journaled. A
// flow run in your own process (Flow.Run) keeps Genkit's behaviour: an interrupted Generate
// returns its response, with FinishReason ai.FinishReasonInterrupted, and no error.
package loupe

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/engine"
)

// App holds an agent program's actions: its flows, tools, prompts and models. Define them on it
// with the Define functions; it is safe for concurrent use.
type App struct {
	reg *engine.Registry
}

// Genkit is App under the name of Genkit Go's type, so that a port's *genkit.Genkit reads
// *loupe.Genkit.
type Genkit = App

// Option configures an App.
type Option func(*options)

type options struct {
	tp           trace.TracerProvider
	defaultModel string
}

// WithTracerProvider makes the app's actions report their spans (flow, one generate span per
// turn, model and tool calls, Genkit's attribute names) to tp. Without it spans are not recorded;
// Loupe's own commands set it to export to PostgreSQL.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// WithDefaultModel names the registered model a generate calls when it is given none.
func WithDefaultModel(name string) Option {
	return func(o *options) { o.defaultModel = name }
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
	if o.defaultModel != "" {
		ropts = append(ropts, engine.WithDefaultModel(o.defaultModel))
	}
	return &App{reg: engine.NewRegistry(ropts...)}
}

// Init is New under Genkit Go's name; ctx is not used.
func Init(_ context.Context, opts ...Option) *App { return New(opts...) }

func init() {
	bridge.AppRegistry = func(app any) *engine.Registry { return app.(*App).reg }
	bridge.NewApp = func(reg *engine.Registry) any { return &App{reg: reg} }
}
