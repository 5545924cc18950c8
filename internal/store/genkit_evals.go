package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// GenkitEvalBy is the created_by of the datasets, examples and experiments that Genkit's eval
// tools (genkit eval:run, eval:flow) made through the reflection API. An experiment of that id
// made otherwise is never written to by them.
const GenkitEvalBy = "genkit eval"

// GenkitEvalParams is one evaluator's scores of one Genkit evaluation run (an evalRunId): the
// experiment of that run gets the evaluator, the examples and their scores.
type GenkitEvalParams struct {
	// ExperimentID is derived from the evalRunId; Name is the evalRunId.
	ExperimentID uuid.UUID
	Name         string
	// Dataset names the dataset a new experiment's examples go to (made when missing); an
	// experiment that exists keeps its own.
	Dataset string
	// Action is the action the examples' outputs came from, as far as is known.
	Action    string
	Evaluator string
	Examples  []GenkitEvalExample
}

// GenkitEvalExample is one datapoint as an example of the dataset, its result and its score.
type GenkitEvalExample struct {
	// Key identifies the example across evaluation runs: derived from its content.
	Key       uuid.UUID
	Input     json.RawMessage
	Reference json.RawMessage
	// RunID is the Loupe run whose trace the datapoint named, when there is one; a run already in
	// another experiment's result is not linked again.
	RunID        *uuid.UUID
	RunStatus    string
	Output       json.RawMessage
	Error        string
	LatencyMs    *int64
	InputTokens  int64
	OutputTokens int64
	Score        Score
}

// ErrNotGenkitEval is returned when the experiment of an evalRunId exists and was not made by
// Genkit's eval tools.
var ErrNotGenkitEval = errors.New("the experiment was not made by a Genkit evaluation")

