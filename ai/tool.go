package ai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Tool is a function a model can call. ToolDef values (from NewTool, NewMultipartTool and
// NewInterrupt, or loupe.DefineTool) are tools; implement it for a tool of your own.
type Tool interface {
	// Name is the tool's name.
	Name() string
	// Definition is what the model is told about the tool; its schemas are compiled.
	Definition() *ToolDefinition
	// RunTool executes one call with the model's input as JSON, already validated against the
	// input schema.
	RunTool(tc *ToolContext, input json.RawMessage) (*MultipartToolResponse, error)
}

// ToolRef names a tool for WithTools: a Tool, or a ToolName of a registered one.
type ToolRef interface {
	Name() string
}

// ToolName is the name of a registered tool, for WithTools when you have no Tool value.
type ToolName string

// Name implements ToolRef.
func (t ToolName) Name() string { return string(t) }

// MultipartToolResponse is the result of one tool call: the output sent to the model and, for
// multipart tools, content parts (images, documents) sent beside it.
type MultipartToolResponse struct {
	Output  any     `json:"output,omitempty"`
	Content []*Part `json:"content,omitempty"`
}

// ToolContext is what a tool function gets: the context, the call it is, and on a restart the
// resume state.
type ToolContext struct {
	context.Context
	// Name and Ref identify the call; Ref is the model's id for it (or a generated, stable one).
	Name string
	Ref  string
	// IdempotencyKey is "<run id or trace id>:<ref>": the same for the call across crashes and
	// resumes. Pass it on to the systems the tool acts on, so that they can refuse a repeat.
	IdempotencyKey string
	// Turn is the generate turn the call belongs to (0-based, per generate call).
	Turn int
	// Resumed is non-nil when the call is a restart of an interrupted call; it holds the resume
	// metadata (empty when there was none).
	Resumed map[string]any
	// OriginalInput is the input the interrupted call had, when the restart replaced it.
	OriginalInput any
}

// InterruptOptions says what an interrupt asks: its metadata, which the reviewer reads (a
// "message" key is shown as the question).
type InterruptOptions struct {
	Metadata map[string]any
}

// Interrupt returns the error a tool returns to stop the generate loop and ask a person; opts may
// be nil. The call's tool request then carries the metadata (or true) as metadata.interrupt.
func (tc *ToolContext) Interrupt(opts *InterruptOptions) error {
	e := &ToolInterruptError{}
	if opts != nil {
		e.Metadata = opts.Metadata
	}
	return e
}

// IsResumed reports whether the call is a restart of an interrupted call.
func (tc *ToolContext) IsResumed() bool { return tc.Resumed != nil }

// ToolInterruptError is the error ToolContext.Interrupt returns. A tool that returns it stops the
// generate loop with FinishReasonInterrupted instead of failing it.
type ToolInterruptError struct {
	// Metadata is stamped on the tool request as metadata.interrupt (true when nil).
	Metadata map[string]any
}

// Error implements error.
func (e *ToolInterruptError) Error() string { return "tool interrupted" }

// IsToolInterruptError reports whether err is (or wraps) a tool's interrupt, and its metadata.
func IsToolInterruptError(err error) (bool, map[string]any) {
	var e *ToolInterruptError
	if errors.As(err, &e) {
		return true, e.Metadata
	}
	return false, nil
}

// ToolFunc is the implementation of a typed tool.
type ToolFunc[In, Out any] = func(tc *ToolContext, input In) (Out, error)

// MultipartToolFunc is the implementation of a multipart tool: an output plus content parts.
type MultipartToolFunc[In any] = func(tc *ToolContext, input In) (*MultipartToolResponse, error)

// ToolOption configures a tool.
type ToolOption func(*toolOptions)

type toolOptions struct {
	inputSchema, outputSchema any
	metadata                  map[string]any
	requestMetadata           func(input any) map[string]any
	denial                    func(by, reason string) any
}

// WithDenial gives a tool its own answer for a reviewer's denial (what the model reads), instead
// of the standard {"denied": true, "by", "reason", "message"}.
func WithDenial(f func(by, reason string) any) ToolOption {
	return func(c *toolOptions) { c.denial = f }
}

// WithToolInputSchema gives a tool an explicit input JSON schema (a *Schema, JSON text or bytes, or
// a map) instead of the one derived from its input type.
func WithToolInputSchema(schema any) ToolOption {
	return func(c *toolOptions) { c.inputSchema = schema }
}

// WithToolOutputSchema gives a tool an explicit output JSON schema, as WithToolInputSchema.
func WithToolOutputSchema(schema any) ToolOption {
	return func(c *toolOptions) { c.outputSchema = schema }
}

// WithToolMetadata adds to the metadata of the tool's definition (what the model and the action
// catalogue see of it); given twice, the keys of both are kept, the later winning.
func WithToolMetadata(metadata map[string]any) ToolOption {
	return func(c *toolOptions) {
		if c.metadata == nil {
			c.metadata = make(map[string]any, len(metadata))
		}
		for k, v := range metadata {
			c.metadata[k] = v
		}
	}
}

// WithRequestMetadata gives an interrupt-only tool (NewInterrupt) the metadata of its interrupt,
// computed from the call's input: what the reviewer reads.
func WithRequestMetadata[In any](f func(In) map[string]any) ToolOption {
	return func(c *toolOptions) {
		c.requestMetadata = func(in any) map[string]any { v, _ := in.(In); return f(v) }
	}
}

// ToolDef is a tool with Go input and output types. Its JSON schemas are derived from In and Out
// (or given) and compiled once, when it is made.
type ToolDef[In, Out any] struct {
	def         ToolDefinition
	fn          func(tc *ToolContext, input In) (*MultipartToolResponse, error)
	multipart   bool
	restartable bool
	reqMeta     func(any) map[string]any
	denial      func(by, reason string) any
}

// NewTool returns a typed tool, not registered: pass it to WithTools. It panics, naming the tool,
// when a schema cannot be derived or compiled (like loupe.DefineTool).
func NewTool[In, Out any](name, description string, fn ToolFunc[In, Out], opts ...ToolOption) *ToolDef[In, Out] {
	t := newToolDef[In, Out](name, description, opts)
	t.fn = func(tc *ToolContext, in In) (*MultipartToolResponse, error) {
		out, err := fn(tc, in)
		if err != nil {
			return nil, err
		}
		return &MultipartToolResponse{Output: out}, nil
	}
	return t
}

// NewMultipartTool returns a tool that answers with content parts (media, say) besides its
// output, not registered.
func NewMultipartTool[In any](name, description string, fn MultipartToolFunc[In], opts ...ToolOption) *ToolDef[In, *MultipartToolResponse] {
	// The output schema is the output's, given with WithToolOutputSchema: the response wrapper
	// describes nothing of it.
	t := newToolDef[In, *MultipartToolResponse](name, description, append(opts, func(c *toolOptions) {
		if c.outputSchema == nil {
			c.outputSchema = noSchema{}
		}
	}))
	t.multipart = true
	t.fn = fn
	return t
}

// NewInterrupt returns a tool that always asks a person, not registered: the model's call stops
// the generate loop (with the metadata of WithRequestMetadata, or true), and the reviewer's answer,
// of type Out, becomes the tool's output. It cannot be restarted, only answered.
func NewInterrupt[In, Out any](name, description string, opts ...ToolOption) *ToolDef[In, Out] {
	t := newToolDef[In, Out](name, description, opts)
	t.restartable = false
	t.def.Metadata = cloneMap(t.def.Metadata)
	if t.def.Metadata == nil {
		t.def.Metadata = map[string]any{}
	}
	t.def.Metadata["interrupt"] = true
	t.fn = func(tc *ToolContext, in In) (*MultipartToolResponse, error) {
		var md map[string]any
		if t.reqMeta != nil {
			md = t.reqMeta(in)
		}
		return nil, tc.Interrupt(&InterruptOptions{Metadata: md})
	}
	return t
}

func newToolDef[In, Out any](name, description string, opts []ToolOption) *ToolDef[In, Out] {
	var c toolOptions
	for _, o := range opts {
		o(&c)
	}
	in, err := schemaOr[In](c.inputSchema)
	if err != nil {
		panic(NewError(StatusInvalidArgument, "tool %q: input type %s: %w", name, reflect.TypeFor[In](), err))
	}
	var out *Schema
	if _, none := c.outputSchema.(noSchema); !none {
		out, err = schemaOr[Out](c.outputSchema)
	}
	if err != nil {
		panic(NewError(StatusInvalidArgument, "tool %q: output type %s: %w", name, reflect.TypeFor[Out](), err))
	}
	t := &ToolDef[In, Out]{
		def:         ToolDefinition{Name: name, Description: description, InputSchema: in, OutputSchema: out, Metadata: cloneMap(c.metadata)},
		restartable: true,
		reqMeta:     c.requestMetadata,
		denial:      c.denial,
	}
	return t
}

// schemaOr compiles the given schema, else derives T's: nil, accepting everything, for an
// unconstrained T. A type the derivation cannot handle (a channel, a function) is an error, not a
// panic.
func schemaOr[T any](given any) (s *Schema, err error) {
	if given != nil {
		return NewSchema(given)
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("no JSON schema can describe it: %v", r)
		}
	}()
	s, _, err = SchemaFor[T]()
	return s, err
}

