package runs

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// runWorker is River's worker for RunArgs.
type runWorker struct {
	river.WorkerDefaults[RunArgs]
	svc *Service
}

// Work takes the run's lease and executes it. A run that is already finished, cancelled or waiting
// for reviewers needs nothing; a run leased by a live worker is snoozed until the lease may expire.
func (w *runWorker) Work(ctx context.Context, job *river.Job[RunArgs]) error {
	s := w.svc
	for again := false; ; again = true {
		// One execution of a run per process: a second job of a run this process executes now
		// (the sweep's, say) is snoozed. The claim is taken before the lease, since the lease's
		// owner is this process and taking it again would supersede the live execution while
		// that one still counts on its lease (a tool it admitted would act for a superseded
		// execution).
		if !s.claim(job.Args.RunID) {
			if again {
				return nil // another job of the run executes it now
			}
			return river.JobSnooze(s.cfg.LeaseTTL)
		}
		run, l, err := s.acquire(ctx, job)
		if run == nil {
			s.unclaim(job.Args.RunID)
			return err
		}
		err = s.execute(ctx, run, l) // the execution holds the claim from here, and drops it when it ends
		if !errors.Is(err, errExecuteAgain) {
			return err
		}
		s.fault(FaultDecidedAtOnce)
	}
}

// errExecuteAgain is what an execution returns when it stopped at interrupts that were all
// decided at once, in the transaction that stored them (a replay's recorded decisions, the
// policy's rules), and the run is queued again: the same job executes it again, with no job of
// its own to insert and wait for. Should the process die in between, the sweep finds the queued
// run with no job (RunListOrphaned) and enqueues one.
var errExecuteAgain = errors.New("the run's interrupts were decided at once: execute it again")

// acquire takes the lease of the job's run, and returns the run and the lease, or nil and what the
// job returns: nil for a run that needs nothing (finished, gone, or routed to another program), a
// snooze for a run another execution holds.
func (s *Service) acquire(ctx context.Context, job *river.Job[RunArgs]) (*store.Run, *lease, error) {
	if moved, err := s.routeOn(ctx, job); moved || err != nil {
		return nil, nil, err
	}
	s.fault(FaultAfterFetch)
	sent := time.Now()
	run, err := s.store.RunAcquire(ctx, job.Args.RunID, s.owner, s.cfg.LeaseTTL)
	switch {
	case errors.Is(err, store.ErrRunFinished), errors.Is(err, store.ErrNotFound):
		return nil, nil, nil
	case errors.Is(err, store.ErrLeaseHeld):
		return nil, nil, river.JobSnooze(s.cfg.LeaseTTL)
	case err != nil:
		return nil, nil, err
	}
	s.publish(run.ID, event.RunStatusData{Status: store.RunRunning})
	return run, newLease(s, run, sent), nil
}

// claim reserves a run for one execution in this process, and reports false when one has it.
func (s *Service) claim(id uuid.UUID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.active[id]; taken {
		return false
	}
	s.active[id] = nil // no execution to cancel yet: executeOnce sets it
	return true
}

func (s *Service) unclaim(id uuid.UUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, id)
}

// routeOn puts back a job of an action this program lacks, instead of failing its run: it inserts
// the job again into the queue of a program that has the action (or HeldQueue) and lets this one
// complete, or snoozes it when that queue is the one it came from (another process of this
// program has the action; this one is an older build, say). moved reports that the job is dealt
// with and must not be executed here.
func (s *Service) routeOn(ctx context.Context, job *river.Job[RunArgs]) (moved bool, err error) {
	action := job.Args.Action
	if action == "" {
		run, err := s.store.RunGet(ctx, job.Args.RunID)
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return true, err
		}
		action = run.Action
	}
	if s.registry.Lookup(action) != nil {
		return false, nil
	}
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		queue, err := s.route(ctx, tx, action)
		if err != nil {
			return err
		}
		if queue == job.Queue {
			return river.JobSnooze(s.cfg.LeaseTTL)
		}
		s.log.Info("routing a run to a program that has its action", "run", job.Args.RunID, "action", action, "queue", queue)
		_, err = s.river.InsertTx(ctx, tx.Tx(), RunArgs{RunID: job.Args.RunID, Action: action}, &river.InsertOpts{Queue: queue})
		return err
	})
	return true, err
}

