package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// recorder persists one execution of a run as it happens: each history message, each chunk (in
// batches), each model response before its tools run, and each tool call's intent and result. It
// also serves what an earlier execution recorded, so a run taken over after a crash neither calls
// the model again for a recorded turn nor runs a completed tool twice.
//
// Turns are absolute across resumes and recoveries: a turn's number is the count of model messages
// before it in the run's history. A flow that calls Generate more than once gets one history and
// one turn numbering across its calls: each later call's messages and turns follow the earlier
// calls' (see enter), so its ledgers never collide with theirs.
type recorder struct {
	svc *Service
	run *store.Run
	// lease is the execution's hold on the run: every write carries its fence, and every tool
	// confirms it before it runs.
	lease *lease

	// lastCall is a model call whose response asked for no tool: it waits for the next checkpoint.
	lastCall *store.ModelCall
	// progressAt is when the run row's progress was last written (or the execution started).
	progressAt time.Time
	// traceSaved is set once the run's trace id has been written, which happens at once.
	traceSaved bool
	// writeMu orders the writes of chunk batches: the timed flush and a checkpoint never commit
	// out of sequence order, so a reader that saw chunk N has seen every chunk before it.
	writeMu sync.Mutex

	mu          sync.Mutex
	turn        int   // the current absolute turn
	baseIndex   int   // history length when this execution started; chunk indexes are offset by it
	chunkSeq    int64 // last chunk sequence number used
	pending     []store.RunChunk
	messages    []store.RunMessage // history messages not yet checkpointed
	steps       []store.RunStep    // journal rows not yet checkpointed (journal.go)
	model       string
	maxTurn     int
	recorded    map[int]*store.ModelCall
	interrupted *engine.ModelResponse
	final       *engine.ModelResponse
	traceID     string
	// interruptSpan is the span of the turn that interrupted.
	interruptSpan oteltrace.SpanContext
	// fresh holds the "turn/ref" of the calls whose intent the last checkpoint recorded anew: they
	// run without another look at the ledger.
	fresh map[string]bool

	// gen is the Generate call of the flow being recorded (engine.GenerateIndex), entered once
	// it has reported; seqBase and turnBase are where its history positions and its turns start in
	// the run's (bases holds them for every call met or recorded before), and nextSeq is the
	// position after the last message recorded.
	gen, seqBase, turnBase, nextSeq int
	// transferModels counts the model messages of a rewritten history reported so far.
	transferModels int
	entered        bool
	bases          map[int]genBase
	// toolSchemas are the schemas of the tools of a generate that ran in another process, by
	// name, for its interrupts (external.go).
	toolSchemas map[string]ToolSchemas

	// resumeGen is the call this execution resumes (or starts: 0), with the history it was handed;
	// the calls before it replay from the ledgers and record nothing. resumeTurn is the turn the
	// resumed call stopped at.
	resumeGen, resumeTurn int
}

// genBase is where a Generate call's history positions and turns start in the run's.
type genBase struct{ seq, turn int }

// generationBases returns where each Generate call recorded in a history starts.
func generationBases(msgs []*store.RunMessage) map[int]genBase {
	bases := map[int]genBase{0: {}}
	for _, m := range msgs {
		if _, ok := bases[m.Generation]; !ok {
			bases[m.Generation] = genBase{seq: m.Seq, turn: m.Turn}
		}
	}
	return bases
}

// newRecorder records an execution that resumes the flow's Generate call resumeGen with history
// (its own messages only; none for a first execution).
func newRecorder(svc *Service, run *store.Run, l *lease, state *store.ExecutionState, resumeGen int, history []*engine.Message) *recorder {
	r := &recorder{svc: svc, run: run, lease: l, baseIndex: len(history), maxTurn: run.Turns,
		progressAt: time.Now(), traceSaved: run.TraceID != nil}
	if run.Model != nil {
		r.model = *run.Model
	}
	r.bases = generationBases(state.Messages)
	r.resumeGen = resumeGen
	r.resumeTurn = r.bases[resumeGen].turn + max(engine.CountModelMessages(history)-1, 0)
	r.turn = r.resumeTurn
	r.nextSeq = len(state.Messages)
	r.chunkSeq = state.ChunkSeq
	r.recorded = make(map[int]*store.ModelCall, len(state.ModelCalls))
	for _, c := range state.ModelCalls {
		r.recorded[c.Turn] = c
		r.maxTurn = max(r.maxTurn, c.Turn+1) // the run row's count may lag behind the ledgers
	}
	for _, m := range state.Messages {
		r.maxTurn = max(r.maxTurn, m.Turn+1)
	}
	return r
}

