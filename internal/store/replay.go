package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Replay modes and tool modes, as the run_replays table checks them.
const (
	ReplayExact = "exact"
	ReplayRerun = "rerun"
	ReplayFork  = "fork"

	ReplayToolsLive     = "live"
	ReplayToolsCassette = "cassette"
	// ReplayToolsRecorded serves a re-execution's tool calls from its source run's recording,
	// matched by tool and input (a live model's refs differ), and fails a call it does not have:
	// what an experiment's runs do.
	ReplayToolsRecorded = "recorded"

	// ToolSourceCassette marks a ledger entry whose output a cassette-mode replay served from the
	// original run instead of running the tool.
	ToolSourceCassette = "cassette"
)

// Replay is how a derived run (exact replay, re-execution or fork) was asked for, and the first
// divergence an exact replay found.
type Replay struct {
	RunID            uuid.UUID       `db:"run_id" json:"run_id"`
	SourceRunID      *uuid.UUID      `db:"source_run_id" json:"source_run_id,omitempty"`
	Mode             string          `db:"mode" json:"mode"`
	Tools            string          `db:"tools" json:"tools"`
	ApplyResolutions bool            `db:"apply_resolutions" json:"apply_resolutions"`
	Overrides        json.RawMessage `db:"overrides" json:"overrides,omitempty"`
	Edits            json.RawMessage `db:"edits" json:"edits,omitempty"`
	Divergence       json.RawMessage `db:"divergence" json:"divergence,omitempty"`
	CreatedAt        time.Time       `db:"created_at" json:"created_at"`
}

const replayColumns = `run_id, source_run_id, mode, tools, apply_resolutions, overrides, edits, divergence, created_at`

// ReplayCreate records how a derived run was asked for. Call it in the transaction that creates
// the run.
func (s *Store) ReplayCreate(ctx context.Context, r Replay) error {
	tools := r.Tools
	if tools == "" {
		tools = ReplayToolsLive
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO run_replays (run_id, source_run_id, mode, tools, apply_resolutions, overrides, edits)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		r.RunID, r.SourceRunID, r.Mode, tools, r.ApplyResolutions, nullJSON(r.Overrides), nullJSON(r.Edits)); err != nil {
		return fmt.Errorf("record replay settings of run %s: %w", r.RunID, err)
	}
	return nil
}

// ReplayGet returns a derived run's replay settings; a run that is no replay is ErrNotFound.
func (s *Store) ReplayGet(ctx context.Context, runID uuid.UUID) (*Replay, error) {
	rows, err := s.db.Query(ctx, `SELECT `+replayColumns+` FROM run_replays WHERE run_id = $1`, runID)
	if err != nil {
		return nil, fmt.Errorf("get replay settings of run %s: %w", runID, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Replay])
	if err != nil {
		return nil, fmt.Errorf("get replay settings of run %s: %w", runID, notFound(err))
	}
	return r, nil
}

// ReplayDiverge records a replay's divergence, while the execution fenced by f holds it, unless
// one is recorded already: only the first counts. It reports whether this one was recorded.
func (s *Store) ReplayDiverge(ctx context.Context, f Fence, divergence json.RawMessage) (bool, error) {
	var first bool
	err := s.sendFenced(ctx, f, true, func(b *pgx.Batch) {
		b.Queue(`UPDATE run_replays SET divergence = $2 WHERE run_id = $1 AND divergence IS NULL`, f.RunID, divergence).
			Exec(func(tag pgconn.CommandTag) error {
				first = tag.RowsAffected() == 1
				return nil
			})
	})
	if err != nil {
		return false, fmt.Errorf("record divergence of run %s: %w", f.RunID, err)
	}
	return first, nil
}

// RunCopyHistoryParams says which part of a run's record a fork starts from.
type RunCopyHistoryParams struct {
	From uuid.UUID
	To   uuid.UUID
	// BeforeSeq bounds the copied messages: those with a lower seq.
	BeforeSeq int
	// BeforeTurn bounds the copied model calls, tool calls and chunks: those of earlier turns.
	BeforeTurn int
	// BeforeStep bounds the copied journal (run_steps): the ops with a lower seq, those the flow
	// finished before the generate call the copy cuts.
	BeforeStep int
}