// noSchema asks for no schema at all: anything goes.
type noSchema struct{}

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
func (t *ToolDef[In, Out]) Name() string { return t.def.Name }

// Definition implements Tool.
func (t *ToolDef[In, Out]) Definition() *ToolDefinition { return &t.def }

// IsMultipart reports whether the tool answers with content parts besides its output.
func (t *ToolDef[In, Out]) IsMultipart() bool { return t.multipart }

// Restartable reports whether the tool's interrupts may be restarted (approved or edited): false
// for an interrupt-only tool, which is answered.
func (t *ToolDef[In, Out]) Restartable() bool { return t.restartable }

// Denial returns the tool's own answer for a reviewer's denial (WithDenial), and false when it has
// none.
func (t *ToolDef[In, Out]) Denial(by, reason string) (any, bool) {
	if t.denial == nil {
		return nil, false
	}
	return t.denial(by, reason), true
}

// RunTool implements Tool: decode the input, run the function, check the output against the
// compiled schema.
func (t *ToolDef[In, Out]) RunTool(tc *ToolContext, input json.RawMessage) (*MultipartToolResponse, error) {
	var in In
	if len(input) > 0 && string(input) != "null" {
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, NewError(StatusInvalidArgument, "tool %s: decode input: %w", t.Name(), err)
		}
	}
	res, err := t.fn(tc, in)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &MultipartToolResponse{}
	}
	if t.multipart || t.def.OutputSchema != nil || res.Output != nil {
		raw, err := json.Marshal(res.Output)
		if err != nil {
			return nil, NewError(StatusInternal, "tool %s: encode output: %w", t.Name(), err)
		}
		if err := t.def.OutputSchema.ValidateJSON(raw); err != nil {
			return nil, NewError(StatusInvalidArgument, "tool %s output: %w", t.Name(), err)
		}
		res.Output = json.RawMessage(raw)
	}
	return res, nil
}