// execute runs the action once, from the start or from the run's recorded history, and records the
// outcome. It returns an error only when the execution must be retried (the process is stopping or
// the database failed); the run's own failures are recorded as its status. Every write it makes is
// fenced by l: once another execution has taken the run over, nothing more of this one is stored.
func (s *Service) execute(jobCtx context.Context, run *store.Run, l *lease) error {
	err := s.executeOnce(jobCtx, run, l)
	if errors.Is(err, store.ErrLeaseLost) {
		s.log.Info("run execution superseded: another execution holds the run", "run", run.ID, "epoch", l.fence.Epoch, "err", err)
		return nil
	}
	return err
}

func (s *Service) executeOnce(jobCtx context.Context, run *store.Run, l *lease) error {
	ctx, cancel := context.WithCancel(jobCtx)
	defer cancel()
	s.mu.Lock()
	s.active[run.ID] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.active, run.ID)
		s.mu.Unlock()
	}()
	heartbeatDone := make(chan struct{})
	go func() {
		defer close(heartbeatDone)
		s.heartbeat(ctx, run, l, cancel)
	}()
	defer func() { cancel(); <-heartbeatDone }()

	state := &store.ExecutionState{}
	if !run.FirstExecution() {
		var err error
		if state, err = s.store.RunExecutionState(ctx, run.ID); err != nil {
			return err
		}
		// Only a takeover leaves spans of a lost execution: an execution that stopped at an
		// interrupt ended its spans, whose ends may still be on their way from its process.
		if run.TookOver {
			if err := s.endOrphanedSpans(ctx, run, time.Now()); err != nil {
				return err
			}
		}
	}
	// The history goes to the Generate call the run stopped in, its own messages only; the calls
	// of the flow before it run again and replay from the ledgers.
	resumeGen, rows := lastGeneration(state.Messages)
	history, err := decodeHistory(run, rows)
	if err != nil {
		return err
	}
	rec := newRecorder(s, run, l, state, resumeGen, history)
	flushCtx, stopFlush := context.WithCancel(ctx)
	flushDone := make(chan struct{})
	go func() {
		defer close(flushDone)
		rec.flushEvery(flushCtx, 100*time.Millisecond)
	}()
	defer func() { stopFlush(); <-flushDone }()
	opts := []engine.GenerateOption{engine.WithHooks(rec.hooks()), engine.WithMiddleware(rec.middleware())}
	ext := &External{rec: rec, history: history}
	if len(history) > 0 {
		ext.respond, ext.restart, err = s.resumeParts(ctx, run, l, history, rec.bases[resumeGen].turn)
		if errors.Is(err, store.ErrLeaseLost) {
			return err
		}
		if err != nil {
			return s.finishFailed(ctx, run, l, err)
		}
		opts = append(opts, engine.WithHistory(history...))
		opts = append(opts, resumeOptions(ext.respond, ext.restart)...)
	}
	// Replays, re-executions and forks (replay.go): exact playback middleware, or the overrides.
	replay, replayOpts, err := s.replayFor(ctx, run, rec)
	if errors.Is(err, ErrInvalid) {
		return s.finishFailed(ctx, run, l, err)
	} else if err != nil {
		return err
	}
	opts = append(opts, replayOpts...)
	runCtx := engine.WithRunID(ctx, run.ID.String())
	runCtx = continueTrace(runCtx, run, len(history) > 0)
	if len(run.Labels) > 0 {
		runCtx = engine.WithRootSpan(runCtx, run.Labels, nil)
	}
	if len(run.Context) > 0 {
		var actx map[string]any
		if err := json.Unmarshal(run.Context, &actx); err != nil {
			return s.finishFailed(ctx, run, l, fmt.Errorf("the run's context: %w", err))
		}
		runCtx = engine.WithActionContext(runCtx, actx)
	}
	runCtx = engine.WithContextOptionsFor(runCtx, resumeGen, opts...)
	runCtx = engine.WithJournal(runCtx, newJournal(rec, state.Steps, replay.sourceSteps()))
	runCtx = withExternal(runCtx, ext)
	out, runErr := s.registry.Run(runCtx, run.Action, run.Input, rec.recordStream)
	stopFlush()
	<-flushDone
	if errors.Is(runErr, store.ErrLeaseLost) {
		return runErr // another execution holds the run: this one records nothing more
	}
	// An exact replay compares how it ended with its original (replay.go).
	if err := replay.finish(ctx, out, runErr, rec.interrupted != nil); err != nil {
		return err
	}

	// Stopping (not cancelled by a user): keep the checkpoint, release the lease, let River retry.
	if jobCtx.Err() != nil {
		if err := rec.checkpoint(ctx, nil); err != nil {
			return err
		}
		s.release(l)
		return fmt.Errorf("run %s stopped before it finished: %w", run.ID, jobCtx.Err())
	}
	// What executes the action is away (not cancelled by a user): the run is queued again, and
	// its job is tried again after a lease's time, when the program that has the action may be
	// back.
	if errors.Is(runErr, ErrUnreachable) && ctx.Err() == nil {
		if err := rec.checkpoint(ctx, nil); err != nil {
			return err
		}
		if err := s.store.RunReleaseToQueue(ctx, l.fence); err != nil {
			return err
		}
		s.publish(run.ID, event.RunStatusData{Status: store.RunQueued})
		s.log.Info("run queued again: its action cannot be reached", "run", run.ID, "retry_in", s.cfg.LeaseTTL, "err", runErr)
		return river.JobSnooze(s.cfg.LeaseTTL)
	}
	finish := &store.RunFinishParams{ID: run.ID, Epoch: l.fence.Epoch}
	switch {
	case rec.interrupted != nil && ctx.Err() == nil:
		// A generate call stopped on interrupts, and nothing of the flow ran after it (the engine
		// refuses every later op), whatever the flow returned: the run waits for its reviewers.
		if runErr != nil && !errors.Is(runErr, engine.ErrInterrupted) {
			s.log.Info("the flow returned an error after its generate was interrupted; the run waits for its reviewers",
				"run", run.ID, "err", runErr)
		}
		return s.finishInterrupted(ctx, run, l, rec)
	case runErr == nil:
		finish.Status, finish.Output = store.RunSucceeded, out
	case ctx.Err() != nil:
		// Cancelled: the run row already says so (or another execution holds the run). Nothing
		// more is written into it; the tool calls that started before the cancel have their
		// results in the ledger already.
		return nil
	case engine.StatusOf(runErr) == engine.StatusAborted:
		finish.Status, finish.Error = store.RunAborted, errorJSON(runErr)
	default:
		// An action that returned an output with its error (a Genkit flow whose interrupted output
		// Loupe cannot resume) keeps the output beside the error.
		finish.Status, finish.Error, finish.Output = store.RunFailed, errorJSON(runErr), out
	}
	// The last messages and chunks, and the outcome, in one round trip.
	return s.finished(run, finish.Status, rec.checkpointAndFinish(ctx, finish))
}

