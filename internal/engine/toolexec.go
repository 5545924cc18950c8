package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
)

// pendingCall is one tool execution of a turn (or of a resume's restarts).
type pendingCall struct {
	tool          Tool
	part          *Part // the model's tool request part
	pos           int   // position of part in the model message
	input         json.RawMessage
	resumed       map[string]any
	resumedValue  any // the restart part's metadata.resumed (true or an object), for the span
	originalInput any

	out       *ToolOutput
	interrupt *InterruptError
	// preamble is set when the tool is a prompt the model transferred to.
	preamble *GenerateActionOptions
}

// toolResults holds a turn's calls in the model's request order.
type toolResults struct {
	calls       []*pendingCall
	interrupted bool
}

// runTools runs the tool requests of a model message in parallel and returns their results in the
// model's request order (Genkit Go appends in completion order; Loupe is deterministic). A tool
// error that is not an interrupt fails the generate, naming the tool and the ref.
func (g *generation) runTools(ctx context.Context, turn int, content []*Part) (*toolResults, error) {
	res := &toolResults{}
	for i, p := range content {
		if p.ToolRequest == nil {
			continue
		}
		c, err := g.prepareCall(p, p.ToolRequest.Input)
		if err != nil {
			return nil, err
		}
		c.pos = i
		res.calls = append(res.calls, c)
	}
	if err := g.execCalls(ctx, turn, res.calls); err != nil {
		return nil, err
	}
	for _, c := range res.calls {
		if c.interrupt != nil {
			res.interrupted = true
		}
	}
	return res, nil
}

// prepareCall resolves the tool and validates the input against its compiled schema.
func (g *generation) prepareCall(p *Part, input any) (*pendingCall, error) {
	tr := p.ToolRequest
	t, ok := g.tools[tr.Name]
	if !ok {
		return nil, Errorf(StatusNotFound, "tool %q (ref %s) not found", tr.Name, tr.Ref)
	}
	raw, err := toRaw(input)
	if err != nil {
		return nil, Errorf(StatusInvalidArgument, "tool %s (ref %s): encode input: %w", tr.Name, tr.Ref, err)
	}
	if s := t.Definition().InputSchema; s != nil {
		var verr error
		if _, isRaw := input.(json.RawMessage); isRaw || input == nil {
			verr = s.ValidateJSON(orNull(raw))
		} else {
			verr = s.Validate(input)
		}
		if verr != nil {
			return nil, Errorf(StatusInvalidArgument, "tool %s (ref %s) input: %w", tr.Name, tr.Ref, verr)
		}
	}
	return &pendingCall{tool: t, part: p, input: raw}, nil
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

func toRaw(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return x, nil
	}
	return json.Marshal(v)
}

