package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ModelCall is one recorded model response of a run's turn.
type ModelCall struct {
	RunID     uuid.UUID       `db:"run_id" json:"-"`
	Turn      int             `db:"turn" json:"turn"`
	Model     string          `db:"model" json:"model"`
	Request   json.RawMessage `db:"request" json:"request"`
	Response  json.RawMessage `db:"response" json:"response"`
	LatencyMs float64         `db:"latency_ms" json:"latency_ms"`
	CreatedAt time.Time       `db:"created_at" json:"created_at"`
}

const modelCallColumns = `run_id, turn, model, request, response, latency_ms, created_at`

// ModelCallPut records the response of a turn's model call; recording a turn again replaces it.
func (s *Store) ModelCallPut(ctx context.Context, c ModelCall) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO model_calls (run_id, turn, model, request, response, latency_ms)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, turn) DO UPDATE SET model = excluded.model,
		request = excluded.request, response = excluded.response, latency_ms = excluded.latency_ms, created_at = now()`,
		c.RunID, c.Turn, c.Model, c.Request, c.Response, c.LatencyMs); err != nil {
		return fmt.Errorf("record model call of turn %d: %w", c.Turn, err)
	}
	return nil
}

// ModelCallList returns a run's recorded model calls by turn.
func (s *Store) ModelCallList(ctx context.Context, runID uuid.UUID) ([]*ModelCall, error) {
	rows, err := s.db.Query(ctx, `SELECT `+modelCallColumns+` FROM model_calls WHERE run_id = $1 ORDER BY turn`, runID)
	if err != nil {
		return nil, fmt.Errorf("list model calls of run %s: %w", runID, err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[ModelCall])
	if err != nil {
		return nil, fmt.Errorf("list model calls of run %s: %w", runID, err)
	}
	return calls, nil
}