// finished publishes a finished run; a run cancelled meanwhile, or taken over, is not an error.
func (s *Service) finished(run *store.Run, status string, err error) error {
	if errors.Is(err, store.ErrRunFinished) || errors.Is(err, store.ErrLeaseLost) {
		return nil
	}
	if err != nil {
		return err
	}
	s.publish(run.ID, event.RunStatusData{Status: status})
	return nil
}

// heartbeat renews the lease until ctx ends, and cancels the execution when the run was cancelled
// or the lease was lost to another execution.
func (s *Service) heartbeat(ctx context.Context, run *store.Run, l *lease, cancel context.CancelFunc) {
	t := time.NewTicker(s.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		status, err := l.renew(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrLeaseLost) || (err == nil && status != store.RunRunning) {
			s.log.Info("run execution stops", "run", run.ID, "status", status, "err", err)
			cancel()
			return
		}
		if err != nil {
			s.log.Warn("renew run lease", "run", run.ID, "err", err)
		}
	}
}

// release gives up the lease so that the retry (or another worker) can take over at once.
func (s *Service) release(l *lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.store.RunReleaseLease(ctx, l.fence); err != nil {
		s.log.Warn("release run lease", "run", l.fence.RunID, "err", err)
	}
}

// decodeHistory decodes the recorded conversation of a run being resumed or taken over.
// lastGeneration returns the Generate call the recorded history ends in, and its messages.
func lastGeneration(msgs []*store.RunMessage) (int, []*store.RunMessage) {
	if len(msgs) == 0 {
		return 0, nil
	}
	g := msgs[len(msgs)-1].Generation
	var rows []*store.RunMessage
	for _, m := range msgs {
		if m.Generation == g {
			rows = append(rows, m)
		}
	}
	return g, rows
}

