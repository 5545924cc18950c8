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
//
// A prompt is also a tool, found under /prompt/<name> (Registry.LookupTool, WithToolNames). As in
// Genkit, a model calling it transfers the conversation to the prompt rather than running it: the
// call is answered "transferred to <name>", and the next turns run with the prompt's rendered
// messages in front of the history (tagged metadata.preamble, replacing an earlier transfer's)
// and with its model, tools and config where it sets them.
type Prompt[In any] struct {
	r      *Registry
	desc   ActionDesc
	def    ToolDefinition
	render func(In) (string, error)
	cfg    PromptConfig
}

// DefinePrompt registers a prompt under /prompt/<name>. render turns the input into the user's
// message. It panics on a duplicate name or a bad schema.
func DefinePrompt[In any](r *Registry, name, description string, render func(In) (string, error), cfg PromptConfig) *Prompt[In] {
	in, _, err := SchemaFor[In]() // nil for an unconstrained In: it accepts everything
	if err != nil {
		panic(err)
	}
	p := &Prompt[In]{r: r, render: render, cfg: cfg, desc: ActionDesc{
		Key: ActionKey(ActionTypePrompt, name), Name: name, Type: ActionTypePrompt, Description: description,
		InputSchema: in, Metadata: map[string]any{"prompt": map[string]any{"model": cfg.Model, "tools": cfg.Tools}},
	}}
	p.def = *toToolDefinition(&ToolDefinition{Name: name, Description: description, InputSchema: in})
	r.mustRegister(p)
	return p
}

// Name implements Tool.
func (p *Prompt[In]) Name() string { return p.desc.Name }

// Definition implements Tool: the model is told the prompt's name, description and input schema.
func (p *Prompt[In]) Definition() *ToolDefinition { return &p.def }

// RunTool implements Tool. A prompt called by a model is a transfer, which the generate loop
// handles itself, so a direct call is FAILED_PRECONDITION.
func (p *Prompt[In]) RunTool(*ToolContext, json.RawMessage) (*ToolOutput, error) {
	return nil, Errorf(StatusFailedPrecondition, "prompt %s: a prompt used as a tool transfers the conversation; it runs only inside generate", p.desc.Name)
}

// preamble renders the prompt for a transfer (Genkit's transferPreamble): its system and user
// messages, and the model, tools and config it sets.
func (p *Prompt[In]) preamble(input json.RawMessage) (*GenerateActionOptions, error) {
	var in In
	if len(input) > 0 && string(input) != "null" {
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, Errorf(StatusInvalidArgument, "prompt %s: decode input: %w", p.desc.Name, err)
		}
	}
	text, err := p.render(in)
	if err != nil {
		return nil, Errorf(StatusInvalidArgument, "prompt %s: render: %w", p.desc.Name, err)
	}
	pre := p.transferOptions()
	if p.cfg.System != "" {
		pre.Messages = append(pre.Messages, NewTextMessage(RoleSystem, p.cfg.System))
	}
	pre.Messages = append(pre.Messages, NewTextMessage(RoleUser, text))
	return pre, nil
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

// transferOptions are the model, tools and config the turns after a transfer run with.
func (p *Prompt[In]) transferOptions() *GenerateActionOptions {
	return &GenerateActionOptions{Model: p.cfg.Model, Tools: p.cfg.Tools, Config: p.cfg.Config}
}

// transferTool is a tool whose call transfers the conversation (a Prompt), as Genkit's
// isPromptAction tells prompt tools apart in resolveToolRequest.
type transferTool interface {
	Tool
	preamble(input json.RawMessage) (*GenerateActionOptions, error)
	transferOptions() *GenerateActionOptions
}

// resumedTransfer finds the last transfer to a prompt in a history being resumed (a call to a
// prompt tool that has its response), and returns the options it set. Genkit's caller rebuilds the
// request of a resume itself, with its own model and tools, and so leaves the prompt it had
// transferred to; a durable run resumes where the conversation was, with the prompt's.
func (r *Registry) resumedTransfer(history []*Message) *GenerateActionOptions {
	answered := map[string]bool{}
	for _, m := range history {
		for _, p := range m.Content {
			if p.ToolResponse != nil {
				answered[p.ToolResponse.Name+"\x00"+p.ToolResponse.Ref] = true
			}
		}
	}
	var last transferTool
	for _, m := range history {
		if m.Role != RoleModel {
			continue
		}
		for _, p := range m.Content {
			if p.ToolRequest == nil || !answered[p.ToolRequest.Name+"\x00"+p.ToolRequest.Ref] {
				continue
			}
			if t, ok := r.LookupTool(p.ToolRequest.Name); ok {
				if tt, ok := t.(transferTool); ok {
					last = tt
				}
			}
		}
	}
	if last == nil {
		return nil
	}
	return last.transferOptions()
}

// MetaPreamble marks the messages a transfer to a prompt put in front of the history.
const MetaPreamble = "preamble"

// applyTransfer is Genkit's applyTransferPreamble: the preamble's messages, tagged, replace the
// previous preamble in front of the history, and its model, tools, tool choice and config replace
// the request's where set.
func applyTransfer(next *GenerateActionOptions, pre *GenerateActionOptions) {
	msgs := make([]*Message, 0, len(pre.Messages)+len(next.Messages))
	for _, m := range pre.Messages {
		cp := *m
		cp.Metadata = cloneMap(m.Metadata)
		if cp.Metadata == nil {
			cp.Metadata = map[string]any{}
		}
		cp.Metadata[MetaPreamble] = true
		msgs = append(msgs, &cp)
	}
	for _, m := range next.Messages {
		if v, _ := m.Metadata[MetaPreamble].(bool); !v {
			msgs = append(msgs, m)
		}
	}
	next.Messages = msgs
	applyTransferOptions(next, pre)
}

// applyTransferOptions sets a transfer's model, tool choice, tools and config on a request, where
// the transfer sets them.
func applyTransferOptions(next *GenerateActionOptions, pre *GenerateActionOptions) {
	if pre.Model != "" {
		next.Model = pre.Model
	}
	if pre.ToolChoice != "" {
		next.ToolChoice = pre.ToolChoice
	}
	if len(pre.Tools) > 0 {
		next.Tools = pre.Tools
	}
	if pre.Config != nil {
		next.Config = pre.Config
	}
}
