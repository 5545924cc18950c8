package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
)

// Tool is a function a model can call. Typed tools come from DefineTool, NewTool,
// DefineMultipartTool and DefineInterrupt; other packages may implement it for dynamic tools.
type Tool interface {
	Action
	// Name is the tool's registered name.
	Name() string
	// Definition is what the model is told about the tool; its schemas are compiled.
	Definition() *ToolDefinition
	// RunTool executes one call with the model's input as JSON. The input has been validated against
	// the input schema; the implementation validates its own output.
	RunTool(tc *ToolContext, input json.RawMessage) (*ToolOutput, error)
}

// ToolOutput is the result of one tool call: the output sent to the model, and for multipart
// tools, extra content parts (images, documents) sent alongside it.
type ToolOutput struct {
	Output  any     `json:"output,omitempty"`
	Content []*Part `json:"content,omitempty"`
}

// ToolContext is the context a tool runs with. It identifies the call and carries the resume state.
type ToolContext struct {
	context.Context
	// Name and Ref identify the call; Ref is the model's id for it (or a generated, stable one).
	Name string
	Ref  string
	// IdempotencyKey is "<run id or trace id>:<ref>": stable for the call across crashes and
	// resumes. Use it to dedupe side effects downstream.
	IdempotencyKey string
	// Turn is the generate turn the call belongs to (0-based, per Generate call).
	Turn int
	// Resumed is non-nil when the call is a restart of an interrupted call; it holds the resume
	// metadata (empty when there was none).
	Resumed map[string]any
	// OriginalInput is the input the interrupted call had, when the restart replaced it.
	OriginalInput any
}

// Interrupt returns an *InterruptError; return it from the tool to pause the loop and ask a person.
// metadata (may be nil) is stamped on the tool request as metadata.interrupt.
func (tc *ToolContext) Interrupt(metadata map[string]any) error {
	return &InterruptError{Metadata: metadata}
}

// IsResumed reports whether the call is a restart of an interrupted call.
func (tc *ToolContext) IsResumed() bool { return tc.Resumed != nil }

// ToolFunc is the implementation of a typed tool.
type ToolFunc[In, Out any] func(tc *ToolContext, input In) (Out, error)

// MultipartToolFunc is the implementation of a multipart tool: output plus content parts.
type MultipartToolFunc[In any] func(tc *ToolContext, input In) (*ToolOutput, error)

// ToolOption configures a tool definition.
type ToolOption func(*toolConfig)

type toolConfig struct {
	inputSchema, outputSchema any
	metadata                  map[string]any
	requestMetadata           func(input any) map[string]any
	denial                    func(by, reason string) any
}

// Denier is a tool that shapes the answer its call gets when a reviewer denies it. Without one, a
// runner answers with its own structured denial.
type Denier interface {
	// Denial returns the tool response for a call denied by a reviewer, and false when the tool
	// has no shape of its own.
	Denial(by, reason string) (any, bool)
}

// WithDenial gives the tool its own denial shape: the output a denied call answers the model with.
func WithDenial(f func(by, reason string) any) ToolOption {
	return func(c *toolConfig) { c.denial = f }
}

// WithToolInputSchema replaces the schema derived from the input type (a *Schema, JSON bytes or map).
func WithToolInputSchema(s any) ToolOption { return func(c *toolConfig) { c.inputSchema = s } }

// WithToolOutputSchema replaces the schema derived from the output type.
func WithToolOutputSchema(s any) ToolOption { return func(c *toolConfig) { c.outputSchema = s } }

// WithToolMetadata sets the tool action's metadata.
func WithToolMetadata(md map[string]any) ToolOption { return func(c *toolConfig) { c.metadata = md } }

// WithRequestMetadata sets, for an interrupt-only tool, the interrupt metadata computed from the
// call's input.
func WithRequestMetadata[In any](f func(In) map[string]any) ToolOption {
	return func(c *toolConfig) {
		c.requestMetadata = func(in any) map[string]any { v, _ := in.(In); return f(v) }
	}
}

// TypedTool is a tool with Go input and output types. Its schemas are compiled once, when it is made.
type TypedTool[In, Out any] struct {
	def       ToolDefinition
	desc      ActionDesc
	fn        func(tc *ToolContext, input In) (*ToolOutput, error)
	multipart bool
	reqMeta   func(any) map[string]any
	inIsAny   bool
	denial    func(by, reason string) any
}

// Denial implements Denier.
func (t *TypedTool[In, Out]) Denial(by, reason string) (any, bool) {
	if t.denial == nil {
		return nil, false
	}
	return t.denial(by, reason), true
}

