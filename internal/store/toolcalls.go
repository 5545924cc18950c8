package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Tool call ledger statuses and sources.
const (
	ToolCallStarted     = "started"
	ToolCallCompleted   = "completed"
	ToolCallFailed      = "failed"
	ToolCallInterrupted = "interrupted"

	ToolSourceExecuted   = "executed"
	ToolSourceReexecuted = "reexecuted"
	ToolSourceReused     = "reused"
	ToolSourceReviewer   = "reviewer"
)

// ToolCall is one entry of the tool-call ledger.
type ToolCall struct {
	RunID          uuid.UUID       `db:"run_id" json:"-"`
	Turn           int             `db:"turn" json:"turn"`
	Ref            string          `db:"ref" json:"ref"`
	Tool           string          `db:"tool" json:"tool"`
	Input          json.RawMessage `db:"input" json:"input"`
	Status         string          `db:"status" json:"status"`
	Source         string          `db:"source" json:"source"`
	Output         json.RawMessage `db:"output" json:"output,omitempty"`
	Error          json.RawMessage `db:"error" json:"error,omitempty"`
	Attempt        int             `db:"attempt" json:"attempt"`
	IdempotencyKey string          `db:"idempotency_key" json:"idempotency_key"`
	StartedAt      time.Time       `db:"started_at" json:"started_at"`
	FinishedAt     *time.Time      `db:"finished_at" json:"finished_at,omitempty"`
}

const toolCallColumns = `run_id, turn, ref, tool, input, status, source, output, error, attempt,
	idempotency_key, started_at, finished_at`

// ToolCallStartParams is the intent to execute a tool call.
type ToolCallStartParams struct {
	RunID          uuid.UUID
	Turn           int
	Ref            string
	Tool           string
	Input          json.RawMessage
	IdempotencyKey string
}

// ToolCallStart records the intent to execute a call and returns its ledger entry, while the
// execution fenced by f holds the run (ErrLeaseLost otherwise: the tool must not run). A call
// already completed is returned as it is, with reused set, and must not run again. A call found
// started was in flight at a crash: it is marked re-executed and its attempt counted.
func (s *Store) ToolCallStart(ctx context.Context, f Fence, p ToolCallStartParams) (call *ToolCall, reused bool, err error) {
	err = s.sendFenced(ctx, f, true, func(b *pgx.Batch) {
		b.Queue(`INSERT INTO tool_calls (run_id, turn, ref, tool, input, idempotency_key)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (run_id, turn, ref) DO UPDATE SET
				attempt = tool_calls.attempt + 1,
				source = CASE WHEN tool_calls.status = 'started' THEN 'reexecuted' ELSE tool_calls.source END,
				status = 'started', input = excluded.input, started_at = now(), finished_at = NULL
			WHERE tool_calls.status <> 'completed'
			RETURNING `+toolCallColumns, p.RunID, p.Turn, p.Ref, p.Tool, CleanJSON(p.Input), p.IdempotencyKey).
			Query(func(rows pgx.Rows) error {
				var err error
				call, err = pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[ToolCall])
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				return err
			})
	})
	if err != nil {
		return nil, false, fmt.Errorf("record intent of tool call %s: %w", p.Ref, err)
	}
	if call != nil {
		return call, false, nil
	}
	call, err = s.ToolCallGet(ctx, p.RunID, p.Turn, p.Ref)
	if err != nil {
		return nil, false, err
	}
	return call, true, nil
}

// ToolCallGet returns one ledger entry.
func (s *Store) ToolCallGet(ctx context.Context, runID uuid.UUID, turn int, ref string) (*ToolCall, error) {
	rows, err := s.db.Query(ctx, `SELECT `+toolCallColumns+` FROM tool_calls WHERE run_id = $1 AND turn = $2 AND ref = $3`,
		runID, turn, ref)
	if err != nil {
		return nil, fmt.Errorf("get tool call %s: %w", ref, err)
	}
	call, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[ToolCall])
	if err != nil {
		return nil, fmt.Errorf("get tool call %s: %w", ref, notFound(err))
	}
	return call, nil
}

// ToolCallFinishParams is the result of a tool call.
type ToolCallFinishParams struct {
	RunID  uuid.UUID
	Turn   int
	Ref    string
	Status string // completed, failed or interrupted
	Output json.RawMessage
	Error  json.RawMessage
}

// ToolCallFinish records the result of a call that the execution fenced by f started. The run
// may have been cancelled since: a tool that started before the cancel still has its result
// recorded. An execution that lost the run to another, though, never writes the ledger: its
// result is kept in superseded_tool_calls, and ToolCallFinish returns ErrLeaseLost.
func (s *Store) ToolCallFinish(ctx context.Context, f Fence, p ToolCallFinishParams) error {
	err := s.sendFenced(ctx, f, false, func(b *pgx.Batch) {
		b.Queue(`UPDATE tool_calls SET status = $4, output = $5, error = $6, finished_at = now()
			WHERE run_id = $1 AND turn = $2 AND ref = $3`, p.RunID, p.Turn, p.Ref, p.Status, nullJSON(p.Output), nullJSON(p.Error))
	})
	if errors.Is(err, ErrLeaseLost) {
		if _, serr := s.db.Exec(ctx, `INSERT INTO superseded_tool_calls (run_id, turn, ref, tool, lease_epoch, status, output, error)
			SELECT $1, $2, $3, coalesce((SELECT tool FROM tool_calls WHERE run_id = $1 AND turn = $2 AND ref = $3), ''),
				$4, $5, $6, $7`, p.RunID, p.Turn, p.Ref, f.Epoch, p.Status, nullJSON(p.Output), nullJSON(p.Error)); serr != nil {
			return fmt.Errorf("record superseded result of tool call %s: %w", p.Ref, serr)
		}
	}
	if err != nil {
		return fmt.Errorf("record result of tool call %s: %w", p.Ref, err)
	}
	return nil
}