func decodeHistory(run *store.Run, rows []*store.RunMessage) ([]*engine.Message, error) {
	msgs := make([]*engine.Message, 0, len(rows))
	for _, row := range rows {
		var m engine.Message
		if err := json.Unmarshal(row.Content, &m); err != nil {
			return nil, fmt.Errorf("decode message %d of run %s: %w", row.Seq, run.ID, err)
		}
		msgs = append(msgs, &m)
	}
	return msgs, nil
}

func (s *Service) finishFailed(ctx context.Context, run *store.Run, l *lease, cause error) error {
	_, err := s.store.RunFinish(context.WithoutCancel(ctx), store.RunFinishParams{
		ID: run.ID, Epoch: l.fence.Epoch, Status: store.RunFailed, Error: errorJSON(cause),
	})
	return s.finished(run, store.RunFailed, err)
}

// finishInterrupted writes the interrupted checkpoint, stores the pending interrupts and marks the
// run interrupted, in one transaction: a crash leaves either all of it or the run as it was before
// the interrupted turn's history, which a takeover runs again.
func (s *Service) finishInterrupted(ctx context.Context, run *store.Run, l *lease, rec *recorder) error {
	var list []store.InterruptCreateParams
	for _, p := range rec.interrupted.Interrupts() {
		tr := p.ToolRequest
		input, err := json.Marshal(tr.Input)
		if err != nil {
			return fmt.Errorf("encode interrupt input: %w", err)
		}
		md, err := json.Marshal(p.Metadata[engine.MetaInterrupt])
		if err != nil {
			return fmt.Errorf("encode interrupt metadata: %w", err)
		}
		ip := store.InterruptCreateParams{RunID: run.ID, Turn: rec.turn, Round: run.Resumes, Tool: tr.Name, Ref: tr.Ref, Input: input, Metadata: md}
		if in, out, err := s.registry.ToolSchemas(tr.Name); err == nil {
			if in != nil {
				ip.InputSchema = in.Raw()
			}
			if out != nil {
				ip.OutputSchema = out.Raw()
			}
		} else if sch, ok := rec.toolSchemas[tr.Name]; ok {
			ip.InputSchema, ip.OutputSchema = sch.Input, sch.Output // an external generate's tool (external.go)
		}
		list = append(list, ip)
	}
	var created []*store.Interrupt
	var requeued bool
	err := rec.saveInTx(ctx, func(tx *store.Store) error {
		var err error
		if created, err = tx.InterruptCreate(ctx, list); err != nil {
			return err
		}
		if sc := rec.interruptSpan; sc.IsValid() {
			if err := tx.RunSetResumeSpan(ctx, run.ID, sc.TraceID().String(), sc.SpanID().String()); err != nil {
				return err
			}
		}
		if _, err = tx.RunFinish(ctx, store.RunFinishParams{ID: run.ID, Epoch: l.fence.Epoch, Status: store.RunInterrupted}); err != nil {
			return err
		}
		// A replay offers the original run's decisions, and applies them when asked to (replay.go).
		if requeued, err = s.replayInterrupts(ctx, tx, run, created); err != nil || requeued {
			return err
		}
		// The policy in force decides what it has rules for (policies.go).
		current, err := tx.InterruptListByRun(ctx, run.ID)
		if err != nil {
			return err
		}
		if requeued, err = s.applyPolicy(ctx, tx, run, sameInterrupts(created, current)); err != nil {
			return err
		}
		// Those still pending wait for a person: they are notified (notify.go).
		return s.notifyPending(ctx, tx, run, created)
	})
	if errors.Is(err, store.ErrRunFinished) || errors.Is(err, store.ErrLeaseLost) {
		return nil
	}
	if err != nil {
		return err
	}
	s.publish(run.ID, event.RunStatusData{Status: store.RunInterrupted})
	for _, i := range created {
		s.publish(run.ID, event.InterruptChangedData{InterruptID: i.ID.String(), Status: i.Status})
	}
	if requeued {
		s.publish(run.ID, event.RunStatusData{Status: store.RunQueued})
		return errExecuteAgain
	}
	return nil
}

