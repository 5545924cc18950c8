package engine

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
)

// PromptConfig is what a prompt generates with.
type PromptConfig struct {
	// Model is the registered model's name or key.
	Model string
	// System is the system instruction.
	System string
	// Tools are registered tools by name.
	Tools []string
	// MaxTurns is the turn limit; zero (or less) means DefaultMaxTurns, so a prompt cannot forbid
	// tool turns through it (pass WithMaxTurns(0) to Generate for that).
	MaxTurns int
	// Config is passed to the model.
	Config any
}

// Prompt is a registered prompt: a typed input rendered into the user's message, then a generate
// with the prompt's model, system instruction and tools. Its output is the model's response.
type Prompt[In any] struct {
	r      *Registry
	desc   ActionDesc
	render func(In) (string, error)
	cfg    PromptConfig
}

// DefinePrompt registers a prompt under /prompt/<name>. render turns the input into the user's
// message. It panics on a duplicate name or a bad schema.
func DefinePrompt[In any](r *Registry, name, description string, render func(In) (string, error), cfg PromptConfig) *Prompt[In] {
	in, err := SchemaFor[In]()
	if err != nil {
		panic(err)
	}
	p := &Prompt[In]{r: r, render: render, cfg: cfg, desc: ActionDesc{
		Key: ActionKey(ActionTypePrompt, name), Name: name, Type: ActionTypePrompt, Description: description,
		InputSchema: in, Metadata: map[string]any{"prompt": map[string]any{"model": cfg.Model, "tools": cfg.Tools}},
	}}
	r.mustRegister(p)
	return p
}

// Desc implements Action.
func (p *Prompt[In]) Desc() *ActionDesc { return &p.desc }

// Generate renders the prompt and runs the generate, in a prompt span.
func (p *Prompt[In]) Generate(ctx context.Context, in In, opts ...GenerateOption) (*ModelResponse, error) {
	ctx, span := p.r.startSpan(ctx, p.desc.Name, "action", "prompt", attribute.String(AttrGenAIOp, "invoke_agent"))
	p.r.setJSONAttr(span, AttrInput, in)
	text, err := p.render(in)
	if err != nil {
		err = Errorf(StatusInvalidArgument, "prompt %s: render: %w", p.desc.Name, err)
		p.r.endSpan(span, err)
		return nil, err
	}
	all := []GenerateOption{WithModelName(p.cfg.Model), WithPrompt(text)}
	if p.cfg.MaxTurns > 0 {
		all = append(all, WithMaxTurns(p.cfg.MaxTurns))
	}
	if p.cfg.System != "" {
		all = append(all, WithSystem(p.cfg.System))
	}
	if len(p.cfg.Tools) > 0 {
		all = append(all, WithToolNames(p.cfg.Tools...))
	}
	if p.cfg.Config != nil {
		all = append(all, WithConfig(p.cfg.Config))
	}
	resp, err := Generate(ctx, p.r, append(all, opts...)...)
	if err == nil {
		p.r.setJSONAttr(span, AttrOutput, resp.Text())
	}
	p.r.endSpan(span, err)
	return resp, err
}

// RunJSON implements Action: the input is validated and decoded; the output is the response's
// message, finish reason and usage.
func (p *Prompt[In]) RunJSON(ctx context.Context, input json.RawMessage, _ StreamFunc) (json.RawMessage, error) {
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if err := p.desc.InputSchema.ValidateJSON(input); err != nil {
		return nil, Errorf(StatusInvalidArgument, "prompt %s input: %w", p.desc.Name, err)
	}
	var in In
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, Errorf(StatusInvalidArgument, "prompt %s: decode input: %w", p.desc.Name, err)
	}
	resp, err := p.Generate(ctx, in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"message": resp.Message, "finishReason": resp.FinishReason, "usage": resp.Usage, "text": resp.Text()})
}
