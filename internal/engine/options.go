package engine

import (
	"context"
	"sync"

	"github.com/loupe-dev/loupe/ai"
)

// GenerateOption configures one Generate call.
type GenerateOption func(*generateConfig)

type generateConfig struct {
	opts  GenerateActionOptions
	model ai.Model
	// refConfig is the configuration of a ModelRef, used when no option sets one.
	refConfig  any
	system     string
	prompt     []*Part
	tools      []Tool
	middleware []*Middleware
	stream     ModelStreamFunc
	hooks      *Hooks
	// history, when set, is the whole conversation: system, prompt and messages are ignored.
	history    []*Message
	hasHistory bool
	// everyCall are the options given through EveryCall (see WithContextOptions).
	everyCall []GenerateOption
}

// WithActionOptions starts from serializable options, for example stored by a durable runner:
// messages, tool names, config, output, resume and limits. Later options override it.
func WithActionOptions(o *GenerateActionOptions) GenerateOption {
	return func(c *generateConfig) {
		c.opts = *o
		c.opts.Messages = append([]*Message(nil), o.Messages...)
		c.opts.Tools = append([]string(nil), o.Tools...)
	}
}

// Public applies options of package ai, as the user's code gives them to loupe.Generate: each in
// its turn, so that a later option (the runner's, say) overrides an earlier one.
func Public(opts ...ai.GenerateOption) GenerateOption {
	return func(c *generateConfig) {
		for _, o := range opts {
			var d ai.GenerateOptions
			o(&d)
			c.merge(&d)
		}
	}
}

// merge applies what one option of package ai set.
func (c *generateConfig) merge(d *ai.GenerateOptions) {
	switch m := d.Model.(type) {
	case nil:
	case ai.Model:
		c.model, c.opts.Model, c.refConfig = m, "", nil
	default:
		c.model, c.opts.Model, c.refConfig = nil, m.Name(), nil
		if ref, ok := m.(ai.ModelRef); ok {
			c.refConfig = ref.Config()
		}
	}
	if d.Config != nil {
		c.opts.Config = d.Config
	}
	if d.System != "" {
		c.system = d.System
	}
	c.opts.Messages = append(c.opts.Messages, d.Messages...)
	c.prompt = append(c.prompt, d.Prompt...)
	c.opts.Docs = append(c.opts.Docs, d.Docs...)
	for _, t := range d.Tools {
		if tool, ok := t.(Tool); ok {
			c.tools = append(c.tools, tool)
		} else if t != nil {
			c.opts.Tools = append(c.opts.Tools, t.Name())
		}
	}
	if d.ToolChoice != "" {
		c.opts.ToolChoice = d.ToolChoice
	}
	if d.MaxTurns != nil {
		c.opts.SetMaxTurns(*d.MaxTurns)
	}
	if d.ReturnToolRequests {
		c.opts.ReturnToolRequests = true
	}
	if o := d.Output; o != nil {
		out := c.output()
		if o.Format != "" {
			out.Format = o.Format
		}
		if o.Schema != nil {
			out.Schema = o.Schema
		}
		if o.Instructions != nil {
			out.Instructions = o.Instructions
		}
		if o.ContentType != "" {
			out.ContentType = o.ContentType
		}
		out.Constrained = out.Constrained || o.Constrained
	}
	if len(d.ToolResponses) > 0 {
		c.resume().Respond = append(c.resume().Respond, d.ToolResponses...)
	}
	if len(d.ToolRestarts) > 0 {
		c.resume().Restart = append(c.resume().Restart, d.ToolRestarts...)
	}
	if d.Stream != nil {
		c.stream = d.Stream
	}
	c.middleware = append(c.middleware, d.Middleware...)
}

// WithModel calls m: a model, or a reference to a registered one.
func WithModel(m ai.ModelArg) GenerateOption { return Public(ai.WithModel(m)) }

// WithModelName calls the model registered under a name or key.
func WithModelName(name string) GenerateOption { return Public(ai.WithModelName(name)) }

// WithSystem sets the system instruction.
func WithSystem(text string) GenerateOption { return Public(ai.WithSystem(text)) }

// WithPrompt adds the user's message after the history.
func WithPrompt(text string) GenerateOption { return Public(ai.WithPrompt(text)) }

// WithPromptParts adds a multipart user message after the history.
func WithPromptParts(parts ...*Part) GenerateOption { return Public(ai.WithPromptParts(parts...)) }