// sameInterrupts returns the interrupts of list that are among created, as list has them now.
func sameInterrupts(created, list []*store.Interrupt) []*store.Interrupt {
	ids := make(map[uuid.UUID]bool, len(created))
	for _, c := range created {
		ids[c.ID] = true
	}
	var out []*store.Interrupt
	for _, it := range list {
		if ids[it.ID] {
			out = append(out, it)
		}
	}
	return out
}

// errorJSON is a run's stored error: {status, message, details}.
//
// An error with ErrorDetails() adds them. A tool's interrupt that ended the run (a tool run on its own: no generate to pause) is
// FAILED_PRECONDITION, with the interrupt's metadata (or true) as details.interrupt.
func errorJSON(err error) json.RawMessage {
	status := engine.StatusOf(err)
	e := map[string]any{"status": string(status), "message": err.Error()}
	details := map[string]any{}
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Response != nil {
		details["last_response"] = ee.Response
	}
	var ie *engine.InterruptError
	if errors.As(err, &ie) {
		if status == engine.StatusUnknown {
			e["status"] = string(engine.StatusFailedPrecondition)
		}
		if ie.Metadata != nil {
			details["interrupt"] = ie.Metadata
		} else {
			details["interrupt"] = true
		}
	}
	var d interface{ ErrorDetails() map[string]any }
	if errors.As(err, &d) {
		for k, v := range d.ErrorDetails() {
			details[k] = v
		}
	}
	if len(details) > 0 {
		e["details"] = details
	}
	raw, merr := json.Marshal(e)
	if merr != nil {
		raw, _ = json.Marshal(map[string]any{"status": string(engine.StatusOf(err)), "message": err.Error()})
	}
	return raw
}

// continueTrace makes a resumed execution part of the run's trace: its spans nest under the turn
// that was interrupted, and its root span links to that turn (loupe.link.type=resume), so the
// explorer shows one run across the pause. Genkit leaves the two traces unrelated.
//
// Any other execution, the first included, starts the run's root span with the same ids every
// time (rootSpanIDs): a run taken over after a crash continues its trace under the same root, and
// the spans its first execution finished are that root's children.
func continueTrace(ctx context.Context, run *store.Run, resumed bool) context.Context {
	if !resumed || run.TraceID == nil || run.ResumeSpanID == nil {
		tid, sid := rootSpanIDs(run)
		return engine.WithRootSpanIDs(ctx, tid, sid)
	}
	tid, err := oteltrace.TraceIDFromHex(*run.TraceID)
	if err != nil {
		return ctx
	}
	sid, err := oteltrace.SpanIDFromHex(*run.ResumeSpanID)
	if err != nil {
		return ctx
	}
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: oteltrace.FlagsSampled, Remote: true})
	ctx = oteltrace.ContextWithRemoteSpanContext(ctx, sc)
	return engine.WithSpanLinks(ctx, oteltrace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("loupe.link.type", "resume")}})
}

// RootSpanIDs are the trace and span ids of a run's root span, known as soon as the run exists: a
// caller can name its trace before a worker has taken it (the reflection API's X-Genkit-Trace-Id).
func RootSpanIDs(run *store.Run) (oteltrace.TraceID, oteltrace.SpanID) { return rootSpanIDs(run) }

// rootSpanIDs are the ids of a run's root span, the same for each of its executions: the trace id
// its first execution recorded, or else the run id itself (a UUID is 16 bytes, as a trace id is),
// and a span id hashed from the run id.
func rootSpanIDs(run *store.Run) (oteltrace.TraceID, oteltrace.SpanID) {
	tid := oteltrace.TraceID(run.ID)
	if run.TraceID != nil {
		if t, err := oteltrace.TraceIDFromHex(*run.TraceID); err == nil {
			tid = t
		}
	}
	h := fnv.New64a()
	_, _ = h.Write(run.ID[:])
	_, _ = h.Write([]byte("root span"))
	var sid oteltrace.SpanID
	binary.BigEndian.PutUint64(sid[:], h.Sum64()|1) // never zero
	return tid, sid
}
