// Package scripted provides deterministic models for tests, offline demos and replays: each call
// is answered by a turn of a script, streamed in the chunks the script gives. A script that
// decides from the request alone (Define, NewFunc) answers a conversation the same way however
// many runs share the model, and when a durable run is resumed or taken over after a crash.
package scripted

import (
	"context"
	"fmt"
	"sync"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
)

// Turn is one scripted model call.
type Turn struct {
	// Response is returned (as a fresh copy) by the call.
	Response *ai.ModelResponse
	// Chunks says how the response's content is streamed; nil streams one chunk per part.
	Chunks [][]*ai.Part
	// Err, when set, is returned instead of a response.
	Err error
	// Block makes the call wait for its context to end (for cancellation tests).
	Block bool
}

// Model is a scripted model. It is safe for concurrent use; calls consume turns in order.
type Model struct {
	name     string
	mu       sync.Mutex
	turns    []Turn
	next     int
	loop     bool
	byConv   bool
	script   Func
	requests []*ai.ModelRequest
}

// Func picks the turn that answers a request. Deciding from the request alone (rather than
// from a call counter) keeps a model deterministic when many runs share it, and when a run is
// resumed or taken over after a crash.
type Func func(req *ai.ModelRequest) (Turn, error)

// NewFunc returns an unregistered scripted model whose turns come from fn.
func NewFunc(name string, fn Func) *Model {
	m := New(name)
	m.script = fn
	return m
}

// Define registers a scripted model under /model/<name> whose turns come from fn, and returns it.
func Define(app *loupe.App, name string, fn Func) ai.Model {
	m := NewFunc(name, fn)
	return loupe.DefineModel(app, name, m.Options(), m.Generate)
}

// DefineTurns registers a scripted model that answers its calls with turns, in order, one each.
func DefineTurns(app *loupe.App, name string, turns ...Turn) ai.Model {
	m := New(name, turns...)
	return loupe.DefineModel(app, name, m.Options(), m.Generate)
}

// PerConversation makes each request answered by the turn whose position is the number of model
// messages already in the request's history, instead of the next turn of a shared counter. The
// same conversation then always gets the same answer, however many conversations share the
// model. Requests are not recorded in this mode.
func (m *Model) PerConversation() *Model {
	m.mu.Lock()
	m.byConv = true
	m.mu.Unlock()
	return m
}

// ModelTurns counts the model messages of a conversation: the turn a request is at.
func ModelTurns(msgs []*ai.Message) int {
	n := 0
	for _, msg := range msgs {
		if msg.Role == ai.RoleModel {
			n++
		}
	}
	return n
}

// New returns an unregistered scripted model named name that plays turns in order.
func New(name string, turns ...Turn) *Model {
	return &Model{name: name, turns: turns}
}

// Name implements ai.Model.
func (m *Model) Name() string { return m.name }

// Options describe the model for loupe.DefineModel: a label, and support for what the script can
// play.
func (m *Model) Options() *ai.ModelOptions {
	return &ai.ModelOptions{
		Label:    "Scripted " + m.name,
		Supports: &ai.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, Media: true, ToolChoice: true},
	}
}

// Loop makes the script start over after its last turn, and stops recording requests (for
// benchmarks and long demos).
func (m *Model) Loop() *Model {
	m.mu.Lock()
	m.loop = true
	m.mu.Unlock()
	return m
}

// Calls returns how many calls the model has answered.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}

// Requests returns the requests the model received, in order (not recorded in loop mode).
func (m *Model) Requests() []*ai.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*ai.ModelRequest(nil), m.requests...)
}

func (m *Model) pick(req *ai.ModelRequest) (Turn, error) {
	if m.script != nil {
		m.mu.Lock()
		m.next++
		m.mu.Unlock()
		return m.script(req)
	}
	n := ModelTurns(req.Messages)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	if n >= len(m.turns) {
		return Turn{}, ai.NewError(ai.StatusFailedPrecondition, "scripted model %s: no turn %d in a script of %d", m.Name(), n, len(m.turns))
	}
	return m.turns[n], nil
}

// Generate implements ai.Model: it answers with the next turn of the script.
func (m *Model) Generate(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	var t Turn
	if m.script != nil || m.byConv {
		var err error
		if t, err = m.pick(req); err != nil {
			return nil, err
		}
		return m.answer(ctx, t, cb)
	}
	m.mu.Lock()
	if !m.loop {
		m.requests = append(m.requests, req)
	} else if m.next >= len(m.turns) {
		m.next = 0
	}
	if m.next >= len(m.turns) {
		m.mu.Unlock()
		return nil, ai.NewError(ai.StatusFailedPrecondition, "scripted model %s: script exhausted after %d calls", m.Name(), len(m.turns))
	}
	t = m.turns[m.next]
	m.next++
	m.mu.Unlock()
	return m.answer(ctx, t, cb)
}

// answer plays one turn: blocks, fails, or streams and returns its response.
func (m *Model) answer(ctx context.Context, t Turn, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	if t.Block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if t.Err != nil {
		return nil, t.Err
	}
	if t.Response == nil || t.Response.Message == nil {
		return nil, fmt.Errorf("scripted model %s: turn without a response message", m.Name())
	}
	if cb != nil {
		chunks := t.Chunks
		if chunks == nil {
			for _, p := range t.Response.Message.Content {
				chunks = append(chunks, []*ai.Part{p})
			}
		}
		for _, c := range chunks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: c}); err != nil {
				return nil, err
			}
		}
	}
	resp := *t.Response
	msg := *t.Response.Message
	msg.Content = append([]*ai.Part(nil), msg.Content...)
	resp.Message = &msg
	if resp.FinishReason == "" {
		resp.FinishReason = ai.FinishReasonStop
	}
	return &resp, nil
}

// Text is a turn answering with text.
func Text(text string) Turn {
	return Reply(ai.NewTextPart(text))
}

// Reply is a turn answering with the given parts.
func Reply(parts ...*ai.Part) Turn {
	return Turn{Response: &ai.ModelResponse{
		Message:      &ai.Message{Role: ai.RoleModel, Content: parts},
		FinishReason: ai.FinishReasonStop,
	}}
}

// ToolCall is a tool request part. ref may be "" for one the generate loop makes up.
func ToolCall(name, ref string, input any) *ai.Part {
	return ai.NewToolRequestPart(&ai.ToolRequest{Name: name, Ref: ref, Input: input})
}

// WithUsage returns the turn with usage set.
func (t Turn) WithUsage(in, out int) Turn {
	r := *t.Response
	r.Usage = &ai.GenerationUsage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	t.Response = &r
	return t
}

// WithChunks returns the turn streamed as the given chunks.
func (t Turn) WithChunks(chunks ...[]*ai.Part) Turn {
	t.Chunks = chunks
	return t
}
