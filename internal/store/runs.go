package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Run statuses, as in DESIGN.md's contract.
const (
	RunQueued      = "queued"
	RunRunning     = "running"
	RunInterrupted = "interrupted"
	RunSucceeded   = "succeeded"
	RunFailed      = "failed"
	RunAborted     = "aborted"
	RunCancelled   = "cancelled"
)

// RunStatuses lists every run status in lifecycle order.
var RunStatuses = []string{RunQueued, RunRunning, RunInterrupted, RunSucceeded, RunFailed, RunAborted, RunCancelled}

// Run is one execution of a registered action.
type Run struct {
	ID           uuid.UUID       `db:"id" json:"id"`
	Action       string          `db:"action" json:"action"`
	Input        json.RawMessage `db:"input" json:"input"`
	Status       string          `db:"status" json:"status"`
	Output       json.RawMessage `db:"output" json:"output,omitempty"`
	Error        json.RawMessage `db:"error" json:"error,omitempty"`
	TraceID      *string         `db:"trace_id" json:"trace_id,omitempty"`
	Model        *string         `db:"model" json:"model,omitempty"`
	Turns        int             `db:"turns" json:"turns"`
	InputTokens  int64           `db:"input_tokens" json:"input_tokens"`
	OutputTokens int64           `db:"output_tokens" json:"output_tokens"`
	ReplayOf     *uuid.UUID      `db:"replay_of" json:"replay_of,omitempty"`
	ReplayMode   *string         `db:"replay_mode" json:"replay_mode,omitempty"`
	ForkOf       *uuid.UUID      `db:"fork_of" json:"fork_of,omitempty"`
	ForkTurn     *int            `db:"fork_turn" json:"fork_turn,omitempty"`
	CreatedBy    *string         `db:"created_by" json:"created_by,omitempty"`
	CreatedAt    time.Time       `db:"created_at" json:"created_at"`
	StartedAt    *time.Time      `db:"started_at" json:"started_at,omitempty"`
	FinishedAt   *time.Time      `db:"finished_at" json:"finished_at,omitempty"`
	UpdatedAt    time.Time       `db:"updated_at" json:"updated_at"`
	Version      int64           `db:"version" json:"version"`
}

const runColumns = `id, action, input, status, output, error, trace_id, model, turns, input_tokens,
	output_tokens, replay_of, replay_mode, fork_of, fork_turn, created_by, created_at, started_at,
	finished_at, updated_at, version`

// RunCreateParams describes a new run.
type RunCreateParams struct {
	Action     string
	Input      json.RawMessage
	CreatedBy  string
	ReplayOf   *uuid.UUID
	ReplayMode string
	ForkOf     *uuid.UUID
	ForkTurn   *int
}

// RunCreate inserts a queued run.
func (s *Store) RunCreate(ctx context.Context, p RunCreateParams) (*Run, error) {
	input := p.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	rows, err := s.db.Query(ctx, `
		INSERT INTO runs (action, input, created_by, replay_of, replay_mode, fork_of, fork_turn)
		VALUES ($1, $2, NULLIF($3, ''), $4, NULLIF($5, ''), $6, $7)
		RETURNING `+runColumns,
		p.Action, input, p.CreatedBy, p.ReplayOf, p.ReplayMode, p.ForkOf, p.ForkTurn)
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Run])
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	return run, nil
}

// RunGet returns one run.
func (s *Store) RunGet(ctx context.Context, id uuid.UUID) (*Run, error) {
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Run])
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, notFound(err))
	}
	return run, nil
}

// RunCursor is a keyset position in the runs list, newest first.
type RunCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// RunListParams filters and pages the runs list. Zero values mean "no filter".
type RunListParams struct {
	Status string
	Action string
	Query  string // text searched in the input, output and error
	Since  time.Time
	Until  time.Time
	After  *RunCursor // the last row of the previous page
	Limit  int        // default 50, at most 500
}

// RunList returns runs newest first, and the cursor of the next page (nil on the last page).
func (s *Store) RunList(ctx context.Context, p RunListParams) ([]*Run, *RunCursor, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Status != "" {
		where = append(where, "status = "+arg(p.Status))
	}
	if p.Action != "" {
		where = append(where, "action = "+arg(p.Action))
	}
	if !p.Since.IsZero() {
		where = append(where, "created_at >= "+arg(p.Since))
	}
	if !p.Until.IsZero() {
		where = append(where, "created_at < "+arg(p.Until))
	}
	if p.Query != "" {
		pattern := "%" + escapeLike(p.Query) + "%"
		ph := arg(pattern)
		where = append(where, "(input::text ILIKE "+ph+" OR coalesce(output::text, '') ILIKE "+ph+
			" OR coalesce(error::text, '') ILIKE "+ph+" OR action ILIKE "+ph+")")
	}
	if p.After != nil {
		where = append(where, "(created_at, id) < ("+arg(p.After.CreatedAt)+", "+arg(p.After.ID)+")")
	}
	sql := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY created_at DESC, id DESC LIMIT " + arg(limit+1)
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Run])
	if err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	var next *RunCursor
	if len(runs) > limit {
		runs = runs[:limit]
		last := runs[limit-1]
		next = &RunCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return runs, next, nil
}

// RunCountByStatus counts runs per status. Every status is present, with zero where none exist.
func (s *Store) RunCountByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT status, count(*) FROM runs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	counts := make(map[string]int64, len(RunStatuses))
	for _, st := range RunStatuses {
		counts[st] = 0
	}
	type row struct {
		Status string
		Count  int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	for _, r := range got {
		counts[r.Status] = r.Count
	}
	return counts, nil
}

// escapeLike escapes LIKE's wildcards so a search for "50%" finds that text.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