// RunCopyHistory copies the history of a run up to a turn into another run, as stored (jsonb to
// jsonb, so the copy reads back byte for byte the same): messages, model calls, tool calls and
// chunks, and the turns, model and token usage they account for. Call it in the transaction that
// creates the fork.
func (s *Store) RunCopyHistory(ctx context.Context, p RunCopyHistoryParams) error {
	turnArgs := []any{p.From, p.To, p.BeforeTurn}
	steps := []struct {
		what, sql string
		args      []any
	}{
		{"messages", `INSERT INTO run_messages (run_id, seq, turn, role, content, generation)
			SELECT $2, seq, turn, role, content, generation FROM run_messages WHERE run_id = $1 AND seq < $3`,
			[]any{p.From, p.To, p.BeforeSeq}},
		{"model calls", `INSERT INTO model_calls (run_id, turn, model, request, response, latency_ms)
			SELECT $2, turn, model, request, response, latency_ms FROM model_calls WHERE run_id = $1 AND turn < $3`, turnArgs},
		{"tool calls", `INSERT INTO tool_calls (run_id, turn, ref, tool, input, status, source, output, error, attempt,
				idempotency_key, started_at, finished_at)
			SELECT $2, turn, ref, tool, input, status, source, output, error, attempt, idempotency_key, started_at,
				finished_at FROM tool_calls WHERE run_id = $1 AND turn < $3`, turnArgs},
		{"journal", `INSERT INTO run_steps (run_id, seq, kind, name, generation, output, error, created_at)
			SELECT $2, seq, kind, name, generation, output, error, created_at FROM run_steps WHERE run_id = $1 AND seq < $3`,
			[]any{p.From, p.To, p.BeforeStep}},
		{"chunks", `INSERT INTO run_chunks (run_id, seq, turn, idx, role, content)
			SELECT $2, seq, turn, idx, role, content FROM run_chunks WHERE run_id = $1 AND turn < $3`, turnArgs},
		{"usage", `UPDATE runs SET turns = $3, updated_at = now(),
				model = (SELECT model FROM model_calls WHERE run_id = $1 AND turn < $3 ORDER BY turn DESC LIMIT 1),
				input_tokens = (SELECT coalesce(sum((response->'usage'->>'inputTokens')::bigint), 0)
					FROM model_calls WHERE run_id = $1 AND turn < $3),
				output_tokens = (SELECT coalesce(sum((response->'usage'->>'outputTokens')::bigint), 0)
					FROM model_calls WHERE run_id = $1 AND turn < $3),
				usage = (SELECT jsonb_object_agg(model, jsonb_build_object('input', i, 'output', o)) FROM (SELECT model,
						coalesce(sum((response->'usage'->>'inputTokens')::bigint), 0) AS i,
						coalesce(sum((response->'usage'->>'outputTokens')::bigint), 0) AS o
					FROM model_calls WHERE run_id = $1 AND turn < $3 GROUP BY model) g)
			WHERE id = $2`, turnArgs},
	}
	for _, st := range steps {
		if _, err := s.db.Exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("copy %s of run %s into %s: %w", st.what, p.From, p.To, err)
		}
	}
	return nil
}

// ToolCallSetOutput replaces the recorded output of a completed call, for a fork that edits a tool
// output in its copied history.
func (s *Store) ToolCallSetOutput(ctx context.Context, runID uuid.UUID, turn int, ref string, output json.RawMessage) error {
	if _, err := s.db.Exec(ctx, `UPDATE tool_calls SET output = $4 WHERE run_id = $1 AND turn = $2 AND ref = $3`,
		runID, turn, ref, output); err != nil {
		return fmt.Errorf("edit output of tool call %s: %w", ref, err)
	}
	return nil
}

// ToolCallMarkCassette marks a started call as served from a recording, while the execution
// fenced by f holds the run.
func (s *Store) ToolCallMarkCassette(ctx context.Context, f Fence, turn int, ref string) error {
	err := s.sendFenced(ctx, f, true, func(b *pgx.Batch) {
		b.Queue(`UPDATE tool_calls SET source = 'cassette' WHERE run_id = $1 AND turn = $2 AND ref = $3`, f.RunID, turn, ref)
	})
	if err != nil {
		return fmt.Errorf("mark tool call %s as served from a recording: %w", ref, err)
	}
	return nil
}

// InterruptSuggest stores the decision offered as the default for an interrupt: the one a reviewer
// took on the same interrupt of the original run.
func (s *Store) InterruptSuggest(ctx context.Context, id uuid.UUID, suggestion json.RawMessage) error {
	if _, err := s.db.Exec(ctx, `UPDATE interrupts SET suggested_resolution = $2 WHERE id = $1`, id, suggestion); err != nil {
		return fmt.Errorf("suggest a resolution for interrupt %s: %w", id, err)
	}
	return nil
}

// InterruptSuggestion is the decision offered as the default for one interrupt of a replayed run.
type InterruptSuggestion struct {
	InterruptID uuid.UUID       `db:"id" json:"interrupt_id"`
	Turn        int             `db:"turn" json:"turn"`
	Ref         string          `db:"ref" json:"ref"`
	Tool        string          `db:"tool" json:"tool"`
	Status      string          `db:"status" json:"status"`
	Suggestion  json.RawMessage `db:"suggested_resolution" json:"suggested_resolution"`
}

