package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/loupe-dev/loupe/internal/engine"
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
	run, err := s.store.RunAcquire(ctx, job.Args.RunID, s.owner, s.cfg.LeaseTTL)
	switch {
	case errors.Is(err, store.ErrRunFinished), errors.Is(err, store.ErrNotFound):
		return nil
	case errors.Is(err, store.ErrLeaseHeld):
		return river.JobSnooze(s.cfg.LeaseTTL)
	case err != nil:
		return err
	}
	s.publish(run.ID, EventStatus, map[string]any{"status": store.RunRunning})
	return s.execute(ctx, run)
}

// execute runs the action once, from the start or from the run's recorded history, and records the
// outcome. It returns an error only when the execution must be retried (the process is stopping or
// the database failed); the run's own failures are recorded as its status.
func (s *Service) execute(jobCtx context.Context, run *store.Run) error {
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
		s.heartbeat(ctx, run, cancel)
	}()
	defer func() { cancel(); <-heartbeatDone }()

	history, err := s.history(ctx, run)
	if err != nil {
		return err
	}
	rec, err := newRecorder(ctx, s, run, history)
	if err != nil {
		return err
	}
	opts := []engine.GenerateOption{engine.WithHooks(rec.hooks()), engine.WithMiddleware(rec.middleware())}
	if len(history) > 0 {
		resume, err := s.resumeOptions(ctx, run, history)
		if err != nil {
			return s.finishFailed(ctx, run, err)
		}
		opts = append(opts, engine.WithHistory(history...))
		opts = append(opts, resume...)
	}
	runCtx := engine.WithRunID(ctx, run.ID.String())
	runCtx = engine.WithContextOptions(runCtx, opts...)
	out, runErr := s.registry.Run(runCtx, run.Action, run.Input, rec.recordStream)
	if err := rec.flush(ctx); err != nil {
		return err
	}
	if err := rec.progress(context.WithoutCancel(ctx)); err != nil {
		return err
	}

	// Stopping (not cancelled by a user): keep the checkpoint, release the lease, let River retry.
	if jobCtx.Err() != nil {
		s.release(run)
		return fmt.Errorf("run %s stopped before it finished: %w", run.ID, jobCtx.Err())
	}
	switch {
	case rec.interrupted != nil && runErr == nil:
		return s.finishInterrupted(ctx, run, rec)
	case runErr == nil:
		return s.finish(ctx, run, store.RunSucceeded, out, nil)
	case ctx.Err() != nil:
		// Cancelled through its lease: the run row already says cancelled (or another worker owns it).
		return nil
	case engine.StatusOf(runErr) == engine.StatusAborted:
		return s.finish(ctx, run, store.RunAborted, nil, errorJSON(runErr))
	default:
		return s.finish(ctx, run, store.RunFailed, nil, errorJSON(runErr))
	}
}

// heartbeat renews the lease until ctx ends, and cancels the execution when the run was cancelled
// or the lease was lost to another worker.
func (s *Service) heartbeat(ctx context.Context, run *store.Run, cancel context.CancelFunc) {
	t := time.NewTicker(s.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		status, err := s.store.RunRenewLease(ctx, run.ID, s.owner, s.cfg.LeaseTTL)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrLeaseHeld) || (err == nil && status != store.RunRunning) {
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
func (s *Service) release(run *store.Run) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.store.RunReleaseLease(ctx, run.ID, s.owner); err != nil {
		s.log.Warn("release run lease", "run", run.ID, "err", err)
	}
}

// history loads the recorded conversation of a run being resumed or taken over.
func (s *Service) history(ctx context.Context, run *store.Run) ([]*engine.Message, error) {
	rows, err := s.store.MessageList(ctx, run.ID)
	if err != nil {
		return nil, err
	}
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

func (s *Service) finish(ctx context.Context, run *store.Run, status string, output, errJSON json.RawMessage) error {
	_, err := s.store.RunFinish(context.WithoutCancel(ctx), store.RunFinishParams{
		ID: run.ID, Owner: s.owner, Status: status, Output: output, Error: errJSON,
	})
	if errors.Is(err, store.ErrRunFinished) || errors.Is(err, store.ErrLeaseHeld) {
		return nil // cancelled meanwhile, or taken over: the row is someone else's now
	}
	if err != nil {
		return err
	}
	s.publish(run.ID, EventStatus, map[string]any{"status": status})
	return nil
}

func (s *Service) finishFailed(ctx context.Context, run *store.Run, err error) error {
	return s.finish(ctx, run, store.RunFailed, nil, errorJSON(err))
}

// finishInterrupted stores the pending interrupts and marks the run interrupted, in one transaction.
func (s *Service) finishInterrupted(ctx context.Context, run *store.Run, rec *recorder) error {
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
		}
		list = append(list, ip)
	}
	var created []*store.Interrupt
	err := s.store.WithTx(context.WithoutCancel(ctx), func(tx *store.Store) error {
		var err error
		if created, err = tx.InterruptCreate(ctx, list); err != nil {
			return err
		}
		_, err = tx.RunFinish(ctx, store.RunFinishParams{ID: run.ID, Owner: s.owner, Status: store.RunInterrupted})
		return err
	})
	if errors.Is(err, store.ErrRunFinished) || errors.Is(err, store.ErrLeaseHeld) {
		return nil
	}
	if err != nil {
		return err
	}
	s.publish(run.ID, EventStatus, map[string]any{"status": store.RunInterrupted})
	for _, i := range created {
		s.publish(run.ID, EventInterrupt, map[string]any{"interrupt_id": i.ID.String(), "status": i.Status})
	}
	return nil
}

// errorJSON is a run's stored error: {status, message, details}.
func errorJSON(err error) json.RawMessage {
	e := map[string]any{"status": string(engine.StatusOf(err)), "message": err.Error()}
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Response != nil {
		e["details"] = map[string]any{"last_response": ee.Response}
	}
	raw, merr := json.Marshal(e)
	if merr != nil {
		raw, _ = json.Marshal(map[string]any{"status": string(engine.StatusOf(err)), "message": err.Error()})
	}
	return raw
}