// execCalls runs calls in parallel (inline when there is one). The first failure cancels the
// others, and every goroutine has returned before execCalls does.
func (g *generation) execCalls(ctx context.Context, turn int, calls []*pendingCall) error {
	if len(calls) == 1 {
		return g.execCall(ctx, turn, calls[0])
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for _, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.execCall(ctx, turn, c); err != nil {
				once.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// execCall runs one call through the tool middleware chain in a tool span.
func (g *generation) execCall(ctx context.Context, turn int, c *pendingCall) error {
	if ctx.Err() != nil {
		return ctxError(ctx, "tool "+c.tool.Name())
	}
	tr := c.part.ToolRequest
	if tt, ok := c.tool.(transferTool); ok {
		return g.execTransfer(ctx, c, tt)
	}
	ctx, span := g.r.startSpan(ctx, tr.Name, "action", "tool",
		attribute.String(AttrGenAIOp, "execute_tool"),
		attribute.String(AttrGenAIToolName, tr.Name),
		attribute.String(AttrGenAIToolCall, tr.Ref),
		attribute.Int(AttrTurnIndex, g.spanTurn),
	)
	g.r.setJSONAttr(span, AttrInput, c.input)
	if c.resumed != nil {
		// Genkit's recordResumedMetadata: setCustomMetadataAttributes({resumed: JSON.stringify(…)}).
		g.r.setJSONAttr(span, AttrResumed, c.resumedValue)
	}
	call := &ToolCall{
		Tool: c.tool, Name: tr.Name, Ref: tr.Ref, Input: c.input,
		IdempotencyKey: IdempotencyKey(ctx, tr.Ref), Turn: turn,
		Resumed: c.resumed, OriginalInput: c.originalInput,
	}
	out, err := g.toolNext(ctx, call)
	var ie *InterruptError
	switch {
	case err == nil:
		if out == nil {
			out = &ToolOutput{}
		}
		c.out = out
		g.r.setJSONAttr(span, AttrOutput, out.Output)
		g.r.endSpan(span, nil)
		return nil
	case errors.As(err, &ie):
		c.interrupt = ie
		g.r.endSpan(span, err)
		return nil
	default:
		err = asStatusError(ctx, err, "tool "+tr.Name)
		g.r.endSpan(span, err)
		return Errorf(StatusOf(err), "tool %s (ref %s): %w", tr.Name, tr.Ref, err)
	}
}

// execTransfer renders a prompt the model called as a tool, in a prompt span, and answers the call
// "transferred to <name>", as Genkit's resolveToolRequest does for a prompt action (without the
// tool middleware).
func (g *generation) execTransfer(ctx context.Context, c *pendingCall, tt transferTool) error {
	tr := c.part.ToolRequest
	_, span := g.r.startSpan(ctx, tr.Name, "action", "prompt",
		attribute.String(AttrGenAIToolName, tr.Name),
		attribute.String(AttrGenAIToolCall, tr.Ref),
		attribute.Int(AttrTurnIndex, g.spanTurn),
	)
	g.r.setJSONAttr(span, AttrInput, c.input)
	pre, err := tt.preamble(c.input)
	if err != nil {
		g.r.endSpan(span, err)
		return Errorf(StatusOf(err), "tool %s (ref %s): %w", tr.Name, tr.Ref, err)
	}
	g.r.setJSONAttr(span, AttrOutput, pre)
	g.r.endSpan(span, nil)
	c.preamble = pre
	c.out = &ToolOutput{Output: "transferred to " + tr.Name}
	return nil
}

// transfer returns the preamble of the turn's transfer to a prompt, or nil. A model that calls
// more than one prompt is INVALID_ARGUMENT, as in Genkit.
func (rs *toolResults) transfer() (*GenerateActionOptions, error) {
	var pre *GenerateActionOptions
	for _, c := range rs.calls {
		if c.preamble == nil {
			continue
		}
		if pre != nil {
			return nil, Errorf(StatusInvalidArgument, "generate: model attempted to transfer to multiple prompt tools")
		}
		pre = c.preamble
	}
	return pre, nil
}

// runTool is the end of the tool middleware chain.
func runTool(ctx context.Context, call *ToolCall) (*ToolOutput, error) {
	return call.Tool.RunTool(&ToolContext{
		Context: inTool(ctx), Name: call.Name, Ref: call.Ref, IdempotencyKey: call.IdempotencyKey,
		Turn: call.Turn, Resumed: call.Resumed, OriginalInput: call.OriginalInput,
	}, call.Input)
}

// responsePart is the toolResponse part answering the call.
func (c *pendingCall) responsePart() *Part {
	tr := c.part.ToolRequest
	return &Part{Kind: PartToolResponse, ToolResponse: &ToolResponse{
		Name: tr.Name, Ref: tr.Ref, Output: c.out.Output, Content: c.out.Content,
	}}
}

// responses returns the tool message content, in request order.
func (rs *toolResults) responses() []*Part {
	out := make([]*Part, len(rs.calls))
	for i, c := range rs.calls {
		out[i] = c.responsePart()
	}
	return out
}

// revised returns the model message of an interrupted turn: interrupted requests gain
// metadata.interrupt and completed ones metadata.pendingOutput, so a resume never runs them again.
func (rs *toolResults) revised(m *Message) *Message {
	cp := *m
	cp.Content = append([]*Part(nil), m.Content...)
	for _, c := range rs.calls {
		if c.interrupt != nil {
			cp.Content[c.pos] = c.part.WithMetadata(map[string]any{MetaInterrupt: interruptValue(c.interrupt)})
		} else {
			cp.Content[c.pos] = c.part.WithMetadata(map[string]any{MetaPendingOutput: c.out.Output})
		}
	}
	return &cp
}