// WithMessages appends messages to the history.
func WithMessages(msgs ...*Message) GenerateOption { return Public(ai.WithMessages(msgs...)) }

// WithTools makes tools available to the model. They need not be registered.
func WithTools(tools ...Tool) GenerateOption {
	refs := make([]ai.ToolRef, len(tools))
	for i, t := range tools {
		refs[i] = t
	}
	return Public(ai.WithTools(refs...))
}

// WithToolNames makes registered tools available by name (see Registry.LookupTool).
func WithToolNames(names ...string) GenerateOption {
	refs := make([]ai.ToolRef, len(names))
	for i, n := range names {
		refs[i] = ai.ToolName(n)
	}
	return Public(ai.WithTools(refs...))
}

// WithToolChoice sets the tool choice.
func WithToolChoice(tc ToolChoice) GenerateOption { return Public(ai.WithToolChoice(tc)) }

// WithConfig sets the model configuration, passed through to the model.
func WithConfig(cfg any) GenerateOption { return Public(ai.WithConfig(cfg)) }

// WithDocs adds context documents.
func WithDocs(docs ...*Document) GenerateOption { return Public(ai.WithDocs(docs...)) }

// WithMaxTurns sets the turn limit (see ai.WithMaxTurns).
func WithMaxTurns(n int) GenerateOption { return Public(ai.WithMaxTurns(n)) }

// WithReturnToolRequests makes the model's tool requests come back in the response instead of
// running them.
func WithReturnToolRequests(v bool) GenerateOption { return Public(ai.WithReturnToolRequests(v)) }

// WithOutputFormat sets the output format: "text" (the default) or "json".
func WithOutputFormat(format string) GenerateOption { return Public(ai.WithOutputFormat(format)) }

// WithOutputSchema asks for JSON output conforming to s (format json unless set otherwise).
func WithOutputSchema(s *Schema) GenerateOption { return Public(ai.WithOutputSchema(s)) }

// WithOutputInstructions replaces the format instructions; "" keeps the default.
func WithOutputInstructions(text string) GenerateOption {
	return Public(ai.WithOutputInstructions(text))
}

// WithOutputType asks for JSON output conforming to the schema of T, derived and compiled once
// per type.
func WithOutputType[T any]() GenerateOption {
	var zero T
	return Public(ai.WithOutputType(&zero))
}

// WithResume answers the interrupts of the last model message of the history.
func WithResume(r *Resume) GenerateOption { return func(c *generateConfig) { c.opts.Resume = r } }

// WithRespond adds resume.respond parts (from Tool.Respond or RespondPart).
func WithRespond(parts ...*Part) GenerateOption { return Public(ai.WithToolResponses(parts...)) }

// WithRestart adds resume.restart parts (from Tool.Restart or RestartPart).
func WithRestart(parts ...*Part) GenerateOption { return Public(ai.WithToolRestarts(parts...)) }

// WithStreaming streams chunks of every turn to cb. An error from cb aborts the generate.
func WithStreaming(cb ModelStreamFunc) GenerateOption { return Public(ai.WithStreaming(cb)) }

// WithMiddleware adds middleware; the first given is the outermost.
func WithMiddleware(mws ...*Middleware) GenerateOption {
	return Public(ai.WithGenerateMiddleware(mws...))
}

// WithHooks sets observation hooks, for recording a run as it happens. Given twice (for example by
// the caller and by WithContextOptions), both sets run, the earlier first.
func WithHooks(h *Hooks) GenerateOption {
	return func(c *generateConfig) {
		if c.hooks == nil {
			c.hooks = h
			return
		}
		c.hooks = joinHooks(c.hooks, h)
	}
}

// WithHistory makes msgs the whole conversation, replacing what WithSystem, WithPrompt and
// WithMessages would build. A durable runner uses it, through WithContextOptions, to resume a flow
// from its recorded history while the flow's own code stays unchanged.
func WithHistory(msgs ...*Message) GenerateOption {
	return func(c *generateConfig) {
		c.history = append([]*Message(nil), msgs...)
		c.hasHistory = true
	}
}

type contextOptionsKey struct{}

// WithContextOptions returns a context whose Generate calls apply opts after their own options.
// A durable runner uses it to record and resume flows it does not control: hooks, middleware,
// history and resume reach the generate inside the flow. Only the first Generate under the
// context gets WithHistory and the resume options; later ones get the rest, so a flow that calls
// generate again after a resumed one starts that call fresh.
func WithContextOptions(ctx context.Context, opts ...GenerateOption) context.Context {
	return WithContextOptionsFor(ctx, 0, opts...)
}

