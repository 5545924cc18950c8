package loupe

import (
	"context"
	"encoding/json"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/engine"
)

// LoadPromptDir loads every Dotprompt (.prompt) file under dir into app, as Genkit Go's
// WithPromptDir and Genkit JS's promptDir do, with the Dotprompt library Genkit Go uses. The
// files of a Genkit JS app load unchanged:
//
//   - name.prompt is the prompt /prompt/name; in a subdirectory sub, /prompt/sub/name.
//   - name.variant.prompt is the variant /prompt/name.variant.
//   - _name.prompt is the partial {{> name}}, usable by every file of the directory.
//
// The front matter gives the model, config, tools (by name, resolved when the prompt runs), the
// input schema (Picoschema or JSON Schema) and defaults, the output format and schema, and
// maxTurns; the template renders into whole messages ({{role}}, {{media}}, {{history}}). Each
// prompt runs like a DefinePrompt prompt: by key from the Actions page, the CLI and the API,
// durably, and as a tool (a transfer).
//
// A file that does not load stops neither the others nor the program: the error joins such
// files, each "file:line: why", and each one's prompt stays listed with that error and fails
// when run. devui serve --dev reloads a changed directory without a restart.
func LoadPromptDir(app *App, dir string) error {
	_, err := engine.LoadPromptDir(app.reg, dir)
	return err
}

// PromptFile is a prompt loaded by LoadPromptDir.
type PromptFile struct {
	p *engine.FilePrompt
}

// LookupPromptFile returns the loaded prompt with the name ("recipe", "recipe.quick",
// "support/triage"), or nil.
func LookupPromptFile(app *App, name string) *PromptFile {
	if p, ok := app.reg.Lookup(engine.ActionKey(engine.ActionTypePrompt, name)).(*engine.FilePrompt); ok {
		return &PromptFile{p: p}
	}
	return nil
}

// Name returns the prompt's name; it names the prompt as a tool too (ai.ToolRef).
func (p *PromptFile) Name() string { return p.p.Name() }

// Render renders the prompt's messages for input (a struct or map that encodes to the JSON
// object of the input schema; nil for the front matter's defaults), as Genkit's prompt.render
// does: history fills {{history}}, or goes before the last user message.
func (p *PromptFile) Render(input any, history ...*ai.Message) ([]*ai.Message, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	return p.p.Render(raw, history)
}

// Generate renders the prompt with input and generates with it, in a prompt span. Messages given
// with ai.WithMessages are the conversation's history, which {{history}} renders; other options
// come after the prompt's own.
func (p *PromptFile) Generate(ctx context.Context, input any, opts ...ai.GenerateOption) (*ai.ModelResponse, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	var history []*ai.Message
	rest := make([]ai.GenerateOption, 0, len(opts))
	for _, o := range opts {
		var d ai.GenerateOptions
		o(&d)
		if len(d.Messages) > 0 {
			history = append(history, d.Messages...)
			continue
		}
		rest = append(rest, o)
	}
	return p.p.Generate(ctx, raw, history, engine.Public(rest...))
}
