// Package scripted provides a deterministic model for tests, demos and replay: it answers each
// call with the next response of a script and streams it split into chunks exactly as the script
// says.
package scripted

import (
	"context"
	"fmt"
	"sync"

	"github.com/loupe-dev/loupe/internal/engine"
)

// Turn is one scripted model call.
type Turn struct {
	// Response is returned (as a fresh copy) by the call.
	Response *engine.ModelResponse
	// Chunks says how the response's content is streamed; nil streams one chunk per part.
	Chunks [][]*engine.Part
	// Err, when set, is returned instead of a response.
	Err error
	// Block makes the call wait for its context to end (for cancellation tests).
	Block bool
}

// Model is a scripted model. It is safe for concurrent use; calls consume turns in order.
type Model struct {
	engine.Model
	mu       sync.Mutex
	turns    []Turn
	next     int
	loop     bool
	byConv   bool
	script   ScriptFunc
	requests []*engine.ModelRequest
}

// ScriptFunc picks the turn that answers a request. Deciding from the request alone (rather than
// from a call counter) keeps a model deterministic when many runs share it, and when a run is
// resumed or taken over after a crash.
type ScriptFunc func(req *engine.ModelRequest) (Turn, error)

// NewFunc returns an unregistered scripted model whose turns come from fn.
func NewFunc(name string, fn ScriptFunc) *Model {
	m := New(name)
	m.script = fn
	return m
}

// DefineFunc returns a scripted model, registered under /model/<name>, whose turns come from fn.
func DefineFunc(r *engine.Registry, name string, fn ScriptFunc) *Model {
	m := NewFunc(name, fn)
	if err := r.Register(m); err != nil {
		panic(err)
	}
	return m
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
func ModelTurns(msgs []*engine.Message) int {
	n := 0
	for _, msg := range msgs {
		if msg.Role == engine.RoleModel {
			n++
		}
	}
	return n
}

// New returns an unregistered scripted model named name.
func New(name string, turns ...Turn) *Model {
	m := &Model{turns: turns}
	m.Model = engine.NewModel(name, engine.ModelInfo{
		Label:    "Scripted " + name,
		Supports: engine.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, Media: true, ToolChoice: true},
	}, m.generate)
	return m
}

// Define returns a scripted model registered under /model/<name>.
func Define(r *engine.Registry, name string, turns ...Turn) *Model {
	m := New(name, turns...)
	if err := r.Register(m); err != nil {
		panic(err)
	}
	return m
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
func (m *Model) Requests() []*engine.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*engine.ModelRequest(nil), m.requests...)
}

func (m *Model) pick(req *engine.ModelRequest) (Turn, error) {
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
		return Turn{}, engine.Errorf(engine.StatusFailedPrecondition, "scripted model %s: no turn %d in a script of %d", m.Name(), n, len(m.turns))
	}
	return m.turns[n], nil
}

func (m *Model) generate(ctx context.Context, req *engine.ModelRequest, cb engine.ModelStreamFunc) (*engine.ModelResponse, error) {
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
		return nil, engine.Errorf(engine.StatusFailedPrecondition, "scripted model %s: script exhausted after %d calls", m.Name(), len(m.turns))
	}
	t = m.turns[m.next]
	m.next++
	m.mu.Unlock()
	return m.answer(ctx, t, cb)
}

// answer plays one turn: blocks, fails, or streams and returns its response.
func (m *Model) answer(ctx context.Context, t Turn, cb engine.ModelStreamFunc) (*engine.ModelResponse, error) {
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
				chunks = append(chunks, []*engine.Part{p})
			}
		}
		for _, c := range chunks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := cb(ctx, &engine.ModelResponseChunk{Role: engine.RoleModel, Content: c}); err != nil {
				return nil, err
			}
		}
	}
	resp := *t.Response
	msg := *t.Response.Message
	msg.Content = append([]*engine.Part(nil), msg.Content...)
	resp.Message = &msg
	if resp.FinishReason == "" {
		resp.FinishReason = engine.FinishReasonStop
	}
	return &resp, nil
}

// Text is a turn answering with text.
func Text(text string) Turn {
	return Reply(engine.NewTextPart(text))
}

// Reply is a turn answering with the given parts.
func Reply(parts ...*engine.Part) Turn {
	return Turn{Response: &engine.ModelResponse{
		Message:      &engine.Message{Role: engine.RoleModel, Content: parts},
		FinishReason: engine.FinishReasonStop,
	}}
}

// ToolCall is a tool request part. ref may be "" to let the engine generate one.
func ToolCall(name, ref string, input any) *engine.Part {
	return engine.NewToolRequestPart(&engine.ToolRequest{Name: name, Ref: ref, Input: input})
}

// WithUsage returns the turn with usage set.
func (t Turn) WithUsage(in, out int) Turn {
	r := *t.Response
	r.Usage = &engine.Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	t.Response = &r
	return t
}

// WithChunks returns the turn streamed as the given chunks.
func (t Turn) WithChunks(chunks ...[]*engine.Part) Turn {
	t.Chunks = chunks
	return t
}
