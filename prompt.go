package loupe

import (
	"context"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/engine"
)

// PromptConfig is what a prompt generates with.
type PromptConfig struct {
	// Model is the registered model's name or key.
	Model string
	// System is the system instruction.
	System string
	// Tools are registered tools, by name.
	Tools []string
	// MaxTurns is the turn limit; zero (or less) means the default, 5.
	MaxTurns int
	// Config is passed to the model.
	Config any
}

// Prompt is a registered prompt: a typed input rendered into the user's message, then a generate
// with the prompt's model, system instruction and tools. It is also a tool: pass it to
// ai.WithTools, and a model that calls it transfers the conversation to it, as in Genkit.
type Prompt[In any] struct {
	p *engine.Prompt[In]
}

// DefinePrompt registers a prompt under /prompt/<name>: render turns the input into the user's
// message, and cfg gives the model, system instruction and tools. As a tool (ai.WithTools), a
// model that calls it transfers the conversation to it: the next turns run with its rendered
// messages in front of the history (tagged metadata.preamble) and with its model, tools and
// config.
func DefinePrompt[In any](app *App, name, description string, render func(In) (string, error), cfg PromptConfig) *Prompt[In] {
	return &Prompt[In]{p: engine.DefinePrompt(app.reg, name, description, render, engine.PromptConfig(cfg))}
}

// Name returns the prompt's name; it names the prompt as a tool too (ai.ToolRef).
func (p *Prompt[In]) Name() string { return p.p.Name() }

// Generate renders the prompt with in and generates with it, in a prompt span; opts come after
// the prompt's own.
func (p *Prompt[In]) Generate(ctx context.Context, in In, opts ...ai.GenerateOption) (*ai.ModelResponse, error) {
	return p.p.Generate(ctx, in, engine.Public(opts...))
}