// enter notes which Generate call of the flow is reporting, from ctx. A call recorded before
// starts where it did; a new one starts its history after every message recorded so far and its
// turns after every turn (at 1 at least). r.mu must be held.
func (r *recorder) enter(ctx context.Context) {
	g := engine.GenerateIndex(ctx)
	if r.entered && g == r.gen {
		return
	}
	r.entered, r.gen = true, g
	if b, ok := r.bases[g]; ok {
		r.seqBase, r.turnBase = b.seq, b.turn
		if g == r.resumeGen {
			r.turn = r.resumeTurn
		}
		return
	}
	r.seqBase, r.turnBase = r.nextSeq, max(r.maxTurn, 1)
	r.bases[g] = genBase{seq: r.seqBase, turn: r.turnBase}
	r.turn = r.turnBase
}

// buffer holds a message for the next checkpoint, replacing one buffered at its position (a
// history rewritten before the checkpoint). r.mu must be held.
func (r *recorder) buffer(m store.RunMessage) {
	for i := range r.messages {
		if r.messages[i].Seq == m.Seq {
			r.messages[i] = m
			return
		}
	}
	r.messages = append(r.messages, m)
}

// transferTurn is the turn of a message of a history that a transfer to a prompt rewrote, reported
// in order from index 0: the messages the transfer put in front belong to the turn that made it,
// the others keep theirs (the input's, then one more with each model message). r.mu must be held.
func (r *recorder) transferTurn(ev *engine.MessageEvent) int {
	if ev.Index == 0 {
		r.transferModels = 0
	}
	if v, _ := ev.Message.Metadata[engine.MetaPreamble].(bool); v {
		return r.turn
	}
	if ev.Message.Role == engine.RoleModel {
		r.transferModels++
	}
	// A message after the n-th model message is of that message's turn.
	return r.turnBase + max(r.transferModels-1, 0)
}

// currentTurn is the absolute turn being recorded.
func (r *recorder) currentTurn() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.turn
}

