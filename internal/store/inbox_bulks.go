package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// InboxBulk is one bulk decision of the inbox: who took it, what, and why.
type InboxBulk struct {
	ID        uuid.UUID `db:"id"`
	Actor     string    `db:"actor"`
	Action    string    `db:"action"`
	Reason    string    `db:"reason"`
	CreatedAt time.Time `db:"created_at"`
}

// InboxBulkItem is what became of one item of a bulk decision. DoneAt is nil until a step has
// applied it.
type InboxBulkItem struct {
	BulkID      uuid.UUID  `db:"bulk_id"`
	Pos         int        `db:"pos"`
	InterruptID uuid.UUID  `db:"interrupt_id"`
	StartedAt   *time.Time `db:"started_at"`
	DoneAt      *time.Time `db:"done_at"`
	OK          bool       `db:"ok"`
	Status      string     `db:"status"`
	Tool        string     `db:"tool"`
	RunID       *uuid.UUID `db:"run_id"`
	Message     string     `db:"message"`
}

const inboxBulkItemColumns = `bulk_id, pos, interrupt_id, started_at, done_at, ok, status, tool, run_id, message`

// InboxBulkCreateParams records a bulk decision on InterruptIDs, in their order.
type InboxBulkCreateParams struct {
	Actor        string
	Action       string
	Reason       string
	InterruptIDs []uuid.UUID
}

// InboxBulkCreate records a bulk decision and its items, none applied yet, in one transaction.
func (s *Store) InboxBulkCreate(ctx context.Context, p InboxBulkCreateParams) (*InboxBulk, error) {
	var bulk *InboxBulk
	err := s.WithTx(ctx, func(tx *Store) error {
		rows, err := tx.db.Query(ctx, `INSERT INTO inbox_bulks (id, actor, action, reason) VALUES ($1, $2, $3, $4)
			RETURNING id, actor, action, reason, created_at`, uuid.New(), p.Actor, p.Action, p.Reason)
		if err != nil {
			return err
		}
		if bulk, err = pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[InboxBulk]); err != nil {
			return err
		}
		_, err = tx.db.CopyFrom(ctx, pgx.Identifier{"inbox_bulk_items"}, []string{"bulk_id", "pos", "interrupt_id"},
			pgx.CopyFromSlice(len(p.InterruptIDs), func(i int) ([]any, error) {
				return []any{bulk.ID, i, p.InterruptIDs[i]}, nil
			}))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create inbox bulk: %w", err)
	}
	return bulk, nil
}

// InboxBulkGet is a bulk decision with its items in their order.
func (s *Store) InboxBulkGet(ctx context.Context, id uuid.UUID) (*InboxBulk, []*InboxBulkItem, error) {
	rows, err := s.db.Query(ctx, `SELECT id, actor, action, reason, created_at FROM inbox_bulks WHERE id = $1`, id)
	if err != nil {
		return nil, nil, fmt.Errorf("get inbox bulk %s: %w", id, err)
	}
	bulk, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[InboxBulk])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("get inbox bulk %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get inbox bulk %s: %w", id, err)
	}
	rows, err = s.db.Query(ctx, `SELECT `+inboxBulkItemColumns+` FROM inbox_bulk_items WHERE bulk_id = $1 ORDER BY pos`, id)
	if err != nil {
		return nil, nil, fmt.Errorf("list inbox bulk %s items: %w", id, err)
	}
	items, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[InboxBulkItem])
	if err != nil {
		return nil, nil, fmt.Errorf("list inbox bulk %s items: %w", id, err)
	}
	return bulk, items, nil
}

// InboxBulkTake takes the next limit items of a bulk decision that no step has taken, marking
// them started: two steps running at once never get the same item.
func (s *Store) InboxBulkTake(ctx context.Context, id uuid.UUID, limit int) ([]*InboxBulkItem, error) {
	rows, err := s.db.Query(ctx, `UPDATE inbox_bulk_items SET started_at = now()
		WHERE bulk_id = $1 AND pos IN (
			SELECT pos FROM inbox_bulk_items WHERE bulk_id = $1 AND started_at IS NULL ORDER BY pos LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING `+inboxBulkItemColumns, id, limit)
	if err != nil {
		return nil, fmt.Errorf("take inbox bulk %s items: %w", id, err)
	}
	items, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[InboxBulkItem])
	if err != nil {
		return nil, fmt.Errorf("take inbox bulk %s items: %w", id, err)
	}
	return items, nil
}

// InboxBulkItemDone records what became of an item a step took.
func (s *Store) InboxBulkItemDone(ctx context.Context, it *InboxBulkItem) error {
	_, err := s.db.Exec(ctx, `UPDATE inbox_bulk_items SET done_at = now(), ok = $3, status = $4, tool = $5, run_id = $6, message = $7
		WHERE bulk_id = $1 AND pos = $2`, it.BulkID, it.Pos, it.OK, it.Status, it.Tool, it.RunID, it.Message)
	if err != nil {
		return fmt.Errorf("record inbox bulk %s item %d: %w", it.BulkID, it.Pos, err)
	}
	return nil
}
