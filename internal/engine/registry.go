package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ActionType is the kind of an action; it is the first segment of its key.
type ActionType string

// Action types, as Genkit names them.
const (
	ActionTypeModel   ActionType = "model"
	ActionTypeTool    ActionType = "tool"
	ActionTypeToolV2  ActionType = "tool.v2"
	ActionTypeFlow    ActionType = "flow"
	ActionTypePrompt  ActionType = "prompt"
	ActionTypeUtil    ActionType = "util"
	ActionTypeDynamic ActionType = "dynamic-action-provider"
	// ActionTypeEvaluator scores an experiment's examples (Genkit's evaluator actions).
	ActionTypeEvaluator ActionType = "evaluator"
)

// ActionKey returns the registry key of an action: "/type/name".
func ActionKey(typ ActionType, name string) string { return "/" + string(typ) + "/" + name }

// ActionDesc describes a registered action for catalogues (the UI, GET /actions, Genkit reflection).
type ActionDesc struct {
	Key          string         `json:"key"`
	Name         string         `json:"name"`
	Type         ActionType     `json:"type"`
	Description  string         `json:"description,omitempty"`
	InputSchema  *Schema        `json:"inputSchema,omitempty"`
	OutputSchema *Schema        `json:"outputSchema,omitempty"`
	StreamSchema *Schema        `json:"streamSchema,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// StreamFunc receives streamed chunks of an action run by key, as JSON.
type StreamFunc func(ctx context.Context, chunk json.RawMessage) error

// Action is anything the registry can list and run by key with JSON input: models, tools, flows and
// the generate utility.
type Action interface {
	Desc() *ActionDesc
	// RunJSON runs the action on raw JSON input. cb may be nil; when set, streaming actions send
	// their chunks to it.
	RunJSON(ctx context.Context, input json.RawMessage, cb StreamFunc) (json.RawMessage, error)
}

// Registry holds actions by key and the tracer they report spans to. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	actions map[string]Action
	// aliases are actions registered implicitly (the /tool.v2/ form of a non-multipart tool). An
	// action registered under the same key wins, and List leaves them out.
	aliases   map[string]Action
	tracer    atomic.Pointer[tracerRef]
	attrLimit int
	// noGenerate leaves out the /util/generate action (WithoutGenerateAction).
	noGenerate bool
	// defaultModel is the model a generate given none calls (WithDefaultModel).
	defaultModel string
	// promptDirs are the directories of .prompt files loaded into the registry (LoadPromptDir).
	promptDirs []*PromptDir
}

// tracerRef holds the registry's tracer, which SetTracerProvider may replace while actions run.
type tracerRef struct{ trace.Tracer }

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/loupe-dev/loupe/internal/engine"

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithTracerProvider makes the registry's actions report spans to tp. Without it spans are no-ops.
func WithTracerProvider(tp trace.TracerProvider) RegistryOption {
	return func(r *Registry) { r.SetTracerProvider(tp) }
}

// SetTracerProvider makes the registry's actions report spans to tp from now on: a program defines
// its actions first, and the command that runs them sets up tracing afterwards.
func (r *Registry) SetTracerProvider(tp trace.TracerProvider) {
	r.tracer.Store(&tracerRef{tp.Tracer(tracerName)})
}

// WithAttributeLimit sets the byte limit of genkit:input and genkit:output span attributes; longer
// values are cut and end with a truncation marker. The default is 32 KiB.
func WithAttributeLimit(n int) RegistryOption {
	return func(r *Registry) { r.attrLimit = n }
}

// WithDefaultModel names the registered model a generate given none calls.
func WithDefaultModel(name string) RegistryOption {
	return func(r *Registry) { r.defaultModel = name }
}

// WithoutGenerateAction leaves the engine's /util/generate out of the registry: a registry that
// holds only proxies of another program's actions (internal/genkitapp) announces none of its own.
func WithoutGenerateAction() RegistryOption {
	return func(r *Registry) { r.noGenerate = true }
}

// NewRegistry returns a registry holding the /util/generate action.
func NewRegistry(opts ...RegistryOption) *Registry {
	r := &Registry{
		actions:   make(map[string]Action),
		aliases:   make(map[string]Action),
		attrLimit: 32 << 10,
	}
	r.tracer.Store(&tracerRef{noop.NewTracerProvider().Tracer("")})
	for _, o := range opts {
		o(r)
	}
	if !r.noGenerate {
		r.mustRegister(&generateAction{r: r})
	}
	return r
}

// Register adds an action. A key that is already taken is ALREADY_EXISTS.
func (r *Registry) Register(a Action) error {
	d := a.Desc()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.actions[d.Key]; ok {
		return Errorf(StatusAlreadyExists, "register %s: key already registered", d.Key)
	}
	r.actions[d.Key] = a
	return nil
}

// swap removes the actions under keys in gone and puts in the actions of add, as one change: a
// prompt directory's reload. A key of add held by an action not in owned is ALREADY_EXISTS, and
// nothing changes.
func (r *Registry) swap(gone []string, add []Action, owned map[string]bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range add {
		k := a.Desc().Key
		if _, ok := r.actions[k]; ok && !owned[k] {
			return Errorf(StatusAlreadyExists, "register %s: key already registered", k)
		}
	}
	for _, k := range gone {
		delete(r.actions, k)
	}
	for _, a := range add {
		r.actions[a.Desc().Key] = a
	}
	return nil
}

func (r *Registry) mustRegister(a Action) {
	if err := r.Register(a); err != nil {
		panic(err)
	}
}

// registerAlias adds an implicit action unless the key is taken.
func (r *Registry) registerAlias(a Action) {
	key := a.Desc().Key
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.actions[key]; ok {
		return
	}
	if _, ok := r.aliases[key]; ok {
		return
	}
	r.aliases[key] = a
}

// RegisterTool registers a tool under /tool/<name> and, for a non-multipart one, its /tool.v2/
// form, as Genkit's defineTool does. It panics on a duplicate name.
func (r *Registry) RegisterTool(t Tool) {
	a := newToolAction(t)
	r.mustRegister(a)
	if a.desc.Type == ActionTypeTool {
		r.registerAlias(newToolV2(a))
	}
}

// Lookup returns the action with the key, or nil. It finds the /tool.v2/ form of a non-multipart
// tool too.
func (r *Registry) Lookup(key string) Action {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lookupLocked(key)
}

func (r *Registry) lookupLocked(key string) Action {
	if a, ok := r.actions[key]; ok {
		return a
	}
	return r.aliases[key]
}

// List returns the descriptions of all actions, sorted by key. The implicit /tool.v2/ forms of
// non-multipart tools are left out (Genkit lists them), so catalogues show each tool once.
func (r *Registry) List() []*ActionDesc {
	r.mu.RLock()
	out := make([]*ActionDesc, 0, len(r.actions))
	for _, a := range r.actions {
		out = append(out, a.Desc())
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *ActionDesc) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Run runs the action with the key on raw JSON input. An unknown key is NOT_FOUND.
func (r *Registry) Run(ctx context.Context, key string, input json.RawMessage, cb StreamFunc) (json.RawMessage, error) {
	a := r.Lookup(key)
	if a == nil {
		return nil, Errorf(StatusNotFound, "run %s: action not found", key)
	}
	if typ := a.Desc().Type; typ == ActionTypeTool || typ == ActionTypeToolV2 {
		return r.runTool(ctx, a, input, cb)
	}
	return a.RunJSON(ctx, input, cb)
}

// runTool runs a tool on its own (not from a generate) in a tool span of its own, as Genkit's
// action.run traces every action it runs, so that such a run has a trace and its interrupt shows.
func (r *Registry) runTool(ctx context.Context, a Action, input json.RawMessage, cb StreamFunc) (json.RawMessage, error) {
	name := a.Desc().Name
	ctx, span := r.startSpan(ctx, name, "action", "tool",
		attribute.String(AttrGenAIOp, "execute_tool"), attribute.String(AttrGenAIToolName, name))
	if len(input) > 0 {
		r.setJSONAttr(span, AttrInput, input)
	}
	out, err := a.RunJSON(ctx, input, cb)
	if err == nil {
		r.setJSONAttr(span, AttrOutput, out)
	}
	r.endSpan(span, err)
	return out, err
}

// toolLookupPrefixes is the order in which a short tool name is resolved, as in Genkit's
// lookupToolByName.
var toolLookupPrefixes = []string{"", "/tool/", "/tool.v2/", "/prompt/", "/dynamic-action-provider/"}

// LookupTool finds a tool by key or short name, trying the name itself, then /tool/, /tool.v2/,
// /prompt/ and /dynamic-action-provider/. Only actions that implement Tool match.
func (r *Registry) LookupTool(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, p := range toolLookupPrefixes {
		if t, ok := r.lookupLocked(p + name).(Tool); ok {
			return t, true
		}
	}
	return nil, false
}

// ToolSchemas returns the compiled input and output schemas of a tool (nil when unconstrained).
// An unknown tool is NOT_FOUND.
func (r *Registry) ToolSchemas(name string) (in, out *Schema, err error) {
	t, ok := r.LookupTool(name)
	if !ok {
		return nil, nil, Errorf(StatusNotFound, "tool %q not found", name)
	}
	d := t.Definition()
	return d.InputSchema, d.OutputSchema, nil
}

// ValidateToolInput validates a JSON value against a tool's input schema. A violation is
// INVALID_ARGUMENT wrapping a *ValidationError that names each failing field.
func (r *Registry) ValidateToolInput(name string, value json.RawMessage) error {
	in, _, err := r.ToolSchemas(name)
	if err != nil {
		return err
	}
	if err := in.ValidateJSON(value); err != nil {
		return Errorf(StatusInvalidArgument, "tool %s input: %w", name, err)
	}
	return nil
}

// ValidateToolOutput validates a JSON value against a tool's output schema, like ValidateToolInput.
func (r *Registry) ValidateToolOutput(name string, value json.RawMessage) error {
	_, out, err := r.ToolSchemas(name)
	if err != nil {
		return err
	}
	if err := out.ValidateJSON(value); err != nil {
		return Errorf(StatusInvalidArgument, "tool %s output: %w", name, err)
	}
	return nil
}
