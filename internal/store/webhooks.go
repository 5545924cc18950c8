package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// WebhookDelivery is one attempt to post a notification about an interrupt.
type WebhookDelivery struct {
	ID          int64     `db:"id" json:"-"`
	InterruptID uuid.UUID `db:"interrupt_id" json:"interrupt_id"`
	Event       string    `db:"event" json:"event"`
	// Target is the receiver as the logs show it: its id and redacted URL.
	Target      string     `db:"target" json:"target"`
	DeliveryKey string     `db:"delivery_key" json:"delivery_key"`
	JobID       *int64     `db:"job_id" json:"job_id,omitempty"`
	Attempt     int        `db:"attempt" json:"attempt"`
	AttemptedAt time.Time  `db:"attempted_at" json:"attempted_at"`
	DurationMS  int        `db:"duration_ms" json:"duration_ms"`
	StatusCode  *int       `db:"status_code" json:"status_code,omitempty"`
	Error       *string    `db:"error" json:"error,omitempty"`
	NextRetryAt *time.Time `db:"next_retry_at" json:"next_retry_at,omitempty"`
}

// WebhookDeliveryInsert logs an attempt.
func (s *Store) WebhookDeliveryInsert(ctx context.Context, d *WebhookDelivery) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO webhook_deliveries
		(interrupt_id, event, target, delivery_key, job_id, attempt, attempted_at, duration_ms, status_code, error, next_retry_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		d.InterruptID, d.Event, d.Target, d.DeliveryKey, d.JobID, d.Attempt, d.AttemptedAt, d.DurationMS, d.StatusCode, d.Error, d.NextRetryAt); err != nil {
		return fmt.Errorf("log webhook delivery of interrupt %s: %w", d.InterruptID, err)
	}
	return nil
}

// WebhookDeliveryList returns an interrupt's delivery log, oldest attempt first.
func (s *Store) WebhookDeliveryList(ctx context.Context, interruptID uuid.UUID) ([]*WebhookDelivery, error) {
	rows, err := s.db.Query(ctx, `SELECT id, interrupt_id, event, target, delivery_key, job_id, attempt, attempted_at,
		duration_ms, status_code, error, next_retry_at FROM webhook_deliveries WHERE interrupt_id = $1 ORDER BY id`, interruptID)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries of interrupt %s: %w", interruptID, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[WebhookDelivery])
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries of interrupt %s: %w", interruptID, err)
	}
	return list, nil
}
