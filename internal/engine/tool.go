package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/loupe-dev/loupe/ai"
)

// Denier is a tool that shapes the answer its call gets when a reviewer denies it. Without one, a
// runner answers with its own structured denial.
type Denier interface {
	// Denial returns the tool response for a call denied by a reviewer, and false when the tool
	// has no shape of its own.
	Denial(by, reason string) (any, bool)
}

// DefineTool makes a typed tool and registers it under /tool/<name>, and under /tool.v2/<name> in
// the multipart form (its run by key returns {"output": …}), as Genkit does. Like http.Handle, it
// panics on programmer errors: a bad schema or a duplicate name.
func DefineTool[In, Out any](r *Registry, name, description string, fn ToolFunc[In, Out], opts ...ToolOption) *TypedTool[In, Out] {
	t := ai.NewTool(name, description, fn, opts...)
	r.RegisterTool(t)
	return t
}

// DefineMultipartTool makes a tool that returns output plus content parts and registers it under
// /tool.v2/<name>. It panics on programmer errors.
func DefineMultipartTool[In any](r *Registry, name, description string, fn MultipartToolFunc[In], opts ...ToolOption) *TypedTool[In, *ToolOutput] {
	t := ai.NewMultipartTool(name, description, fn, opts...)
	r.RegisterTool(t)
	return t
}

// DefineInterrupt registers an interrupt-only tool (ai.NewInterrupt): it always interrupts and
// cannot be restarted, only answered. Like DefineTool, it registers /tool/<name> and
// /tool.v2/<name>. It panics on programmer errors.
func DefineInterrupt[In, Out any](r *Registry, name, description string, opts ...ToolOption) *TypedTool[In, Out] {
	t := ai.NewInterrupt[In, Out](name, description, opts...)
	r.RegisterTool(t)
	return t
}

// restartable reports whether interrupts of t may be restarted: false for an interrupt-only tool.
func restartable(t Tool) bool {
	if r, ok := t.(interface{ Restartable() bool }); ok {
		return r.Restartable()
	}
	return true
}

// multipart reports whether t answers with content parts besides its output.
func multipart(t Tool) bool {
	m, ok := t.(interface{ IsMultipart() bool })
	return ok && m.IsMultipart()
}

// toolAction is a tool as the registry keeps it: an action under /tool/<name> (/tool.v2/<name>
// for a multipart tool), listed and run by key.
type toolAction struct {
	Tool
	desc ActionDesc
}

// asAction returns t as a registry action: itself when it is one (a prompt), else t wrapped.
func asAction(t Tool) Action {
	if a, ok := t.(Action); ok {
		return a
	}
	return newToolAction(t)
}

func newToolAction(t Tool) *toolAction {
	d := t.Definition()
	typ := ActionTypeTool
	if multipart(t) {
		typ = ActionTypeToolV2
	}
	md := map[string]any{}
	for k, v := range d.Metadata {
		md[k] = v
	}
	if !restartable(t) {
		md["tool"] = map[string]any{"restartable": false}
	}
	if len(md) == 0 {
		md = nil
	}
	return &toolAction{Tool: t, desc: ActionDesc{
		Key: ActionKey(typ, t.Name()), Name: t.Name(), Type: typ, Description: d.Description,
		InputSchema: d.InputSchema, OutputSchema: d.OutputSchema, Metadata: md,
	}}
}

// Desc implements Action.
func (t *toolAction) Desc() *ActionDesc { return &t.desc }

// Restartable says whether the tool's interrupts may be restarted.
func (t *toolAction) Restartable() bool { return restartable(t.Tool) }

// IsMultipart says whether the tool answers with content parts.
func (t *toolAction) IsMultipart() bool { return multipart(t.Tool) }

// Denial implements Denier for the tools that do.
func (t *toolAction) Denial(by, reason string) (any, bool) {
	if d, ok := t.Tool.(Denier); ok {
		return d.Denial(by, reason)
	}
	return nil, false
}

// RunJSON implements Action: run the tool outside a generate (for example from the dev UI).
func (t *toolAction) RunJSON(ctx context.Context, input json.RawMessage, _ StreamFunc) (json.RawMessage, error) {
	res, err := runToolJSON(ctx, t, input)
	if err != nil {
		return nil, err
	}
	if multipart(t.Tool) {
		return json.Marshal(res)
	}
	return json.Marshal(res.Output)
}

func runToolJSON(ctx context.Context, t Tool, input json.RawMessage) (*ToolOutput, error) {
	name := t.Name()
	if err := t.Definition().InputSchema.ValidateJSON(input); err != nil {
		return nil, Errorf(StatusInvalidArgument, "tool %s input: %w", name, err)
	}
	res, err := t.RunTool(&ToolContext{Context: ctx, Name: name}, input)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &ToolOutput{}
	}
	return res, nil
}

// toolV2 is the /tool.v2/ form of a non-multipart tool (Genkit's basicToolV2): the same tool whose
// run by key wraps the output as {"output": …}, the multipart tool response shape.
type toolV2 struct {
	*toolAction
	desc ActionDesc
}

func newToolV2(t *toolAction) *toolV2 {
	d := t.desc
	d.Key = ActionKey(ActionTypeToolV2, d.Name)
	d.Type = ActionTypeToolV2
	if out := d.OutputSchema; out != nil {
		if s, err := NewSchema(map[string]any{"type": "object", "properties": map[string]any{"output": out.Raw()}}); err == nil {
			d.OutputSchema = s
		}
	}
	return &toolV2{toolAction: t, desc: d}
}

// Desc implements Action.
func (t *toolV2) Desc() *ActionDesc { return &t.desc }

// RunJSON implements Action: the tool's output as {"output": …}.
func (t *toolV2) RunJSON(ctx context.Context, input json.RawMessage, _ StreamFunc) (json.RawMessage, error) {
	res, err := runToolJSON(ctx, t.Tool, input)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// toToolDefinition applies Genkit's naming: the model sees the short name (after the last "/") and
// metadata.originalName keeps the full name when the two differ.
func toToolDefinition(d *ToolDefinition) *ToolDefinition {
	i := strings.LastIndexByte(d.Name, '/')
	if i < 0 {
		return d
	}
	cp := *d
	cp.Name = d.Name[i+1:]
	cp.Metadata = cloneMap(d.Metadata)
	if cp.Metadata == nil {
		cp.Metadata = map[string]any{}
	}
	cp.Metadata[MetaOriginalName] = d.Name
	return &cp
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// interruptValue is the value of metadata.interrupt for a tool's interrupt: its metadata, or true.
func interruptValue(e *InterruptError) any {
	if e.Metadata == nil {
		return true
	}
	return e.Metadata
}

func asInterrupt(err error, target **InterruptError) bool { return errors.As(err, target) }

// ToolDesc describes a tool as the registry lists it.
func ToolDesc(t Tool) *ActionDesc { return asAction(t).Desc() }
