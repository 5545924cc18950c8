package runs

import (
	"context"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// sweepLoop looks for runs whose executor died (their lease expired while they were running) and
// enqueues a job to take each over. It runs at start, so a restarted process recovers its own runs
// at once, and then every SweepInterval, so a surviving instance recovers a dead one's.
func (s *Service) sweepLoop() {
	defer s.sweepWG.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		s.sweep()
		select {
		case <-s.stopped:
			return
		case <-t.C:
		}
	}
}

func (s *Service) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids, err := s.store.RunListOrphaned(ctx, 100)
	if err != nil {
		s.log.Warn("recovery sweep", "err", err)
		return
	}
	for _, id := range ids {
		err := s.store.WithTx(ctx, func(tx *store.Store) error {
			waiting, err := tx.RunJobWaiting(ctx, id)
			if err != nil || waiting {
				return err
			}
			run, err := tx.RunGet(ctx, id)
			if err != nil {
				return err
			}
			s.log.Info("taking over a run whose worker died", "run", id)
			return s.enqueue(ctx, tx, run)
		})
		if err != nil {
			s.log.Warn("recovery sweep", "run", id, "err", err)
		}
	}
}
