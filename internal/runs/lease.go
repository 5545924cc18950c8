package runs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// lease is one execution's hold on its run. Its fence goes with every write the execution makes,
// so the database refuses the writes of an execution that lost the run. It also knows, without a
// round trip, until when the run is surely still its own: no other execution can take the lease
// before it expires, and it expires no sooner than a TTL after the acquisition or renewal that was
// sent at a given moment. A tool about to run checks that moment has not passed, and asks the
// database when it has (a worker that was paused, say).
type lease struct {
	svc   *Service
	fence store.Fence
	ttl   time.Duration

	mu    sync.Mutex
	until time.Time // the lease is surely held before this (monotonic clock)
}

// leaseMargin is the part of the TTL not counted on, for clocks that drift between the worker and
// the database.
const leaseMargin = 5

func newLease(svc *Service, run *store.Run, sentAt time.Time) *lease {
	l := &lease{svc: svc, fence: store.FenceOf(run), ttl: svc.cfg.LeaseTTL}
	l.heldFrom(sentAt)
	return l
}

// heldFrom notes an acquisition or renewal that was sent at sentAt and succeeded.
func (l *lease) heldFrom(sentAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = sentAt.Add(l.ttl - l.ttl/leaseMargin)
}

// renew extends the lease and returns the run's status; a lease taken over is store.ErrLeaseLost.
func (l *lease) renew(ctx context.Context) (string, error) {
	sent := time.Now()
	status, err := l.svc.store.RunRenewLease(ctx, l.fence, l.ttl)
	if err == nil && status == store.RunRunning {
		l.heldFrom(sent)
	}
	return status, err
}

// confirm returns nil when the execution still holds a running run, from memory when the last
// renewal is recent enough, else from the database, and the moment at which it was known to hold
// it (no later than the check, on this process's clock).
func (l *lease) confirm(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	now := time.Now()
	l.mu.Lock()
	held := now.Before(l.until)
	l.mu.Unlock()
	if held {
		return now, nil
	}
	status, err := l.renew(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if status != store.RunRunning {
		return time.Time{}, fmt.Errorf("run %s is %s: %w", l.fence.RunID, status, store.ErrLeaseLost)
	}
	return now, nil
}