// RespondOptions tunes Respond.
type RespondOptions struct {
	// Metadata is added to the response part's metadata.
	Metadata map[string]any
}

// Respond returns the part that answers the interrupted tool request toolReq with output, in place
// of running the tool: pass it to WithToolResponses. It returns nil when toolReq is not a tool
// request. The output is checked against the tool's output schema when the generate resumes.
func (t *ToolDef[In, Out]) Respond(toolReq *Part, output any, opts *RespondOptions) *Part {
	if toolReq == nil || toolReq.ToolRequest == nil {
		return nil
	}
	p := RespondPart(toolReq.ToolRequest.Name, toolReq.ToolRequest.Ref, output)
	if opts != nil && opts.Metadata != nil {
		p = p.WithMetadata(opts.Metadata)
	}
	return p
}

// RestartOptions tunes Restart.
type RestartOptions struct {
	// ReplaceInput, when not nil, replaces the interrupted call's input (a reviewer edited it);
	// the tool then sees the original as ToolContext.OriginalInput.
	ReplaceInput any
	// ResumedMetadata is given to the tool as ToolContext.Resumed (true when nil).
	ResumedMetadata any
}

// Restart returns the part that runs the interrupted tool request toolReq again, now with
// ToolContext.Resumed set: pass it to WithToolRestarts. It returns nil when toolReq is not a tool
// request.
func (t *ToolDef[In, Out]) Restart(toolReq *Part, opts *RestartOptions) *Part {
	if toolReq == nil || toolReq.ToolRequest == nil {
		return nil
	}
	if opts == nil {
		opts = &RestartOptions{}
	}
	tr := *toolReq.ToolRequest
	set := map[string]any{metaResumed: true}
	if m, isMap := opts.ResumedMetadata.(map[string]any); opts.ResumedMetadata != nil && (!isMap || m != nil) {
		set[metaResumed] = opts.ResumedMetadata
	}
	if opts.ReplaceInput != nil {
		set[metaReplacedInput] = tr.Input
		tr.Input = opts.ReplaceInput
	}
	p := toolReq.WithMetadata(set, metaInterrupt)
	p.ToolRequest = &tr
	return p
}

// RespondPart returns the part that answers the interrupted call ref of toolName with output, from
// stored data (Respond builds it from the interrupted part).
func RespondPart(toolName, ref string, output any) *Part {
	return &Part{
		Kind:         PartToolResponse,
		ToolResponse: &ToolResponse{Name: toolName, Ref: ref, Output: output},
		Metadata:     map[string]any{metaInterruptResponse: true},
	}
}

// RestartPart returns the part that restarts the interrupted call ref of toolName, from stored
// data: with replaceInput instead of its input when not nil, and resumed as the metadata the tool
// reads from ToolContext.Resumed (empty when nil).
func RestartPart(toolName, ref string, replaceInput any, resumed map[string]any) *Part {
	var md any = true
	if resumed != nil {
		md = resumed
	}
	meta := map[string]any{metaResumed: md}
	if replaceInput != nil {
		// The original input is filled in from the history when the restart is matched.
		meta[metaReplacedInput] = nil
	}
	return &Part{
		Kind:        PartToolRequest,
		ToolRequest: &ToolRequest{Name: toolName, Ref: ref, Input: replaceInput},
		Metadata:    meta,
	}
}