// GenkitEvalRecord stores one evaluator's scores of a Genkit evaluation run, in one transaction:
// the dataset (made when missing) gets the examples it lacks as a new version, the run's experiment
// (made when missing, finished at once) gets the evaluator, one scored result per example and
// the scores. A retried call changes nothing: examples, results and scores that exist are kept.
func (s *Store) GenkitEvalRecord(ctx context.Context, p GenkitEvalParams) (*Experiment, error) {
	err := s.WithTx(ctx, func(tx *Store) error {
		// The experiment is made first (at version 0, without evaluators) so that two calls of one
		// evaluation at once wait for each other on its row.
		var known bool
		if err := tx.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM experiments WHERE id = $1)`, p.ExperimentID).Scan(&known); err != nil {
			return fmt.Errorf("record genkit evaluation %s: %w", p.Name, err)
		}
		if !known {
			if _, err := tx.db.Exec(ctx, `INSERT INTO datasets (id, name, description, created_by) VALUES ($1, $2, $3, $4)
				ON CONFLICT (name) DO NOTHING`, NewID(), p.Dataset, "examples evaluated by genkit eval:run and eval:flow", GenkitEvalBy); err != nil {
				return fmt.Errorf("record genkit evaluation %s: dataset: %w", p.Name, err)
			}
			if _, err := tx.db.Exec(ctx, `INSERT INTO experiments (id, name, dataset_id, dataset_version, action, evaluators, tools,
					concurrency, status, total, created_by, finished_at)
				SELECT $1, $2, id, 0, $4, '{}', 'live', 1, 'finished', 0, $5, now() FROM datasets WHERE name = $3
				ON CONFLICT (id) DO NOTHING`, p.ExperimentID, p.Name, p.Dataset, p.Action, GenkitEvalBy); err != nil {
				return fmt.Errorf("record genkit evaluation %s: experiment: %w", p.Name, err)
			}
		}
		var (
			datasetID uuid.UUID
			by        *string
		)
		if err := tx.db.QueryRow(ctx, `SELECT dataset_id, created_by FROM experiments WHERE id = $1 FOR UPDATE`, p.ExperimentID).
			Scan(&datasetID, &by); err != nil {
			return fmt.Errorf("record genkit evaluation %s: experiment: %w", p.Name, notFound(err))
		}
		if by == nil || *by != GenkitEvalBy {
			return fmt.Errorf("record genkit evaluation %s: experiment %s: %w", p.Name, p.ExperimentID, ErrNotGenkitEval)
		}
		version, ids, err := tx.genkitEvalExamples(ctx, datasetID, p.Examples)
		if err != nil {
			return fmt.Errorf("record genkit evaluation %s: %w", p.Name, err)
		}
		b := &pgx.Batch{}
		// A later evaluator may bring examples the dataset lacked: the experiment then names the
		// version that has them all (examples are never removed from these datasets).
		b.Queue(`UPDATE experiments SET dataset_version = greatest(dataset_version, $2),
				evaluators = CASE WHEN $3 = ANY(evaluators) THEN evaluators ELSE array_append(evaluators, $3) END
			WHERE id = $1`, p.ExperimentID, version, p.Evaluator)
		for i, e := range p.Examples {
			b.Queue(`INSERT INTO experiment_results (experiment_id, example_id, example_key, ord, status, run_id, run_status,
					output, error, latency_ms, input_tokens, output_tokens, scored_at)
				VALUES ($1, $2, $3, (SELECT count(*) FROM experiment_results WHERE experiment_id = $1), 'scored',
					CASE WHEN $4::uuid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM experiment_results WHERE run_id = $4) THEN $4::uuid END,
					$5, $6, NULLIF($7, ''), $8, $9, $10, now())
				ON CONFLICT (experiment_id, example_id) DO NOTHING`,
				p.ExperimentID, ids[i], e.Key, e.RunID, e.RunStatus, nullJSON(e.Output), e.Error, e.LatencyMs, e.InputTokens, e.OutputTokens)
			b.Queue(`INSERT INTO experiment_scores (experiment_id, example_id, evaluator, score, pass, explanation, trace_id)
				VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (experiment_id, example_id, evaluator) DO NOTHING`,
				p.ExperimentID, ids[i], p.Evaluator, e.Score.Score, e.Score.Pass, e.Score.Explanation, e.Score.TraceID)
		}
		b.Queue(`UPDATE experiments SET total = (SELECT count(*) FROM experiment_results WHERE experiment_id = $1) WHERE id = $1`,
			p.ExperimentID)
		if err := tx.db.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("record genkit evaluation %s: %w", p.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.ExperimentGet(ctx, p.ExperimentID)
}

// genkitEvalExamples returns the dataset's version that has every example (by key), adding those
// it lacks as a new version, and each example's row id. Call it in a transaction.
func (s *Store) genkitEvalExamples(ctx context.Context, datasetID uuid.UUID, examples []GenkitEvalExample) (int, []uuid.UUID, error) {
	var version int
	if err := s.db.QueryRow(ctx, `SELECT version FROM datasets WHERE id = $1 FOR UPDATE`, datasetID).Scan(&version); err != nil {
		return 0, nil, fmt.Errorf("dataset %s: %w", datasetID, notFound(err))
	}
	keys := make([]uuid.UUID, len(examples))
	for i, e := range examples {
		keys[i] = e.Key
	}
	rows, err := s.db.Query(ctx, `SELECT key, id FROM dataset_examples WHERE dataset_id = $1 AND removed_in IS NULL AND key = ANY($2)`,
		datasetID, keys)
	if err != nil {
		return 0, nil, fmt.Errorf("examples of dataset %s: %w", datasetID, err)
	}
	current := map[uuid.UUID]uuid.UUID{}
	var key, id uuid.UUID
	if _, err := pgx.ForEachRow(rows, []any{&key, &id}, func() error {
		current[key] = id
		return nil
	}); err != nil {
		return 0, nil, fmt.Errorf("examples of dataset %s: %w", datasetID, err)
	}
	ids := make([]uuid.UUID, len(examples))
	var add [][]any
	for i, e := range examples {
		if id, ok := current[e.Key]; ok {
			ids[i] = id
			continue
		}
		ids[i] = NewID()
		current[e.Key] = ids[i]
		add = append(add, []any{ids[i], datasetID, e.Key, version + 1, e.Input, nullJSON(e.Reference), []string{"genkit"}, GenkitEvalBy})
	}
	if len(add) == 0 {
		return version, ids, nil
	}
	version++
	if _, err := s.db.CopyFrom(ctx, pgx.Identifier{"dataset_examples"},
		[]string{"id", "dataset_id", "key", "added_in", "input", "reference", "tags", "created_by"}, pgx.CopyFromRows(add)); err != nil {
		return 0, nil, fmt.Errorf("add examples to dataset %s: %w", datasetID, err)
	}
	if _, err := s.db.Exec(ctx, `UPDATE datasets SET version = $2, updated_at = now() WHERE id = $1`, datasetID, version); err != nil {
		return 0, nil, fmt.Errorf("dataset %s: %w", datasetID, err)
	}
	return version, ids, nil
}

// RunIDByTrace returns the run whose execution recorded the trace: its own trace (a run's trace id
// is its id's 16 bytes until an execution records another), or one that a program it ran in
// recorded (run_traces). ErrNotFound when no run has it.
func (s *Store) RunIDByTrace(ctx context.Context, traceID string) (uuid.UUID, error) {
	var asID *uuid.UUID
	if b, err := hex.DecodeString(traceID); err == nil && len(b) == 16 {
		id := uuid.UUID(b)
		asID = &id
	}
	var id uuid.UUID
	err := s.db.QueryRow(ctx, `SELECT id FROM (
			SELECT id, 0 AS o FROM runs WHERE trace_id = $1
			UNION ALL SELECT id, 1 FROM runs WHERE id = $2 AND trace_id IS NULL
			UNION ALL SELECT run_id, 2 FROM run_traces WHERE trace_id = $1) r
		ORDER BY o LIMIT 1`, traceID, asID).Scan(&id)
	if err != nil {
		return uuid.Nil, fmt.Errorf("run of trace %s: %w", traceID, notFound(err))
	}
	return id, nil
}
