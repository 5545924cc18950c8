package store

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrLeaseLost is returned when an execution writes into a run that it no longer holds: another
// execution took the run over (the lease epoch moved on), or, for the writes that need a running
// run, the run was cancelled, finished or interrupted meanwhile. Nothing of the write was stored.
var ErrLeaseLost = errors.New("run is no longer held by this execution")

// Fence is an execution's claim on a run: the lease epoch that RunAcquire gave it. Every write an
// execution makes carries its fence and is checked against the run's row in the same transaction
// (migrations/00023_run_fencing.sql, loupe_fence), the way fencing tokens guard a lock: a worker
// that was paused past its lease, or whose lease another worker took over, cannot write into the
// run any more, however late it wakes up.
//
// The zero Fence writes unfenced, for tests and tools that write outside an execution.
type Fence struct {
	RunID uuid.UUID
	Epoch int64
}

// FenceOf is the fence of the execution that acquired run.
func FenceOf(run *Run) Fence { return Fence{RunID: run.ID, Epoch: run.LeaseEpoch} }

// fenceCode is the SQLSTATE loupe_fence raises.
const fenceCode = "LR001"

// fenceSQL checks a fence and locks the run's row until the transaction ends. It takes the row
// lock an UPDATE of the row takes, so that the fenced transactions of a run, its takeover and its
// cancellation queue up on the row in one order, and none waits for a lock upgrade.
const fenceSQL = `SELECT loupe_fence($1, $2, $3)`

// queue puts the fence first in b. active also requires the run to be running.
func (f Fence) queue(b *pgx.Batch, active bool) {
	if f.Epoch != 0 {
		b.Queue(fenceSQL, f.RunID, f.Epoch, active)
	}
}

// fenceErr turns loupe_fence's refusal into ErrLeaseLost.
func fenceErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == fenceCode {
		return ErrLeaseLost
	}
	return err
}

// sendFenced sends the statements that queue adds after f's fence, in one round trip and one
// transaction (the caller's, when the Store is in one). active also requires a running run.
func (s *Store) sendFenced(ctx context.Context, f Fence, active bool, queue func(b *pgx.Batch)) error {
	b := &pgx.Batch{}
	f.queue(b, active)
	queue(b)
	return fenceErr(s.db.SendBatch(ctx, b).Close())
}