// hooks are the engine hooks that record history, chunks, usage and the outcome.
func (r *recorder) hooks() *engine.Hooks {
	return &engine.Hooks{
		// Messages are written with the next checkpoint: before the next model call, or at the
		// end. One lost in a crash is rebuilt, since the model response and the tool results it
		// holds are in the ledgers and a takeover replays them.
		OnMessage: func(ctx context.Context, ev *engine.MessageEvent) error {
			// The recorded history this execution resumes from is reported as input again; it is
			// stored already, with its own turns (a fork's copy must stay byte-identical).
			// The calls before the resumed one replay their recorded messages.
			g := engine.GenerateIndex(ctx)
			if g < r.resumeGen || g == r.resumeGen && ev.Source == engine.SourceInput && ev.Index < r.baseIndex {
				return nil
			}
			content, err := json.Marshal(ev.Message)
			if err != nil {
				return fmt.Errorf("record message: %w", err)
			}
			r.mu.Lock()
			r.enter(ctx)
			seq := r.seqBase + ev.Index
			r.nextSeq = max(r.nextSeq, seq+1)
			turn := r.turn
			if ev.Source == engine.SourceTransfer {
				turn = r.transferTurn(ev)
			}
			r.buffer(store.RunMessage{RunID: r.run.ID, Seq: seq, Turn: turn, Role: string(ev.Message.Role),
				Content: content, Generation: r.gen})
			r.mu.Unlock()
			return nil
		},
		OnChunk: func(ctx context.Context, c *engine.ModelResponseChunk) error {
			content, err := json.Marshal(c.Content)
			if err != nil {
				return fmt.Errorf("record chunk: %w", err)
			}
			r.mu.Lock()
			r.enter(ctx)
			r.chunkSeq++
			index := r.seqBase + c.Index
			if r.gen == r.resumeGen {
				index += r.baseIndex
			}
			r.pending = append(r.pending, store.RunChunk{
				RunID: r.run.ID, Seq: r.chunkSeq, Turn: r.turn, Index: index, Role: string(c.Role), Content: content,
			})
			full := len(r.pending) >= 64
			r.mu.Unlock()
			if full {
				return r.flush(ctx)
			}
			return nil
		},
		// Token usage is not counted here: the run's totals are summed from the model-call
		// ledger with each checkpoint (store.Checkpoint), so a takeover's replayed responses
		// are never counted twice and a lost execution's never counted at all.
		OnResponse: func(ctx context.Context, resp *engine.ModelResponse) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if resp.FinishReason == engine.FinishReasonInterrupted {
				r.interrupted = resp
				r.interruptSpan = oteltrace.SpanContextFromContext(ctx)
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
	// An earlier Generate call's final response is still waiting for a checkpoint: write it (and
	// that call's history) before this call's first model call.
	r.mu.Lock()
	earlier := r.lastCall
	r.lastCall = nil
	r.mu.Unlock()
	if earlier != nil {
		if err := r.checkpoint(ctx, earlier); err != nil {
			return nil, err
		}
	}
	sc := oteltrace.SpanContextFromContext(ctx)
	r.mu.Lock()
	r.enter(ctx)
	turn := r.turnBase + engine.CountModelMessages(req.Messages)
	if sc.HasTraceID() && r.traceID == "" {
		r.traceID = sc.TraceID().String()
	}
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
	r.svc.fault(FaultMidModel)
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("record model request: %w", err)
	}
	respJSON, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("record model response: %w", err)
	}
	// The response, and the intent of each tool call it asks for, are durable before any of its
	// tools runs.
	var intents []store.ToolCallStartParams
	if resp.Message != nil {
		for _, p := range resp.Message.ToolRequests() {
			if p.ToolRequest.Ref == "" {
				continue // the engine assigns a ref later; the tool middleware records it
			}
			input, err := json.Marshal(p.ToolRequest.Input)
			if err != nil {
				return nil, fmt.Errorf("record intent of %s: %w", p.ToolRequest.Name, err)
			}
			intents = append(intents, store.ToolCallStartParams{RunID: r.run.ID, Turn: turn, Ref: p.ToolRequest.Ref,
				Tool: p.ToolRequest.Name, Input: input, IdempotencyKey: engine.IdempotencyKey(ctx, p.ToolRequest.Ref)})
		}
	}
	call := &store.ModelCall{
		RunID: r.run.ID, Turn: turn, Model: model, Request: reqJSON, Response: respJSON,
		LatencyMs: float64(time.Since(start).Microseconds()) / 1000,
	}
	if resp.Message == nil || len(resp.Message.ToolRequests()) == 0 {
		// No tool runs on this response, so nothing needs it durable first: it is written with
		// the run's outcome (a crash in between only repeats this model call).
		r.mu.Lock()
		r.lastCall = call
		r.mu.Unlock()
		return resp, nil
	}
	res, err := r.save(ctx, call, intents, nil)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.fresh = map[string]bool{}
	for ref := range res.Fresh {
		r.fresh[fmt.Sprintf("%d/%s", turn, ref)] = true
	}
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) toolCall(ctx context.Context, call *engine.ToolCall, next engine.ToolNext) (*engine.ToolOutput, error) {
	r.mu.Lock()
	r.enter(ctx) // a resumed call's restarted tools run before its first model call
	turn := r.turn
	key := fmt.Sprintf("%d/%s", turn, call.Ref)
	fresh := r.fresh[key] && call.Resumed == nil
	delete(r.fresh, key)
	r.mu.Unlock()
	var entry *store.ToolCall
	reused := false
	if !fresh {
		// Not recorded by this execution's checkpoint: a restart, a generated ref, or a call an
		// earlier execution recorded. The ledger decides whether it runs.
		var err error
		entry, reused, err = r.svc.store.ToolCallStart(ctx, r.lease.fence, store.ToolCallStartParams{
			RunID: r.run.ID, Turn: turn, Ref: call.Ref, Tool: call.Name, Input: call.Input, IdempotencyKey: call.IdempotencyKey,
		})
		if err != nil {
			return nil, err
		}
	}
	if reused {
		var out engine.ToolOutput
		if err := json.Unmarshal(entry.Output, &out); err != nil {
			return nil, fmt.Errorf("reuse recorded output of %s (ref %s): %w", call.Name, call.Ref, err)
		}
		return &out, nil
	}
	// A gated tool (loupe.RequireApproval, or a gate rule of the policy) asks before it acts: the
	// call interrupts as if the tool had, and an approval or an edit restarts it (policies.go).
	gate, gated, err := r.svc.gate(ctx, r.run, call)
	if err != nil {
		return nil, fmt.Errorf("gate of tool %s (ref %s): %w", call.Name, call.Ref, err)
	}
	var out *engine.ToolOutput
	if gated {
		err = &engine.InterruptError{Metadata: gate}
	} else {
		// The last look before the tool acts: this execution must still hold the run. A worker that
		// was paused past its lease learns here that another took the run over, and runs nothing. One
		// paused just after this look acts late (see Admission).
		admitted, cerr := r.lease.confirm(ctx)
		if cerr != nil {
			return nil, fmt.Errorf("run tool %s (ref %s): %w", call.Name, call.Ref, cerr)
		}
		ctx = withAdmission(ctx, Admission{Epoch: r.lease.fence.Epoch, At: admitted})
		r.svc.publish(r.run.ID, event.RunToolCallData{Turn: turn, Ref: call.Ref, Tool: call.Name, Status: store.ToolCallStarted})
		out, err = next(ctx, call)
	}
	r.svc.fault(FaultMidTool)
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
	if ferr := r.svc.store.ToolCallFinish(context.WithoutCancel(ctx), r.lease.fence, finish); ferr != nil {
		// Lost meanwhile: the result is kept as superseded, never as the run's.
		return nil, ferr
	}
	r.svc.publish(r.run.ID, event.RunToolCallData{Turn: turn, Ref: call.Ref, Tool: call.Name, Status: finish.Status})
	return out, err
}

