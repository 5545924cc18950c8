package engine

import (
	"context"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/ai"
)

// generation is the state of one Generate call, shared by its turns.
type generation struct {
	r        *Registry
	cfg      *generateConfig
	model    ai.Model
	tools    map[string]Tool
	toolDefs []*ToolDefinition
	format   *outputFormat
	maxTurns int
	hooks    Hooks

	modelNext ModelNext
	toolNext  ToolNext
	turnNext  GenerateNext

	// msgIndex counts the messages this generate has produced; it is the chunk index.
	msgIndex int
	// spanTurn is the turn's position in the conversation (the model messages before the one it
	// produces), which its spans carry as AttrTurnIndex. It equals the turn counter for a fresh
	// conversation, and goes on counting where a resumed one stopped, where the counter (which the
	// turn limit applies to, as in Genkit) starts again at 0.
	spanTurn int
	// chunks are all chunks streamed so far; each chunk's PreviousChunks is a capped view of it.
	chunks  []*ModelResponseChunk
	streams bool

	msgJSON       map[*Message][]byte
	toolsJSON     []byte
	toolNamesJSON []byte
}

// Generate runs the generate loop: it calls the model, runs the tools it asks for (in parallel),
// feeds the results back and repeats until the model answers without tool requests, a tool
// interrupts, or the turn limit is reached (ABORTED, with the last response). A tool's interrupt
// ends it with FinishReasonInterrupted; in a durable flow (WithJournal) it also returns an
// *InterruptedError, with the response, so that the flow stops there.
func Generate(ctx context.Context, r *Registry, opts ...GenerateOption) (*ModelResponse, error) {
	cfg := &generateConfig{}
	for _, o := range opts {
		o(cfg)
	}
	if co, _ := ctx.Value(contextOptionsKey{}).(*contextOptions); co != nil {
		if n := co.apply(cfg); n > 0 {
			ctx = context.WithValue(ctx, generateIndexKey{}, n)
		}
	}
	// In a durable flow the call is an op of its journal: served from it when an earlier
	// execution finished it, and an interrupt stops the flow (durable.go).
	return generateOp(ctx, func() (*ModelResponse, error) {
		g, err := r.newGeneration(cfg)
		if err != nil {
			return nil, err
		}
		return g.run(ctx)
	})
}

func (r *Registry) newGeneration(cfg *generateConfig) (*generation, error) {
	g := &generation{r: r, cfg: cfg, model: cfg.model, maxTurns: cfg.opts.TurnLimit()}
	if cfg.hooks != nil {
		g.hooks = *cfg.hooks
	}
	if cfg.hasHistory {
		cfg.opts.Messages = cfg.history
	} else if cfg.system != "" || len(cfg.prompt) > 0 {
		msgs := make([]*Message, 0, len(cfg.opts.Messages)+2)
		if cfg.system != "" {
			msgs = append(msgs, NewTextMessage(RoleSystem, cfg.system))
		}
		msgs = append(msgs, cfg.opts.Messages...)
		if len(cfg.prompt) > 0 {
			msgs = append(msgs, &Message{Role: RoleUser, Content: cfg.prompt})
		}
		cfg.opts.Messages = msgs
	}
	if cfg.opts.Config == nil && cfg.refConfig != nil {
		cfg.opts.Config = cfg.refConfig
	}
	if g.model == nil {
		if cfg.opts.Model == "" {
			cfg.opts.Model = r.defaultModel
		}
		if cfg.opts.Model == "" {
			return nil, Errorf(StatusInvalidArgument, "generate: no model given: pass ai.WithModel or ai.WithModelName, or give the app a default (loupe.WithDefaultModel)")
		}
		m, err := r.lookupModel(cfg.opts.Model)
		if err != nil {
			return nil, err
		}
		g.model = m
	}
	if err := g.resolveTools(); err != nil {
		return nil, err
	}
	if cfg.opts.Resume != nil {
		if pre := r.resumedTransfer(cfg.opts.Messages); pre != nil {
			applyTransferOptions(&cfg.opts, pre)
			if err := g.transfer(pre); err != nil {
				return nil, err
			}
		}
	}
	f, err := resolveFormat(cfg.opts.Output)
	if err != nil {
		return nil, err
	}
	g.format = f
	g.streams = cfg.stream != nil || g.hooks.OnChunk != nil
	g.modelNext = chainModel(cfg.middleware, g.callModel)
	g.toolNext = chainTool(cfg.middleware, runTool)
	g.turnNext = chainGenerate(cfg.middleware, g.turnBody)
	return g, nil
}

// ModelKeys are the keys a model named in a request is looked up by, in order: the name as a key
// ("/model/echo"), then as a model's name ("echo").
func ModelKeys(name string) []string { return []string{name, ActionKey(ActionTypeModel, name)} }