// NewTool makes a typed tool without registering it; pass it to WithTools as a dynamic tool.
func NewTool[In, Out any](name, description string, fn ToolFunc[In, Out], opts ...ToolOption) (*TypedTool[In, Out], error) {
	t, err := newTool[In, Out](name, description, ActionTypeTool, opts)
	if err != nil {
		return nil, err
	}
	t.fn = func(tc *ToolContext, in In) (*ToolOutput, error) {
		out, err := fn(tc, in)
		if err != nil {
			return nil, err
		}
		return &ToolOutput{Output: out}, nil
	}
	return t, nil
}

// DefineTool makes a typed tool and registers it under /tool/<name>, and under /tool.v2/<name> in
// the multipart form (its run by key returns {"output": …}), as Genkit does. Like http.Handle, it panics on
// programmer errors: a bad schema or a duplicate name.
func DefineTool[In, Out any](r *Registry, name, description string, fn ToolFunc[In, Out], opts ...ToolOption) *TypedTool[In, Out] {
	t, err := NewTool(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	r.registerTool(t)
	return t
}

// DefineMultipartTool makes a tool that returns output plus content parts and registers it under
// /tool.v2/<name>. It panics on programmer errors.
func DefineMultipartTool[In any](r *Registry, name, description string, fn MultipartToolFunc[In], opts ...ToolOption) *TypedTool[In, any] {
	t, err := newTool[In, any](name, description, ActionTypeToolV2, opts)
	if err != nil {
		panic(err)
	}
	t.multipart = true
	t.fn = fn
	r.mustRegister(t)
	return t
}

// DefineInterrupt registers an interrupt-only tool: it has no implementation, always interrupts
// (with the metadata from WithRequestMetadata, or true) and is marked restartable=false, so it is
// answered with Respond. Like DefineTool, it registers /tool/<name> and /tool.v2/<name>. It panics
// on programmer errors.
func DefineInterrupt[In, Out any](r *Registry, name, description string, opts ...ToolOption) *TypedTool[In, Out] {
	t, err := newTool[In, Out](name, description, ActionTypeTool, opts)
	if err != nil {
		panic(err)
	}
	if t.desc.Metadata == nil {
		t.desc.Metadata = map[string]any{}
	}
	t.desc.Metadata["tool"] = map[string]any{"restartable": false}
	t.def.Metadata = cloneMap(t.def.Metadata)
	if t.def.Metadata == nil {
		t.def.Metadata = map[string]any{}
	}
	t.def.Metadata["interrupt"] = true
	t.fn = func(tc *ToolContext, in In) (*ToolOutput, error) {
		var md map[string]any
		if t.reqMeta != nil {
			md = t.reqMeta(in)
		}
		return nil, tc.Interrupt(md)
	}
	r.registerTool(t)
	return t
}

func newTool[In, Out any](name, description string, typ ActionType, opts []ToolOption) (*TypedTool[In, Out], error) {
	var c toolConfig
	for _, o := range opts {
		o(&c)
	}
	in, err := schemaOr[In](c.inputSchema)
	if err != nil {
		return nil, Errorf(StatusInvalidArgument, "tool %s input schema: %w", name, err)
	}
	out, err := schemaOr[Out](c.outputSchema)
	if err != nil {
		return nil, Errorf(StatusInvalidArgument, "tool %s output schema: %w", name, err)
	}
	t := &TypedTool[In, Out]{
		def:     ToolDefinition{Name: name, Description: description, InputSchema: in, OutputSchema: out},
		reqMeta: c.requestMetadata,
		denial:  c.denial,
		inIsAny: reflect.TypeFor[In]().Kind() == reflect.Interface,
	}
	t.def = *toToolDefinition(&t.def)
	t.desc = ActionDesc{
		Key: ActionKey(typ, name), Name: name, Type: typ, Description: description,
		InputSchema: in, OutputSchema: out, Metadata: cloneMap(c.metadata),
	}
	return t, nil
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

// schemaOr compiles the given schema, else derives T's; that is nil, accepting everything, for an
// unconstrained T.
func schemaOr[T any](given any) (*Schema, error) {
	if given != nil {
		return NewSchema(given)
	}
	s, _, err := SchemaFor[T]()
	return s, err
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

// Name implements Tool.
func (t *TypedTool[In, Out]) Name() string { return t.desc.Name }

// Definition implements Tool.
func (t *TypedTool[In, Out]) Definition() *ToolDefinition { return &t.def }

// Desc implements Action.
func (t *TypedTool[In, Out]) Desc() *ActionDesc { return &t.desc }

// Restartable reports whether interrupts of the tool may be restarted (false for interrupt-only
// tools).
func (t *TypedTool[In, Out]) Restartable() bool { return restartable(t) }

func restartable(t Tool) bool {
	if m, ok := t.Desc().Metadata["tool"].(map[string]any); ok {
		if v, ok := m["restartable"].(bool); ok {
			return v
		}
	}
	return true
}

// RunTool implements Tool: decode, run, validate the output against the compiled schema.
func (t *TypedTool[In, Out]) RunTool(tc *ToolContext, input json.RawMessage) (*ToolOutput, error) {
	var in In
	if len(input) > 0 && string(input) != "null" {
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, Errorf(StatusInvalidArgument, "tool %s: decode input: %w", t.desc.Name, err)
		}
	}
	res, err := t.fn(tc, in)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &ToolOutput{}
	}
	if t.multipart || t.def.OutputSchema != nil || res.Output != nil {
		raw, err := json.Marshal(res.Output)
		if err != nil {
			return nil, Errorf(StatusInternal, "tool %s: encode output: %w", t.desc.Name, err)
		}
		if err := t.def.OutputSchema.ValidateJSON(raw); err != nil {
			return nil, Errorf(StatusInvalidArgument, "tool %s output: %w", t.desc.Name, err)
		}
		res.Output = json.RawMessage(raw)
	}
	return res, nil
}

// RunJSON implements Action: run the tool outside a generate (for example from the dev UI).
func (t *TypedTool[In, Out]) RunJSON(ctx context.Context, input json.RawMessage, _ StreamFunc) (json.RawMessage, error) {
	if err := t.def.InputSchema.ValidateJSON(input); err != nil {
		return nil, Errorf(StatusInvalidArgument, "tool %s input: %w", t.desc.Name, err)
	}
	res, err := t.RunTool(&ToolContext{Context: ctx, Name: t.desc.Name}, input)
	if err != nil {
		return nil, err
	}
	if t.multipart {
		return json.Marshal(res)
	}
	return json.Marshal(res.Output)
}

// Respond builds the resume.respond part answering an interrupt of this tool, validating output
// against the tool's output schema.
func (t *TypedTool[In, Out]) Respond(interrupt *Part, output Out) (*Part, error) {
	raw, err := json.Marshal(output)
	if err != nil {
		return nil, Errorf(StatusInvalidArgument, "respond %s: %w", t.desc.Name, err)
	}
	if err := t.def.OutputSchema.ValidateJSON(raw); err != nil {
		return nil, Errorf(StatusInvalidArgument, "respond %s: %w", t.desc.Name, err)
	}
	return respondTo(interrupt, json.RawMessage(raw))
}

// Restart builds the resume.restart part re-running an interrupt of this tool.
func (t *TypedTool[In, Out]) Restart(interrupt *Part, opts *RestartOptions) (*Part, error) {
	if opts != nil && opts.ReplaceInput != nil {
		if err := t.def.InputSchema.Validate(opts.ReplaceInput); err != nil {
			return nil, Errorf(StatusInvalidArgument, "restart %s: %w", t.desc.Name, err)
		}
	}
	return restartOf(interrupt, opts)
}

// toolV2 is the /tool.v2/ form of a non-multipart tool (Genkit's basicToolV2): the same tool whose
// run by key wraps the output as {"output": …}, the multipart tool response shape.
type toolV2 struct {
	Tool
	desc ActionDesc
}

func newToolV2(t Tool) *toolV2 {
	d := *t.Desc()
	d.Key = ActionKey(ActionTypeToolV2, d.Name)
	d.Type = ActionTypeToolV2
	if out := d.OutputSchema; out != nil {
		if s, err := NewSchema(map[string]any{"type": "object", "properties": map[string]any{"output": out.Raw()}}); err == nil {
			d.OutputSchema = s
		}
	}
	return &toolV2{Tool: t, desc: d}
}

// Desc implements Action.
func (t *toolV2) Desc() *ActionDesc { return &t.desc }

// Denial implements Denier for the tools that do.
func (t *toolV2) Denial(by, reason string) (any, bool) {
	if d, ok := t.Tool.(Denier); ok {
		return d.Denial(by, reason)
	}
	return nil, false
}

// RunJSON implements Action: the tool's output as {"output": …}.
func (t *toolV2) RunJSON(ctx context.Context, input json.RawMessage, _ StreamFunc) (json.RawMessage, error) {
	name := t.desc.Name
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
	return json.Marshal(res)
}
