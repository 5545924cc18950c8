package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// recorder persists one execution of a run as it happens: each history message, each chunk (in
// batches), each model response before its tools run, and each tool call's intent and result. It
// also serves what an earlier execution recorded, so a run taken over after a crash neither calls
// the model again for a recorded turn nor runs a completed tool twice.
//
// Turns are absolute across resumes and recoveries: a turn's number is the count of model messages
// before it in the run's history.
type recorder struct {
	svc *Service
	run *store.Run

	mu          sync.Mutex
	turn        int   // the current absolute turn
	baseIndex   int   // history length when this execution started; chunk indexes are offset by it
	chunkSeq    int64 // last chunk sequence number used
	pending     []store.RunChunk
	inTok       int64
	outTok      int64
	model       string
	maxTurn     int
	recorded    map[int]*store.ModelCall
	interrupted *engine.ModelResponse
	final       *engine.ModelResponse
	flushErr    error
}

func newRecorder(ctx context.Context, svc *Service, run *store.Run, history []*engine.Message) (*recorder, error) {
	r := &recorder{svc: svc, run: run, baseIndex: len(history), inTok: run.InputTokens, outTok: run.OutputTokens, maxTurn: run.Turns}
	if run.Model != nil {
		r.model = *run.Model
	}
	r.turn = max(countModelMessages(history)-1, 0)
	seq, err := svc.store.ChunkMaxSeq(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	r.chunkSeq = seq
	calls, err := svc.store.ModelCallList(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	r.recorded = make(map[int]*store.ModelCall, len(calls))
	for _, c := range calls {
		r.recorded[c.Turn] = c
	}
	return r, nil
}

func countModelMessages(msgs []*engine.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == engine.RoleModel {
			n++
		}
	}
	return n
}

// hooks are the engine hooks that record history, chunks, usage and the outcome.
func (r *recorder) hooks() *engine.Hooks {
	return &engine.Hooks{
		OnMessage: func(ctx context.Context, ev *engine.MessageEvent) error {
			if err := r.flush(ctx); err != nil {
				return err
			}
			content, err := json.Marshal(ev.Message)
			if err != nil {
				return fmt.Errorf("record message: %w", err)
			}
			r.mu.Lock()
			turn := r.turn
			r.mu.Unlock()
			if err := r.svc.store.MessagePut(ctx, r.run.ID, ev.Index, turn, string(ev.Message.Role), content); err != nil {
				return err
			}
			r.svc.publish(r.run.ID, EventMessage, map[string]any{"seq": ev.Index, "turn": turn, "role": ev.Message.Role})
			return nil
		},
		OnChunk: func(ctx context.Context, c *engine.ModelResponseChunk) error {
			content, err := json.Marshal(c.Content)
			if err != nil {
				return fmt.Errorf("record chunk: %w", err)
			}
			r.mu.Lock()
			r.chunkSeq++
			r.pending = append(r.pending, store.RunChunk{
				RunID: r.run.ID, Seq: r.chunkSeq, Turn: r.turn, Index: r.baseIndex + c.Index, Role: string(c.Role), Content: content,
			})
			full := len(r.pending) >= 64
			r.mu.Unlock()
			if full {
				return r.flush(ctx)
			}
			return nil
		},
		OnUsage: func(ctx context.Context, _ int, u *engine.Usage) error {
			r.mu.Lock()
			r.inTok += int64(u.InputTokens)
			r.outTok += int64(u.OutputTokens)
			r.mu.Unlock()
			return nil
		},
		OnResponse: func(ctx context.Context, resp *engine.ModelResponse) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if resp.FinishReason == engine.FinishReasonInterrupted {
				r.interrupted = resp
			} else {
				r.final = resp
			}
			return nil
		},
	}
}

// recordStream records a chunk that a streaming flow sent itself (not one of generate's).
func (r *recorder) recordStream(ctx context.Context, chunk json.RawMessage) error {
	r.mu.Lock()
	r.chunkSeq++
	r.pending = append(r.pending, store.RunChunk{RunID: r.run.ID, Seq: r.chunkSeq, Turn: r.turn, Index: r.baseIndex, Role: "flow", Content: chunk})
	full := len(r.pending) >= 64
	r.mu.Unlock()
	if full {
		return r.flush(ctx)
	}
	return nil
}

// middleware records and serves model calls and tool calls.
func (r *recorder) middleware() *engine.Middleware {
	return &engine.Middleware{
		Name: "loupe-recorder",
		Generate: func(ctx context.Context, t *engine.GenerateTurn, next engine.GenerateNext) (*engine.ModelResponse, error) {
			if t.Request != nil && t.Request.Model != "" {
				r.mu.Lock()
				r.model = t.Request.Model
				r.mu.Unlock()
			}
			return next(ctx, t)
		},
		Model: r.modelCall,
		Tool:  r.toolCall,
	}
}

