package runs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// Cancel cancels a queued, running or interrupted run and its pending interrupts in one
// transaction. Work in progress stops through its context: at once in this process, and within a
// third of the lease TTL on any other instance, whose heartbeat sees the status.
func (s *Service) Cancel(ctx context.Context, runID uuid.UUID, actor string) (*store.Run, error) {
	var run *store.Run
	var cancelled int64
	err := s.store.WithTx(ctx, func(tx *store.Store) error {
		var err error
		run, err = tx.RunCancel(ctx, runID)
		if errors.Is(err, store.ErrRunFinished) {
			return fmt.Errorf("%w: %w", ErrConflict, err)
		}
		if err != nil {
			return err
		}
		if cancelled, err = tx.InterruptCancelPending(ctx, runID, actor); err != nil {
			return err
		}
		return tx.AuditInsert(ctx, actor, "run.cancel", "run", runID.String(), map[string]any{"interrupts_cancelled": cancelled})
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	stop := s.active[runID]
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.publish(runID, event.RunStatusData{Status: store.RunCancelled})
	if cancelled > 0 {
		s.publish(runID, event.InterruptChangedData{Status: store.InterruptCancelled})
	}
	return run, nil
}