// lookupModel finds a model by key or name (ModelKeys); an unknown one is NOT_FOUND.
func (r *Registry) lookupModel(name string) (Model, error) {
	var a Action
	for _, k := range ModelKeys(name) {
		if a = r.Lookup(k); a != nil {
			break
		}
	}
	m, ok := a.(Model)
	if !ok {
		return nil, Errorf(StatusNotFound, "generate: model %q not found", name)
	}
	return m, nil
}

// transfer makes the turns after a transfer to a prompt use the prompt's model and tools where it
// sets them (Genkit resolves both anew every turn, from the request that applyTransferPreamble
// rewrote). The prompt's tools replace the request's, tools given as objects among them;
// Middleware.Tools stay.
func (g *generation) transfer(pre *GenerateActionOptions) error {
	if pre.Model != "" {
		m, err := g.r.lookupModel(pre.Model)
		if err != nil {
			return err
		}
		g.model = m
	}
	if len(pre.Tools) > 0 {
		g.cfg.opts.Tools = pre.Tools
		g.cfg.tools = nil
		g.toolsJSON, g.toolNamesJSON = nil, nil
		if err := g.resolveTools(); err != nil {
			return err
		}
	}
	return nil
}

// resolveTools builds the short-name tool map. Duplicate names are INVALID_ARGUMENT, unknown
// registered names NOT_FOUND.
func (g *generation) resolveTools() error {
	n := len(g.cfg.opts.Tools) + len(g.cfg.tools)
	for _, mw := range g.cfg.middleware {
		n += len(mw.Tools)
	}
	if n == 0 {
		return nil
	}
	g.tools = make(map[string]Tool, n)
	g.toolDefs = make([]*ToolDefinition, 0, n)
	add := func(t Tool) error {
		def := toToolDefinition(t.Definition())
		if _, dup := g.tools[def.Name]; dup {
			return Errorf(StatusInvalidArgument, "generate: duplicate tool name %q", def.Name)
		}
		g.tools[def.Name] = t
		g.toolDefs = append(g.toolDefs, def)
		return nil
	}
	for _, name := range g.cfg.opts.Tools {
		t, ok := g.r.LookupTool(name)
		if !ok {
			return Errorf(StatusNotFound, "generate: tool %q not found", name)
		}
		if err := add(t); err != nil {
			return err
		}
	}
	for _, t := range g.cfg.tools {
		if err := add(t); err != nil {
			return err
		}
	}
	for _, mw := range g.cfg.middleware {
		for _, t := range mw.Tools {
			if err := add(t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *generation) run(ctx context.Context) (*ModelResponse, error) {
	req := g.cfg.opts
	if len(g.cfg.tools) > 0 {
		// Genkit's toolsToActionRefs: tools given as objects reach the action options as refs.
		// The tools are resolved already, so middleware sees the refs without their being looked up.
		tools := make([]string, 0, len(req.Tools)+len(g.cfg.tools))
		tools = append(tools, req.Tools...)
		for _, t := range g.cfg.tools {
			tools = append(tools, toolRef(t))
		}
		req.Tools = tools
	}
	if g.hooks.OnMessage != nil {
		for i, m := range req.Messages {
			if err := g.hooks.OnMessage(ctx, &MessageEvent{Index: i, Source: SourceInput, Message: m}); err != nil {
				return nil, err
			}
		}
	}
	return g.turn(ctx, &GenerateTurn{Request: &req})
}

// turn runs one turn in its own "generate" span. The next turn runs inside it, so turn spans nest
// as Genkit's recursion does.
func (g *generation) turn(ctx context.Context, t *GenerateTurn) (*ModelResponse, error) {
	if ctx.Err() != nil {
		return nil, ctxError(ctx, "generate")
	}
	ctx, span := g.r.startSpan(ctx, "generate", "util", "",
		attribute.String(AttrGenAIOp, "invoke_agent"),
		attribute.Int(AttrTurnIndex, t.Turn),
		attribute.String(AttrGenAIModel, g.model.Name()),
	)
	if span.IsRecording() {
		g.r.setFreshJSON(span, AttrInput, g.turnAttr(t.Request))
	}
	resp, err := g.turnNext(ctx, t)
	if err == nil && span.IsRecording() {
		g.r.setFreshJSON(span, AttrOutput, g.responseAttr(resp))
	}
	g.r.endSpan(span, err)
	return resp, err
}

// turnBody is the end of the generate middleware chain: resume, model call, and one of the three
// exits or the next turn.
func (g *generation) turnBody(ctx context.Context, t *GenerateTurn) (*ModelResponse, error) {
	raw := t.Request
	if raw.Resume != nil && t.Turn == 0 {
		// The resume finishes the interrupted turn, whose model message ends the history.
		g.setSpanTurn(ctx, max(CountModelMessages(raw.Messages)-1, 0))
		next, interrupted, err := g.resume(ctx, raw)
		if err != nil {
			return nil, err
		}
		if interrupted != nil {
			return interrupted, g.report(ctx, interrupted)
		}
		raw = next
	}
	msgs := raw.Messages
	g.setSpanTurn(ctx, CountModelMessages(msgs))
	req := &ModelRequest{
		Messages:   g.format.inject(msgs),
		Config:     raw.Config,
		Tools:      g.toolDefs,
		ToolChoice: raw.ToolChoice,
		Output:     g.format.requestOutput(),
		Docs:       raw.Docs,
	}
	resp, err := g.callModelSpan(ctx, g.spanTurn, req)
	if err != nil {
		return nil, err
	}
	resp.Request = req
	if resp.Message == nil {
		return nil, Errorf(StatusInternal, "generate: model %s returned no message", g.model.Name())
	}
	if resp.Usage != nil && g.hooks.OnUsage != nil {
		if err := g.hooks.OnUsage(ctx, t.Turn, resp.Usage); err != nil {
			return nil, err
		}
	}
	resp.Message = assignRefs(resp.Message, len(msgs))
	reqs := countToolRequests(resp.Message)

	// Exit A: no tool requests, or the caller runs them.
	if raw.ReturnToolRequests || reqs == 0 {
		if reqs == 0 {
			if err := g.format.validate(resp); err != nil {
				return nil, err
			}
		}
		if err := g.appendMessage(ctx, t.Turn, len(msgs), SourceModel, resp.Message); err != nil {
			return nil, err
		}
		return resp, g.report(ctx, resp)
	}
	// Exit B: the turn limit, checked before any tool of this turn runs.
	if t.Turn+1 > g.maxTurns {
		e := Errorf(StatusAborted, "exceeded maximum tool call iterations (%d)", g.maxTurns)
		e.Response = resp
		return nil, e
	}
	results, err := g.runTools(ctx, t.Turn, resp.Message.Content)
	if err != nil {
		return nil, err
	}
	// Exit C: an interrupt.
	if results.interrupted {
		resp.Message = results.revised(resp.Message)
		resp.FinishReason = FinishReasonInterrupted
		if err := g.appendMessage(ctx, t.Turn, len(msgs), SourceModel, resp.Message); err != nil {
			return nil, err
		}
		return resp, g.report(ctx, resp)
	}
	pre, err := results.transfer()
	if err != nil {
		return nil, err
	}
	toolMsg := &Message{Role: RoleTool, Content: results.responses()}
	if err := g.appendMessage(ctx, t.Turn, len(msgs), SourceModel, resp.Message); err != nil {
		return nil, err
	}
	if err := g.appendMessage(ctx, t.Turn, len(msgs)+1, SourceTool, toolMsg); err != nil {
		return nil, err
	}
	g.msgIndex++
	if err := g.emitChunk(ctx, RoleTool, g.msgIndex, toolMsg.Content, true); err != nil {
		return nil, err
	}
	g.msgIndex++
	next := *raw
	next.Resume = nil
	next.Messages = slices.Concat(msgs, []*Message{resp.Message, toolMsg}) // a new array: msgs is the caller's
	if pre != nil {
		applyTransfer(&next, pre)
		if err := g.transfer(pre); err != nil {
			return nil, err
		}
		// The history is not only appended to: a recorder must hold the rewritten one, which the
		// next turns index into and a resume starts from.
		for i, m := range next.Messages {
			if g.hooks.OnMessage == nil {
				break
			}
			if err := g.hooks.OnMessage(ctx, &MessageEvent{Turn: t.Turn, Index: i, Replace: true, Source: SourceTransfer, Message: m}); err != nil {
				return nil, err
			}
		}
	}
	return g.turn(ctx, &GenerateTurn{Request: &next, Turn: t.Turn + 1, MessageIndex: g.msgIndex})
}

// toolRef is the action ref of a tool given as an object, as Genkit's toolsToActionRefs writes it
// ("/<action type>/<name>"): its registry key, /tool/<name> for a tool without one.
func toolRef(t Tool) string {
	if a, ok := t.(Action); ok {
		return a.Desc().Key
	}
	if multipart(t) {
		return ActionKey(ActionTypeToolV2, t.Name())
	}
	return ActionKey(ActionTypeTool, t.Name())
}

func (g *generation) appendMessage(ctx context.Context, turn, index int, src MessageSource, m *Message) error {
	if g.hooks.OnMessage == nil {
		return nil
	}
	return g.hooks.OnMessage(ctx, &MessageEvent{Turn: turn, Index: index, Source: src, Message: m})
}

func (g *generation) report(ctx context.Context, resp *ModelResponse) error {
	if g.hooks.OnResponse == nil {
		return nil
	}
	return g.hooks.OnResponse(ctx, resp)
}

// setSpanTurn sets spanTurn, and the turn span's AttrTurnIndex (ctx's span) to it.
func (g *generation) setSpanTurn(ctx context.Context, turn int) {
	g.spanTurn = turn
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int(AttrTurnIndex, turn))
}

// CountModelMessages counts the model's messages in a history.
func CountModelMessages(msgs []*Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == RoleModel {
			n++
		}
	}
	return n
}

// callModelSpan calls the model through the model middleware chain in a model span.
func (g *generation) callModelSpan(ctx context.Context, turn int, req *ModelRequest) (*ModelResponse, error) {
	ctx, span := g.r.startSpan(ctx, g.model.Name(), "action", "model",
		attribute.String(AttrGenAIOp, "chat"),
		attribute.String(AttrGenAIModel, g.model.Name()),
		attribute.Int(AttrTurnIndex, turn),
	)
	if span.IsRecording() {
		g.r.setFreshJSON(span, AttrInput, g.modelRequestAttr(req))
	}
	var cb ModelStreamFunc
	if g.streams {
		cb = g.modelChunk
	}
	resp, err := g.modelNext(ctx, req, cb)
	if err != nil {
		err = asStatusError(ctx, err, "model "+g.model.Name())
		g.r.endSpan(span, err)
		return nil, err
	}
	if resp == nil {
		resp = &ModelResponse{}
	}
	if span.IsRecording() {
		g.r.setFreshJSON(span, AttrOutput, g.responseAttr(resp))
		attrs := []attribute.KeyValue{attribute.StringSlice(AttrGenAIFinish, []string{string(resp.FinishReason)})}
		if u := resp.Usage; u != nil {
			attrs = append(attrs, attribute.Int(AttrGenAIInTok, u.InputTokens), attribute.Int(AttrGenAIOutTok, u.OutputTokens))
		}
		pi := resp.Provider()
		for _, a := range []struct{ key, v string }{
			{AttrGenAIRespID, pi.ResponseID}, {AttrGenAIRespMdl, pi.Model}, {AttrProviderRequestID, pi.RequestID},
		} {
			if a.v != "" {
				attrs = append(attrs, attribute.String(a.key, a.v))
			}
		}
		span.SetAttributes(attrs...)
	}
	g.r.endSpan(span, nil)
	return resp, nil
}

func (g *generation) callModel(ctx context.Context, req *ModelRequest, cb ModelStreamFunc) (*ModelResponse, error) {
	return g.model.Generate(ctx, req, cb)
}

// modelChunk stamps a model chunk with the current message index and role model.
func (g *generation) modelChunk(ctx context.Context, c *ModelResponseChunk) error {
	return g.emitChunk(ctx, RoleModel, g.msgIndex, c.Content, false, c)
}

// emitChunk records and sends a chunk. PreviousChunks is a capped slice of all chunks before it, so
// it costs no copy and later appends never show through.
func (g *generation) emitChunk(ctx context.Context, role Role, index int, content []*Part, aggregated bool, src ...*ModelResponseChunk) error {
	if !g.streams {
		return nil
	}
	c := &ModelResponseChunk{Role: role, Index: index, Content: content, Aggregated: aggregated}
	if len(src) > 0 {
		c.Custom = src[0].Custom
	}
	n := len(g.chunks)
	c.PreviousChunks = g.chunks[:n:n]
	g.chunks = append(g.chunks, c)
	if g.hooks.OnChunk != nil {
		if err := g.hooks.OnChunk(ctx, c); err != nil {
			return err
		}
	}
	if g.cfg.stream != nil {
		if err := g.cfg.stream(ctx, c); err != nil {
			return Errorf(StatusAborted, "stream callback: %w", err)
		}
	}
	return nil
}

func countToolRequests(m *Message) int {
	n := 0
	for _, p := range m.Content {
		if p.ToolRequest != nil {
			n++
		}
	}
	return n
}

// assignRefs gives tool requests without a ref a stable one derived from the message's position in
// the history and the part's position in the message, so parallel calls of the same tool never
// collide and a replay produces the same refs. The message is copied only when a ref is added.
func assignRefs(m *Message, historyIndex int) *Message {
	var out *Message
	for i, p := range m.Content {
		if p.ToolRequest == nil || p.ToolRequest.Ref != "" {
			continue
		}
		if out == nil {
			cp := *m
			cp.Content = append([]*Part(nil), m.Content...)
			out = &cp
		}
		tr := *p.ToolRequest
		tr.Ref = "m" + strconv.Itoa(historyIndex) + "p" + strconv.Itoa(i)
		np := *p
		np.ToolRequest = &tr
		out.Content[i] = &np
	}
	if out == nil {
		return m
	}
	return out
}