// ToolCallAnswer records a call that a reviewer answered instead of the tool running, while the
// execution fenced by f holds the run.
func (s *Store) ToolCallAnswer(ctx context.Context, f Fence, turn int, ref string, output json.RawMessage) error {
	err := s.sendFenced(ctx, f, true, func(b *pgx.Batch) {
		b.Queue(`UPDATE tool_calls SET status = 'completed', source = 'reviewer', output = $4,
			finished_at = now() WHERE run_id = $1 AND turn = $2 AND ref = $3`, f.RunID, turn, ref, output)
	})
	if err != nil {
		return fmt.Errorf("record answer of tool call %s: %w", ref, err)
	}
	return nil
}

// SupersededToolCall is a tool call's result that arrived after its execution had lost the run.
type SupersededToolCall struct {
	RunID      uuid.UUID       `db:"run_id" json:"-"`
	Turn       int             `db:"turn" json:"turn"`
	Ref        string          `db:"ref" json:"ref"`
	Tool       string          `db:"tool" json:"tool"`
	LeaseEpoch int64           `db:"lease_epoch" json:"lease_epoch"`
	Status     string          `db:"status" json:"status"`
	Output     json.RawMessage `db:"output" json:"output,omitempty"`
	Error      json.RawMessage `db:"error" json:"error,omitempty"`
	FinishedAt time.Time       `db:"finished_at" json:"finished_at"`
}

// ToolCallListSuperseded returns the results a run's lost executions produced, oldest first.
func (s *Store) ToolCallListSuperseded(ctx context.Context, runID uuid.UUID) ([]*SupersededToolCall, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, turn, ref, tool, lease_epoch, status, output, error, finished_at
		FROM superseded_tool_calls WHERE run_id = $1 ORDER BY finished_at`, runID)
	if err != nil {
		return nil, fmt.Errorf("list superseded tool calls of run %s: %w", runID, err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[SupersededToolCall])
	if err != nil {
		return nil, fmt.Errorf("list superseded tool calls of run %s: %w", runID, err)
	}
	return calls, nil
}

// ToolCallList returns a run's ledger in execution order.
func (s *Store) ToolCallList(ctx context.Context, runID uuid.UUID) ([]*ToolCall, error) {
	rows, err := s.db.Query(ctx, `SELECT `+toolCallColumns+` FROM tool_calls WHERE run_id = $1 ORDER BY turn, started_at, ref`, runID)
	if err != nil {
		return nil, fmt.Errorf("list tool calls of run %s: %w", runID, err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[ToolCall])
	if err != nil {
		return nil, fmt.Errorf("list tool calls of run %s: %w", runID, err)
	}
	return calls, nil
}

// ToolCallCount counts a run's ledger without reading it.
func (s *Store) ToolCallCount(ctx context.Context, runID uuid.UUID) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM tool_calls WHERE run_id = $1`, runID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count tool calls of run %s: %w", runID, err)
	}
	return n, nil
}

// ToolCallListPage returns limit entries of a run's ledger, in execution order, from position
// offset (counted from 0). A ledger is bounded by the run's turns, so the offset is cheap.
func (s *Store) ToolCallListPage(ctx context.Context, runID uuid.UUID, offset, limit int) ([]*ToolCall, error) {
	rows, err := s.db.Query(ctx, `SELECT `+toolCallColumns+` FROM tool_calls WHERE run_id = $1
		ORDER BY turn, started_at, ref OFFSET $2 LIMIT $3`, runID, max(offset, 0), max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("list a page of the tool calls of run %s: %w", runID, err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[ToolCall])
	if err != nil {
		return nil, fmt.Errorf("list a page of the tool calls of run %s: %w", runID, err)
	}
	return calls, nil
}

// ToolCallKey names a ledger entry: what a fork's edit of a tool output points at.
type ToolCallKey struct {
	Turn int    `db:"turn"`
	Ref  string `db:"ref"`
	Tool string `db:"tool"`
}

// ToolCallKeys returns the first limit keys of a run's ledger, in execution order, without the
// calls' inputs and outputs.
func (s *Store) ToolCallKeys(ctx context.Context, runID uuid.UUID, limit int) ([]ToolCallKey, error) {
	rows, err := s.db.Query(ctx, `SELECT turn, ref, tool FROM tool_calls WHERE run_id = $1
		ORDER BY turn, started_at, ref LIMIT $2`, runID, max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("list tool call keys of run %s: %w", runID, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByName[ToolCallKey])
	if err != nil {
		return nil, fmt.Errorf("list tool call keys of run %s: %w", runID, err)
	}
	return keys, nil
}