// flush writes buffered chunks only; the live view calls for it while a model streams.
func (r *recorder) flush(ctx context.Context) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.mu.Lock()
	chunks := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(chunks) == 0 {
		return nil
	}
	if _, err := r.svc.store.Checkpoint(context.WithoutCancel(ctx), store.CheckpointParams{RunID: r.run.ID, Fence: r.lease.fence, Chunks: chunks}); err != nil {
		return err
	}
	r.publishChunks(chunks)
	return nil
}

// chunkPublisher is a Publisher that takes the chunks themselves (the live hub): it fans out what
// this process has just written instead of reading it back from the database.
type chunkPublisher interface {
	PublishChunks(runID uuid.UUID, chunks []store.RunChunk)
}

// publishChunks announces chunks once they are durable, handing them over in-process when the
// publisher can take them. The slice is not touched after this.
func (r *recorder) publishChunks(chunks []store.RunChunk) {
	if p, ok := r.svc.publisher.(chunkPublisher); ok {
		p.PublishChunks(r.run.ID, chunks)
		return
	}
	r.svc.publish(r.run.ID, event.RunChunksData{LastSeq: chunks[len(chunks)-1].Seq})
}

// checkpoint writes, in one round trip, the buffered messages and chunks and the progress.
func (r *recorder) checkpoint(ctx context.Context, call *store.ModelCall) error {
	_, err := r.save(ctx, call, nil, nil)
	return err
}

