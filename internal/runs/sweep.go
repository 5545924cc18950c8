package runs

import (
	"context"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// sweepLoop looks for runs that nothing will execute (store.RunListOrphaned: a running run whose
// executor died or froze past its lease, a queued run whose job was fetched by a worker that died
// before taking the lease) and enqueues a job to take each over. It runs at start, so a restarted
// process recovers its own runs at once, and then every SweepInterval, so a surviving instance
// recovers a dead one's. A run is thus picked up again at most LeaseTTL + SweepInterval after its
// last execution stopped (20 s by default).
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
	ids, err := s.store.RunListOrphaned(ctx, store.RunListOrphanedParams{QueuedFor: s.cfg.LeaseTTL, Limit: 100})
	if err != nil {
		s.log.Warn("recovery sweep", "err", err)
		return
	}
	// The jobs the dead workers held stay `running` in River's table (River does not rescue a job
	// without a timeout): finalize them, once they are older than the rescue horizon.
	if n, err := s.store.JobCancelAbandoned(ctx, 2*s.cfg.LeaseTTL); err != nil {
		s.log.Warn("recovery sweep: abandoned jobs", "err", err)
	} else if n > 0 {
		s.log.Info("finalized the jobs of workers that died", "jobs", n)
	}
	s.expireInterrupts(ctx)
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
