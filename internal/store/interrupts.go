package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Interrupt statuses, as in DESIGN.md's contract.
const (
	InterruptPending   = "pending"
	InterruptApproved  = "approved"
	InterruptEdited    = "edited"
	InterruptResponded = "responded"
	InterruptDenied    = "denied"
	InterruptCancelled = "cancelled"
)

// Interrupt is one tool request that stopped to ask a person.
type Interrupt struct {
	ID           uuid.UUID       `db:"id" json:"id"`
	RunID        uuid.UUID       `db:"run_id" json:"run_id"`
	Turn         int             `db:"turn" json:"turn"`
	Tool         string          `db:"tool" json:"tool"`
	Ref          string          `db:"ref" json:"ref"`
	Input        json.RawMessage `db:"input" json:"input"`
	Metadata     json.RawMessage `db:"metadata" json:"metadata"`
	InputSchema  json.RawMessage `db:"input_schema" json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `db:"output_schema" json:"output_schema,omitempty"`
	Status       string          `db:"status" json:"status"`
	Resolution   json.RawMessage `db:"resolution" json:"resolution,omitempty"`
	ResolvedBy   *string         `db:"resolved_by" json:"resolved_by,omitempty"`
	ResolvedAt   *time.Time      `db:"resolved_at" json:"resolved_at,omitempty"`
	Comment      *string         `db:"comment" json:"comment,omitempty"`
	CreatedAt    time.Time       `db:"created_at" json:"created_at"`
	Version      int64           `db:"version" json:"version"`
}

const interruptColumns = `id, run_id, turn, tool, ref, input, metadata, input_schema, output_schema,
	status, resolution, resolved_by, resolved_at, comment, created_at, version`

// InterruptListPending returns pending interrupts, oldest first.
func (s *Store) InterruptListPending(ctx context.Context, limit int) ([]*Interrupt, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.Query(ctx, `SELECT `+interruptColumns+` FROM interrupts
		WHERE status = 'pending' ORDER BY created_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list pending interrupts: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err != nil {
		return nil, fmt.Errorf("list pending interrupts: %w", err)
	}
	return list, nil
}

// InterruptCountPending counts the interrupts waiting for a reviewer.
func (s *Store) InterruptCountPending(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM interrupts WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending interrupts: %w", err)
	}
	return n, nil
}
