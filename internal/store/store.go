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
	pool  *pgxpool.Pool
	db    DBTX
	known *knownSpans         // the spans this process stored lately (see spanIngestFast)
	parts *spanPartitionCache // the partitions of spans, for the merge (see spanMergeSQLOn)
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, db: pool, known: newKnownSpans(), parts: &spanPartitionCache{}}
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
	if err := fn(&Store{pool: s.pool, db: tx, known: s.known, parts: s.parts}); err != nil {
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

// WriteProbe checks that the database can write what needs new room: it creates a temporary table
// and writes a row into it, which takes a new file and its first page (what a full disk refuses,
// SQLSTATE 53100, while reads and pings still succeed), and rolls it all back. It leaves dead
// catalog rows behind: it is for checking whether a shortage is over, not for every probe.
func (s *Store) WriteProbe(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("write probe: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE loupe_write_probe (b bytea) ON COMMIT DROP`); err != nil {
		return fmt.Errorf("write probe: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO loupe_write_probe VALUES ('\x00')`); err != nil {
		return fmt.Errorf("write probe: %w", err)
	}
	return nil
}