// checkpointAndFinish is checkpoint, ending the execution in the same round trip.
func (r *recorder) checkpointAndFinish(ctx context.Context, finish *store.RunFinishParams) error {
	_, err := r.save(ctx, nil, nil, finish)
	return err
}

// save writes a checkpoint: the buffered messages and chunks, the progress, and when given the
// turn's model response with its tool-call intents, and the execution's end.
func (r *recorder) save(ctx context.Context, call *store.ModelCall, intents []store.ToolCallStartParams, finish *store.RunFinishParams) (*store.CheckpointResult, error) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	p := r.drain(call, intents, finish)
	res, err := r.svc.store.Checkpoint(context.WithoutCancel(ctx), p)
	if err != nil && res == nil {
		return nil, err
	}
	r.published(p)
	return res, err
}

// saveInTx writes the final checkpoint inside tx, with whatever else fn writes there, and
// publishes it once tx has committed: an interrupted run's history and its interrupt rows are
// durable together or not at all.
func (r *recorder) saveInTx(ctx context.Context, fn func(tx *store.Store) error) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	p := r.drain(nil, nil, nil)
	err := r.svc.store.WithTx(context.WithoutCancel(ctx), func(tx *store.Store) error {
		if _, err := tx.Checkpoint(ctx, p); err != nil {
			return err
		}
		r.svc.fault(FaultInterruptedCheckpoint)
		return fn(tx)
	})
	if err != nil {
		return err
	}
	r.published(p)
	return nil
}

// drain takes the buffered messages and chunks, and the progress when it is due, into a
// checkpoint. r.writeMu must be held.
func (r *recorder) drain(call *store.ModelCall, intents []store.ToolCallStartParams, finish *store.RunFinishParams) store.CheckpointParams {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Without a model call this is the end of an execution (finished, interrupted, stopping or
	// cancelled): the progress is always written then.
	force := call == nil
	if call == nil {
		call, r.lastCall = r.lastCall, nil
	}
	p := store.CheckpointParams{
		RunID: r.run.ID, Fence: r.lease.fence, Messages: r.messages, Chunks: r.pending, ModelCall: call, Intents: intents,
		Steps: r.steps, Finish: finish,
	}
	// The run row's progress (turns, tokens, model, trace) is for display: it is written with the
	// outcome, and meanwhile at most once a second, so that short runs do not rewrite their row
	// at every turn. A takeover recounts it from the ledgers.
	if now := time.Now(); force || r.traceID != "" && !r.traceSaved || now.Sub(r.progressAt) >= time.Second {
		r.traceSaved = r.traceID != ""
		p.Progress = &store.RunProgressParams{ID: r.run.ID, Turns: r.maxTurn, Model: r.model, TraceID: r.traceID}
		r.progressAt = now
	}
	r.messages, r.pending, r.steps = nil, nil, nil
	return p
}

// journal holds a row of the flow's journal for the next checkpoint.
func (r *recorder) journal(row store.RunStep) {
	r.mu.Lock()
	defer r.mu.Unlock()
	row.RunID = r.run.ID
	r.steps = append(r.steps, row)
}

// published announces a checkpoint's messages and chunks once they are durable.
func (r *recorder) published(p store.CheckpointParams) {
	for _, m := range p.Messages {
		r.svc.publish(r.run.ID, event.RunMessageData{Seq: m.Seq, Turn: m.Turn, Role: m.Role})
	}
	if len(p.Chunks) > 0 {
		r.publishChunks(p.Chunks)
	}
}

// flushEvery flushes chunks on a timer until ctx ends, so that a long stream shows up live.
func (r *recorder) flushEvery(ctx context.Context, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := r.flush(ctx)
			if err == nil || ctx.Err() != nil {
				continue
			}
			if errors.Is(err, store.ErrLeaseLost) {
				// Cancelled or taken over: every later flush would fail the same way, until the
				// action returns. One line says so.
				r.svc.log.Info("stop flushing chunks: the run is no longer held by this execution (cancelled or taken over)", "run", r.run.ID)
				return
			}
			r.svc.log.Warn("flush chunks", "run", r.run.ID, "err", err)
		}
	}
}