// InterruptSuggestionList returns the suggested decisions of a run's interrupts.
func (s *Store) InterruptSuggestionList(ctx context.Context, runID uuid.UUID) ([]*InterruptSuggestion, error) {
	rows, err := s.db.Query(ctx, `SELECT id, turn, ref, tool, status, suggested_resolution FROM interrupts
		WHERE run_id = $1 AND suggested_resolution IS NOT NULL ORDER BY turn, round, created_at, ref`, runID)
	if err != nil {
		return nil, fmt.Errorf("list suggested resolutions of run %s: %w", runID, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[InterruptSuggestion])
	if err != nil {
		return nil, fmt.Errorf("list suggested resolutions of run %s: %w", runID, err)
	}
	return list, nil
}

// LineageLink is one run related to another by a replay or a fork.
type LineageLink struct {
	RunID uuid.UUID `db:"id" json:"run_id"`
	// Relation is replay (exact or rerun) or fork.
	Relation   string          `db:"relation" json:"relation"`
	Mode       *string         `db:"replay_mode" json:"mode,omitempty"`
	ForkTurn   *int            `db:"fork_turn" json:"fork_turn,omitempty"`
	Action     string          `db:"action" json:"action"`
	Status     string          `db:"status" json:"status"`
	CreatedAt  time.Time       `db:"created_at" json:"created_at"`
	Divergence json.RawMessage `db:"divergence" json:"divergence,omitempty"`
}

// Lineage is where a run comes from and what was derived from it.
type Lineage struct {
	// Of is the run this one replays or forks, nil for an original.
	Of *LineageLink `json:"of"`
	// Derived are the replays and forks of this run, oldest first.
	Derived []*LineageLink `json:"derived"`
}

// RunLineage returns the run a run replays or forks, and the replays and forks of it.
func (s *Store) RunLineage(ctx context.Context, id uuid.UUID) (*Lineage, error) {
	if _, err := s.RunGet(ctx, id); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT o.id, CASE WHEN r.fork_of IS NOT NULL THEN 'fork' ELSE 'replay' END AS relation,
			r.replay_mode, r.fork_turn, o.action, o.status, o.created_at, p.divergence
		FROM runs r JOIN runs o ON o.id = coalesce(r.fork_of, r.replay_of)
		LEFT JOIN run_replays p ON p.run_id = r.id
		WHERE r.id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("lineage of run %s: %w", id, err)
	}
	of, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[LineageLink])
	if err != nil {
		return nil, fmt.Errorf("lineage of run %s: %w", id, err)
	}
	l := &Lineage{Derived: []*LineageLink{}}
	if len(of) > 0 {
		l.Of = of[0]
	}
	rows, err = s.db.Query(ctx, `SELECT r.id, CASE WHEN r.fork_of = $1 THEN 'fork' ELSE 'replay' END AS relation,
			r.replay_mode, r.fork_turn, r.action, r.status, r.created_at, p.divergence
		FROM runs r LEFT JOIN run_replays p ON p.run_id = r.id
		WHERE r.replay_of = $1 OR r.fork_of = $1 ORDER BY r.created_at, r.id`, id)
	if err != nil {
		return nil, fmt.Errorf("lineage of run %s: %w", id, err)
	}
	derived, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[LineageLink])
	if err != nil {
		return nil, fmt.Errorf("lineage of run %s: %w", id, err)
	}
	if len(derived) > 0 {
		l.Derived = derived
	}
	return l, nil
}

// RunListReplayableParams selects the runs a bulk replay replays.
type RunListReplayableParams struct {
	Action string
	Since  time.Time
	Limit  int // default 100, at most 1000
}

// RunListReplayable returns the original runs (not replays or forks themselves) of an action that
// ended or wait for a reviewer, created since a time, oldest first.
func (s *Store) RunListReplayable(ctx context.Context, p RunListReplayableParams) ([]*Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+` FROM runs
		WHERE action = $1 AND created_at >= $2 AND replay_of IS NULL AND fork_of IS NULL
			AND status IN ('succeeded', 'failed', 'aborted', 'interrupted')
		ORDER BY created_at, id LIMIT $3`, p.Action, p.Since, limit)
	if err != nil {
		return nil, fmt.Errorf("list replayable runs of %s: %w", p.Action, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Run])
	if err != nil {
		return nil, fmt.Errorf("list replayable runs of %s: %w", p.Action, err)
	}
	return list, nil
}
