// Package store holds every SQL statement Loupe runs. One Store wraps a pgx pool or a transaction,
// so the same method works in both; multi-step writes go through WithTx.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned when a row asked for by key does not exist.
var ErrNotFound = errors.New("not found")

// DBTX is what a Store runs its statements on: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store is Loupe's data access layer.
type Store struct {
	pool *pgxpool.Pool
	db   DBTX
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, db: pool}
}

// Pool is the underlying pool, for the few callers (River, health checks) that need it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// WithTx runs fn on a Store bound to one transaction, committing when fn returns nil and rolling
// back otherwise. Called on a Store that is already in a transaction, it uses a savepoint.
func (s *Store) WithTx(ctx context.Context, fn func(tx *Store) error) error {
	var (
		tx  pgx.Tx
		err error
	)
	if outer, ok := s.db.(pgx.Tx); ok {
		tx, err = outer.Begin(ctx)
	} else {
		tx, err = s.pool.Begin(ctx)
	}
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(&Store{pool: s.pool, db: tx}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// Tx is the transaction a Store is bound to, or nil. River's transactional enqueue needs it.
func (s *Store) Tx() pgx.Tx {
	tx, _ := s.db.(pgx.Tx)
	return tx
}

// notFound turns pgx.ErrNoRows into ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// NewID returns a new row id: a UUIDv7, whose leading bits are the time it was made. Runs and
// interrupts get ids in creation order, so inserts into their primary keys, and into every table
// keyed by run_id first, append to the right edge of the index instead of touching random pages.
func NewID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}
