package engine

import (
	"context"
	"reflect"
	"sync"
)

// GenerateOption configures one Generate call.
type GenerateOption func(*generateConfig)

type generateConfig struct {
	opts       GenerateActionOptions
	model      Model
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

// WithModel sets the model.
func WithModel(m Model) GenerateOption { return func(c *generateConfig) { c.model = m } }

// WithModelName sets the model by registry name or key.
func WithModelName(name string) GenerateOption {
	return func(c *generateConfig) { c.opts.Model = name }
}

// WithSystem adds a system message before the history.
func WithSystem(text string) GenerateOption { return func(c *generateConfig) { c.system = text } }

// WithPrompt adds a user message after the history.
func WithPrompt(text string) GenerateOption {
	return func(c *generateConfig) { c.prompt = append(c.prompt, NewTextPart(text)) }
}

// WithPromptParts adds a multipart user message after the history.
func WithPromptParts(parts ...*Part) GenerateOption {
	return func(c *generateConfig) { c.prompt = append(c.prompt, parts...) }
}

// WithMessages appends messages to the history.
func WithMessages(msgs ...*Message) GenerateOption {
	return func(c *generateConfig) { c.opts.Messages = append(c.opts.Messages, msgs...) }
}

// WithTools makes tools available to the model. They need not be registered.
func WithTools(tools ...Tool) GenerateOption {
	return func(c *generateConfig) { c.tools = append(c.tools, tools...) }
}

// WithToolNames makes registered tools available by name (see Registry.LookupTool).
func WithToolNames(names ...string) GenerateOption {
	return func(c *generateConfig) { c.opts.Tools = append(c.opts.Tools, names...) }
}

// WithToolChoice sets the tool choice.
func WithToolChoice(tc ToolChoice) GenerateOption {
	return func(c *generateConfig) { c.opts.ToolChoice = tc }
}

// WithConfig sets the model configuration, passed through to the model.
func WithConfig(cfg any) GenerateOption { return func(c *generateConfig) { c.opts.Config = cfg } }

// WithDocs adds context documents.
func WithDocs(docs ...*Document) GenerateOption {
	return func(c *generateConfig) { c.opts.Docs = append(c.opts.Docs, docs...) }
}

// WithMaxTurns sets the turn limit (default 5): the model is called at most n+1 times and tools run
// in at most n rounds. n is honoured as given, as Genkit's maxTurns is: with 0 (or less) the first
// tool request is ABORTED before any tool runs.
func WithMaxTurns(n int) GenerateOption { return func(c *generateConfig) { c.opts.SetMaxTurns(n) } }

// WithReturnToolRequests makes the model's tool requests come back in the response instead of
// running them.
func WithReturnToolRequests(v bool) GenerateOption {
	return func(c *generateConfig) { c.opts.ReturnToolRequests = v }
}

// WithOutputFormat sets the output format: "text" (the default) or "json".
func WithOutputFormat(format string) GenerateOption {
	return func(c *generateConfig) { c.output().Format = format }
}

// WithOutputSchema asks for JSON output conforming to s (format json unless set otherwise).
func WithOutputSchema(s *Schema) GenerateOption {
	return func(c *generateConfig) { c.output().Schema = s }
}

// WithOutputInstructions replaces the format instructions; "" keeps the default.
func WithOutputInstructions(text string) GenerateOption {
	return func(c *generateConfig) {
		if text != "" {
			c.output().Instructions = text
		}
	}
}

var typeSchemas sync.Map // reflect.Type -> *Schema

// WithOutputType asks for JSON output conforming to the schema of T. The schema is derived and
// compiled once per type and cached.
func WithOutputType[T any]() GenerateOption {
	t := reflect.TypeFor[T]()
	s, ok := typeSchemas.Load(t)
	if !ok {
		cs, _, err := schemaForType(t) // nil for an unconstrained T: any JSON output
		if err != nil {
			return func(*generateConfig) { panic(err) }
		}
		s, _ = typeSchemas.LoadOrStore(t, cs)
	}
	return WithOutputSchema(s.(*Schema))
}

// WithResume answers the interrupts of the last model message of the history.
func WithResume(r *Resume) GenerateOption { return func(c *generateConfig) { c.opts.Resume = r } }

// WithRespond adds resume.respond parts (from Tool.Respond or RespondPart).
func WithRespond(parts ...*Part) GenerateOption {
	return func(c *generateConfig) { c.resume().Respond = append(c.resume().Respond, parts...) }
}

// WithRestart adds resume.restart parts (from Tool.Restart or RestartPart).
func WithRestart(parts ...*Part) GenerateOption {
	return func(c *generateConfig) { c.resume().Restart = append(c.resume().Restart, parts...) }
}

// WithStreaming streams chunks of every turn to cb. An error from cb aborts the generate.
func WithStreaming(cb ModelStreamFunc) GenerateOption {
	return func(c *generateConfig) { c.stream = cb }
}

// WithMiddleware adds middleware; the first given is the outermost.
func WithMiddleware(mws ...*Middleware) GenerateOption {
	return func(c *generateConfig) { c.middleware = append(c.middleware, mws...) }
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
