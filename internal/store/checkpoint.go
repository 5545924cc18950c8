package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// CheckpointParams is what a run's executor persists at once: the history messages and chunks
// produced since the last checkpoint, the model response of the turn about to run its tools, and
// the run's progress. Any part may be empty.
type CheckpointParams struct {
	RunID uuid.UUID
	// Fence is the writing execution's: the checkpoint is written only while it holds the run
	// (ErrLeaseLost otherwise, and nothing is written).
	Fence     Fence
	Messages  []RunMessage
	Chunks    []RunChunk
	ModelCall *ModelCall
	Progress  *RunProgressParams
	// Intents are the tool calls the model call asks for, recorded before any of them runs. An
	// intent whose (turn, ref) is already in the ledger is left as it is.
	Intents []ToolCallStartParams
	// Steps are ops of the flow's journal (a step, or a generate call's final response); a seq
	// already journaled is kept.
	Steps []RunStep
	// Finish, when set, ends the execution in the same round trip (see RunFinish).
	Finish *RunFinishParams
}

// CheckpointResult is what a checkpoint reports back.
type CheckpointResult struct {
	// Finished is the finished run, when the checkpoint had Finish.
	Finished *Run
	// Fresh holds the refs of the intents that were newly recorded: their calls are first
	// attempts, free to run. Others were recorded by an earlier execution.
	Fresh map[string]bool
}

// Checkpoint writes a checkpoint in one round trip, in one implicit transaction (or in the
// caller's transaction): all of it or none. Messages replace those at the same positions. With
// Finish it returns the finished run. A checkpoint whose fence no longer holds the run is
// ErrLeaseLost and writes nothing.
func (s *Store) Checkpoint(ctx context.Context, p CheckpointParams) (*CheckpointResult, error) {
	res := &CheckpointResult{}
	if len(p.Messages) == 0 && len(p.Chunks) == 0 && p.ModelCall == nil && p.Progress == nil &&
		len(p.Intents) == 0 && len(p.Steps) == 0 && p.Finish == nil {
		return res, nil
	}
	b := &pgx.Batch{}
	p.Fence.queue(b, true)
	if n := len(p.Messages); n > 0 {
		seqs, turns, roles, contents, gens := make([]int, n), make([]int, n), make([]string, n), make([]json.RawMessage, n), make([]int, n)
		for i, m := range p.Messages {
			seqs[i], turns[i], roles[i], contents[i], gens[i] = m.Seq, m.Turn, m.Role, CleanJSON(m.Content), m.Generation
		}
		b.Queue(`INSERT INTO run_messages (run_id, seq, turn, role, content, generation)
			SELECT $1, * FROM unnest($2::int[], $3::int[], $4::text[], $5::json[], $6::int[])
			ON CONFLICT (run_id, seq) DO UPDATE SET turn = excluded.turn, role = excluded.role, content = excluded.content,
				generation = excluded.generation`,
			p.RunID, seqs, turns, roles, contents, gens)
	}
	if n := len(p.Chunks); n > 0 {
		seqs, turns, idxs, roles, contents := make([]int64, n), make([]int, n), make([]int, n), make([]string, n), make([]json.RawMessage, n)
		for i, c := range p.Chunks {
			seqs[i], turns[i], idxs[i], roles[i], contents[i] = c.Seq, c.Turn, c.Index, c.Role, CleanJSON(c.Content)
		}
		b.Queue(`INSERT INTO run_chunks (run_id, seq, turn, idx, role, content)
			SELECT $1, * FROM unnest($2::bigint[], $3::int[], $4::int[], $5::text[], $6::json[])
			ON CONFLICT (run_id, seq) DO NOTHING`,
			p.RunID, seqs, turns, idxs, roles, contents)
	}
	if len(p.Steps) > 0 {
		queueSteps(b, p.RunID, p.Steps)
	}
	if c := p.ModelCall; c != nil {
		b.Queue(`INSERT INTO model_calls (run_id, turn, model, request, response, latency_ms)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, turn) DO UPDATE SET model = excluded.model,
			request = excluded.request, response = excluded.response, latency_ms = excluded.latency_ms, created_at = now()`,
			p.RunID, c.Turn, c.Model, CleanJSON(c.Request), CleanJSON(c.Response), c.LatencyMs)
	}
	if g := p.Progress; g != nil && p.Finish == nil {
		b.Queue(`UPDATE runs SET turns = greatest(turns, $2), model = coalesce(NULLIF($3, ''), model),
			`+usageFromLedger+`, trace_id = coalesce(trace_id, NULLIF($4, '')), updated_at = now()
			WHERE id = $1`, p.RunID, g.Turns, g.Model, g.TraceID)
	}
	if n := len(p.Intents); n > 0 {
		turns, refs, tools, inputs, keys := make([]int, n), make([]string, n), make([]string, n), make([]json.RawMessage, n), make([]string, n)
		for i, c := range p.Intents {
			turns[i], refs[i], tools[i], inputs[i], keys[i] = c.Turn, c.Ref, c.Tool, CleanJSON(c.Input), c.IdempotencyKey
		}
		b.Queue(`INSERT INTO tool_calls (run_id, turn, ref, tool, input, idempotency_key)
			SELECT $1, * FROM unnest($2::int[], $3::text[], $4::text[], $5::jsonb[], $6::text[])
			ON CONFLICT (run_id, turn, ref) DO NOTHING RETURNING ref`,
			p.RunID, turns, refs, tools, inputs, keys).Query(func(rows pgx.Rows) error {
			fresh, err := pgx.CollectRows(rows, pgx.RowTo[string])
			res.Fresh = make(map[string]bool, len(fresh))
			for _, ref := range fresh {
				res.Fresh[ref] = true
			}
			return err
		})
	}
	var finished *Run
	if f := p.Finish; f != nil {
		g := p.Progress
		if g == nil {
			g = &RunProgressParams{Turns: -1}
		}
		// The outcome and the last progress in one update, after the last model call's row.
		b.Queue(`UPDATE runs SET status = $3, output = $4, error = $5,
				finished_at = CASE WHEN $6 THEN now() END, lease_owner = NULL, lease_expires_at = NULL,
				turns = greatest(turns, $7), model = coalesce(NULLIF($8, ''), model), `+usageFromLedger+`,
				trace_id = coalesce(trace_id, NULLIF($9, '')),
				updated_at = now(), version = version + 1
			WHERE id = $1 AND lease_epoch = $2 AND status = 'running'
			RETURNING `+runColumns, f.ID, f.Epoch, f.Status, nullJSON(f.Output), nullJSON(f.Error), f.Status != RunInterrupted,
			g.Turns, g.Model, g.TraceID).
			Query(func(rows pgx.Rows) error {
				var err error
				finished, err = pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Run])
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				return err
			})
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("checkpoint run %s: %w", p.RunID, fenceErr(err))
	}
	res.Finished = finished
	if p.Finish != nil && finished == nil {
		cur, err := s.RunGet(ctx, p.RunID)
		if err != nil {
			return nil, err
		}
		res.Finished = cur
		return res, finishRefused(cur, p.Finish.Epoch)
	}
	return res, nil
}