func (r *recorder) modelCall(ctx context.Context, req *engine.ModelRequest, cb engine.ModelStreamFunc, next engine.ModelNext) (*engine.ModelResponse, error) {
	turn := countModelMessages(req.Messages)
	r.mu.Lock()
	r.turn = turn
	r.maxTurn = max(r.maxTurn, turn+1)
	rec := r.recorded[turn]
	model := r.model
	r.mu.Unlock()
	if rec != nil {
		var resp engine.ModelResponse
		if err := json.Unmarshal(rec.Response, &resp); err != nil {
			return nil, fmt.Errorf("replay recorded model response of turn %d: %w", turn, err)
		}
		return &resp, nil
	}
	start := time.Now()
	resp, err := next(ctx, req, cb)
	if err != nil {
		return nil, err
	}
	if err := r.flush(ctx); err != nil {
		return nil, err
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("record model request: %w", err)
	}
	respJSON, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("record model response: %w", err)
	}
	if err := r.svc.store.ModelCallPut(ctx, store.ModelCall{
		RunID: r.run.ID, Turn: turn, Model: model, Request: reqJSON, Response: respJSON,
		LatencyMs: float64(time.Since(start).Microseconds()) / 1000,
	}); err != nil {
		return nil, err
	}
	if err := r.progress(ctx); err != nil {
		return nil, err
	}
	return resp, nil
}

func (r *recorder) toolCall(ctx context.Context, call *engine.ToolCall, next engine.ToolNext) (*engine.ToolOutput, error) {
	r.mu.Lock()
	turn := r.turn
	r.mu.Unlock()
	entry, reused, err := r.svc.store.ToolCallStart(ctx, store.ToolCallStartParams{
		RunID: r.run.ID, Turn: turn, Ref: call.Ref, Tool: call.Name, Input: call.Input, IdempotencyKey: call.IdempotencyKey,
	})
	if err != nil {
		return nil, err
	}
	if reused {
		var out engine.ToolOutput
		if err := json.Unmarshal(entry.Output, &out); err != nil {
			return nil, fmt.Errorf("reuse recorded output of %s (ref %s): %w", call.Name, call.Ref, err)
		}
		return &out, nil
	}
	r.svc.publish(r.run.ID, EventToolCall, map[string]any{"turn": turn, "ref": call.Ref, "tool": call.Name, "status": store.ToolCallStarted})
	out, err := next(ctx, call)
	finish := store.ToolCallFinishParams{RunID: r.run.ID, Turn: turn, Ref: call.Ref}
	var interrupt *engine.InterruptError
	switch {
	case errors.As(err, &interrupt):
		finish.Status = store.ToolCallInterrupted
		finish.Error, _ = json.Marshal(map[string]any{"interrupt": interrupt.Metadata})
	case err != nil:
		if ctx.Err() != nil {
			return out, err // cancelled or stopping: the intent stays "started" and is re-executed
		}
		finish.Status = store.ToolCallFailed
		finish.Error, _ = json.Marshal(map[string]string{"message": err.Error()})
	default:
		finish.Status = store.ToolCallCompleted
		if finish.Output, err = json.Marshal(out); err != nil {
			return nil, fmt.Errorf("record output of %s (ref %s): %w", call.Name, call.Ref, err)
		}
	}
	if ferr := r.svc.store.ToolCallFinish(context.WithoutCancel(ctx), finish); ferr != nil {
		return nil, ferr
	}
	r.svc.publish(r.run.ID, EventToolCall, map[string]any{"turn": turn, "ref": call.Ref, "tool": call.Name, "status": finish.Status})
	return out, err
}

// flush writes buffered chunks in one COPY.
func (r *recorder) flush(ctx context.Context) error {
	r.mu.Lock()
	batch := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := r.svc.store.ChunkInsert(context.WithoutCancel(ctx), batch); err != nil {
		return err
	}
	r.svc.publish(r.run.ID, EventChunks, map[string]any{"last_seq": batch[len(batch)-1].Seq})
	return nil
}

// progress records turns, model and usage on the run row.
func (r *recorder) progress(ctx context.Context) error {
	r.mu.Lock()
	p := store.RunProgressParams{ID: r.run.ID, Turns: r.maxTurn, Model: r.model, InputTokens: r.inTok, OutputTokens: r.outTok}
	r.mu.Unlock()
	return r.svc.store.RunProgress(ctx, p)
}