// WithContextOptionsFor is WithContextOptions whose history and resume options go to the Generate
// call numbered index under the context (see GenerateIndex) instead of the first: a runner
// resuming a flow inside its second generate call lets the first run again (replaying it from its
// records) and hands the second its history.
func WithContextOptionsFor(ctx context.Context, index int, opts ...GenerateOption) context.Context {
	return context.WithValue(ctx, contextOptionsKey{}, &contextOptions{opts: opts, target: index})
}

type contextOptions struct {
	mu     sync.Mutex
	opts   []GenerateOption
	target int // the Generate call that gets every option; the others get hooks and middleware
	uses   int
}

// apply applies the context's options to cfg, resume state only for the target call, and returns
// how many Generate calls applied them before this one.
func (co *contextOptions) apply(cfg *generateConfig) int {
	co.mu.Lock()
	n := co.uses
	co.uses++
	co.mu.Unlock()
	if n == co.target {
		for _, o := range co.opts {
			o(cfg)
		}
		return n
	}
	probe := &generateConfig{}
	for _, o := range co.opts {
		o(probe)
	}
	// The other calls keep only the observing options (hooks and middleware) and EveryCall's.
	if probe.hooks != nil {
		WithHooks(probe.hooks)(cfg)
	}
	cfg.middleware = append(cfg.middleware, probe.middleware...)
	for _, o := range probe.everyCall {
		o(cfg)
	}
	return n
}

// EveryCall applies opts, and marks them for every Generate call under a WithContextOptions
// context rather than only the call the context targets: a durable runner re-running a flow with
// another model gives the model to each of the flow's calls.
func EveryCall(opts ...GenerateOption) GenerateOption {
	return func(c *generateConfig) {
		for _, o := range opts {
			o(c)
		}
		c.everyCall = append(c.everyCall, opts...)
	}
}

type generateIndexKey struct{}

// GenerateIndex is, inside a Generate call under a WithContextOptions context (its hooks,
// middleware and tools), how many Generate calls under that context came before it: 0 for the
// first. A durable runner uses it to number the turns and messages of a flow that calls Generate
// more than once.
func GenerateIndex(ctx context.Context) int {
	n, _ := ctx.Value(generateIndexKey{}).(int)
	return n
}

func joinHooks(a, b *Hooks) *Hooks {
	return &Hooks{
		OnMessage: func(ctx context.Context, ev *MessageEvent) error {
			if a.OnMessage != nil {
				if err := a.OnMessage(ctx, ev); err != nil {
					return err
				}
			}
			if b.OnMessage != nil {
				return b.OnMessage(ctx, ev)
			}
			return nil
		},
		OnChunk: joinChunkHooks(a.OnChunk, b.OnChunk),
		OnUsage: func(ctx context.Context, turn int, u *Usage) error {
			if a.OnUsage != nil {
				if err := a.OnUsage(ctx, turn, u); err != nil {
					return err
				}
			}
			if b.OnUsage != nil {
				return b.OnUsage(ctx, turn, u)
			}
			return nil
		},
		OnResponse: func(ctx context.Context, r *ModelResponse) error {
			if a.OnResponse != nil {
				if err := a.OnResponse(ctx, r); err != nil {
					return err
				}
			}
			if b.OnResponse != nil {
				return b.OnResponse(ctx, r)
			}
			return nil
		},
	}
}

// joinChunkHooks keeps a nil chunk hook nil, since its presence turns streaming on.
func joinChunkHooks(a, b func(context.Context, *ModelResponseChunk) error) func(context.Context, *ModelResponseChunk) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(ctx context.Context, c *ModelResponseChunk) error {
		if err := a(ctx, c); err != nil {
			return err
		}
		return b(ctx, c)
	}
}

func (c *generateConfig) output() *GenerateOutputOptions {
	if c.opts.Output == nil {
		c.opts.Output = &GenerateOutputOptions{}
	} else {
		cp := *c.opts.Output
		c.opts.Output = &cp
	}
	return c.opts.Output
}

func (c *generateConfig) resume() *Resume {
	if c.opts.Resume == nil {
		c.opts.Resume = &Resume{}
	}
	return c.opts.Resume
}