// usageFromLedger sets a run's token totals, and its tokens per model, to the sums of its model-call ledger ($1 is the run),
// which a takeover or a resume never counts twice and never misses.
const usageFromLedger = `input_tokens = (SELECT coalesce(sum((response->'usage'->>'inputTokens')::bigint), 0)
		FROM model_calls WHERE run_id = $1),
	output_tokens = (SELECT coalesce(sum((response->'usage'->>'outputTokens')::bigint), 0)
		FROM model_calls WHERE run_id = $1),
	usage = (SELECT jsonb_object_agg(model, jsonb_build_object('input', i, 'output', o)) FROM (SELECT model,
			coalesce(sum((response->'usage'->>'inputTokens')::bigint), 0) AS i,
			coalesce(sum((response->'usage'->>'outputTokens')::bigint), 0) AS o
		FROM model_calls WHERE run_id = $1 GROUP BY model) g)`

// ExecutionState is what an executor needs to continue a run: its history, the last chunk
// sequence number, and the recorded model responses by turn.
type ExecutionState struct {
	Messages   []*RunMessage
	ChunkSeq   int64
	ModelCalls []*ModelCall
	Steps      []*RunStep
}

// RunExecutionState loads a run's execution state in one round trip.
func (s *Store) RunExecutionState(ctx context.Context, runID uuid.UUID) (*ExecutionState, error) {
	b := &pgx.Batch{}
	st := &ExecutionState{}
	b.Queue(`SELECT `+messageColumns+` FROM run_messages WHERE run_id = $1 ORDER BY seq`, runID).
		Query(func(rows pgx.Rows) error {
			var err error
			st.Messages, err = pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[RunMessage])
			return err
		})
	b.Queue(`SELECT coalesce(max(seq), 0) FROM run_chunks WHERE run_id = $1`, runID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.ChunkSeq)
	})
	b.Queue(`SELECT `+modelCallColumns+` FROM model_calls WHERE run_id = $1 ORDER BY turn`, runID).Query(func(rows pgx.Rows) error {
		var err error
		st.ModelCalls, err = pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[ModelCall])
		return err
	})
	b.Queue(`SELECT `+stepColumns+` FROM run_steps WHERE run_id = $1 ORDER BY seq`, runID).Query(func(rows pgx.Rows) error {
		var err error
		st.Steps, err = pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[RunStep])
		return err
	})
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("load execution state of run %s: %w", runID, err)
	}
	return st, nil
}
