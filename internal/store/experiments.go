package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Experiment statuses, and the statuses of one example's result.
const (
	ExperimentRunning   = "running"
	ExperimentFinished  = "finished"
	ExperimentCancelled = "cancelled"

	ResultPending = "pending"
	ResultRunning = "running"
	ResultScored  = "scored"

	// LabelExperiment labels the runs of an experiment (a run label: an attribute of its root span).
	LabelExperiment = "loupe.experiment"
)

// Experiment is one run of an action over one version of a dataset, scored by evaluators.
type Experiment struct {
	ID             uuid.UUID       `db:"id" json:"id"`
	Name           string          `db:"name" json:"name"`
	DatasetID      uuid.UUID       `db:"dataset_id" json:"dataset_id"`
	DatasetVersion int             `db:"dataset_version" json:"dataset_version"`
	Action         string          `db:"action" json:"action"`
	Evaluators     []string        `db:"evaluators" json:"evaluators"`
	Tools          string          `db:"tools" json:"tools"`
	Overrides      json.RawMessage `db:"overrides" json:"overrides,omitempty"`
	Concurrency    int             `db:"concurrency" json:"concurrency"`
	BaselineID     *uuid.UUID      `db:"baseline_id" json:"baseline_id,omitempty"`
	Status         string          `db:"status" json:"status"`
	Total          int             `db:"total" json:"total"`
	CreatedBy      *string         `db:"created_by" json:"created_by,omitempty"`
	CreatedAt      time.Time       `db:"created_at" json:"created_at"`
	FinishedAt     *time.Time      `db:"finished_at" json:"finished_at,omitempty"`
	// Started and Scored count the examples whose run was started, and those scored; Passed those
	// every evaluator scored and passed.
	Started int `db:"started" json:"started"`
	Scored  int `db:"scored" json:"scored"`
	Passed  int `db:"passed" json:"passed"`
}

const experimentColumns = `id, name, dataset_id, dataset_version, action, evaluators, tools, overrides, concurrency,
	baseline_id, status, total, created_by, created_at, finished_at,
	(SELECT count(*) FROM experiment_results r WHERE r.experiment_id = experiments.id AND r.status <> 'pending')::int AS started,
	(SELECT count(*) FROM experiment_results r WHERE r.experiment_id = experiments.id AND r.status = 'scored')::int AS scored,
	(SELECT count(*) FROM experiment_results r WHERE r.experiment_id = experiments.id AND r.status = 'scored'
		AND (SELECT count(*) FILTER (WHERE sc.pass) FROM experiment_scores sc
			WHERE sc.experiment_id = r.experiment_id AND sc.example_id = r.example_id) >= cardinality(experiments.evaluators))::int AS passed`

// ExperimentCreateParams is a new experiment over the given examples (of DatasetVersion).
type ExperimentCreateParams struct {
	Name           string
	DatasetID      uuid.UUID
	DatasetVersion int
	Action         string
	Evaluators     []string
	Tools          string
	Overrides      json.RawMessage
	Concurrency    int
	BaselineID     *uuid.UUID
	CreatedBy      string
	Examples       []*Example
}

// ExperimentCreate inserts the experiment and one pending result per example. Call it in a
// transaction.
func (s *Store) ExperimentCreate(ctx context.Context, p ExperimentCreateParams) (*Experiment, error) {
	id := NewID()
	if _, err := s.db.Exec(ctx, `INSERT INTO experiments (id, name, dataset_id, dataset_version, action, evaluators, tools,
			overrides, concurrency, baseline_id, total, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULLIF($12, ''))`,
		id, p.Name, p.DatasetID, p.DatasetVersion, p.Action, p.Evaluators, p.Tools, nullJSON(p.Overrides), p.Concurrency,
		p.BaselineID, len(p.Examples), p.CreatedBy); err != nil {
		return nil, fmt.Errorf("create experiment: %w", err)
	}
	rows := make([][]any, len(p.Examples))
	for i, e := range p.Examples {
		rows[i] = []any{id, e.ID, e.Key, i}
	}
	if _, err := s.db.CopyFrom(ctx, pgx.Identifier{"experiment_results"}, []string{"experiment_id", "example_id", "example_key", "ord"},
		pgx.CopyFromRows(rows)); err != nil {
		return nil, fmt.Errorf("create experiment: its examples: %w", err)
	}
	return s.ExperimentGet(ctx, id)
}

// ExperimentGet returns one experiment.
func (s *Store) ExperimentGet(ctx context.Context, id uuid.UUID) (*Experiment, error) {
	rows, err := s.db.Query(ctx, `SELECT `+experimentColumns+` FROM experiments WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get experiment %s: %w", id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Experiment])
	if err != nil {
		return nil, fmt.Errorf("get experiment %s: %w", id, notFound(err))
	}
	return e, nil
}

// ExperimentGetByName returns the newest experiment of that name.
func (s *Store) ExperimentGetByName(ctx context.Context, name string) (*Experiment, error) {
	rows, err := s.db.Query(ctx, `SELECT `+experimentColumns+` FROM experiments WHERE name = $1 ORDER BY created_at DESC, id DESC LIMIT 1`, name)
	if err != nil {
		return nil, fmt.Errorf("get experiment %q: %w", name, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Experiment])
	if err != nil {
		return nil, fmt.Errorf("get experiment %q: %w", name, notFound(err))
	}
	return e, nil
}

// ExperimentList returns the newest experiments, of one dataset when datasetID is set.
func (s *Store) ExperimentList(ctx context.Context, datasetID *uuid.UUID, limit int) ([]*Experiment, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	rows, err := s.db.Query(ctx, `SELECT `+experimentColumns+` FROM experiments
		WHERE $1::uuid IS NULL OR dataset_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, datasetID, limit)
	if err != nil {
		return nil, fmt.Errorf("list experiments: %w", err)
	}
	es, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Experiment])
	if err != nil {
		return nil, fmt.Errorf("list experiments: %w", err)
	}
	return es, nil
}

// ExperimentClaim takes the lease of an experiment that runs and that no live process drives: the
// one given (owner may claim it again), or with uuid.Nil any other (never one owner drives
// already), for ttl. It returns nil, nil when there is none.
func (s *Store) ExperimentClaim(ctx context.Context, id uuid.UUID, owner string, ttl time.Duration) (*Experiment, error) {
	var got uuid.UUID
	err := s.db.QueryRow(ctx, `UPDATE experiments SET lease_owner = $2, lease_expires_at = now() + $3::interval
		WHERE id = (SELECT id FROM experiments
			WHERE status = 'running' AND ($1::uuid = '00000000-0000-0000-0000-000000000000' OR id = $1)
				AND (lease_expires_at IS NULL OR lease_expires_at < now() OR (lease_owner = $2 AND id = $1))
			ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING id`, id, owner, ttl.String()).Scan(&got)
	if err == pgx.ErrNoRows {
		return nil, nil //nolint:nilnil // no experiment to drive is not an error
	}
	if err != nil {
		return nil, fmt.Errorf("claim experiment: %w", err)
	}
	return s.ExperimentGet(ctx, got)
}

// ExperimentRenew extends the lease owner holds; false when it lost it, or the experiment ended.
func (s *Store) ExperimentRenew(ctx context.Context, id uuid.UUID, owner string, ttl time.Duration) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE experiments SET lease_expires_at = now() + $3::interval
		WHERE id = $1 AND lease_owner = $2 AND status = 'running'`, id, owner, ttl.String())
	if err != nil {
		return false, fmt.Errorf("renew experiment %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ExperimentRelease gives the lease up.
func (s *Store) ExperimentRelease(ctx context.Context, id uuid.UUID, owner string) error {
	if _, err := s.db.Exec(ctx, `UPDATE experiments SET lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND lease_owner = $2`, id, owner); err != nil {
		return fmt.Errorf("release experiment %s: %w", id, err)
	}
	return nil
}

// ExperimentEnd marks an experiment finished or cancelled; a cancelled one's unstarted examples stay
// pending.
func (s *Store) ExperimentEnd(ctx context.Context, id uuid.UUID, status string) error {
	if _, err := s.db.Exec(ctx, `UPDATE experiments SET status = $2, finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND status = 'running'`, id, status); err != nil {
		return fmt.Errorf("end experiment %s: %w", id, err)
	}
	return nil
}

// ResultWork is an example whose run is to be started.
type ResultWork struct {
	ExampleID   uuid.UUID       `db:"example_id"`
	Input       json.RawMessage `db:"input"`
	SourceRunID *uuid.UUID      `db:"source_run_id"`
}

// ResultsToStart returns up to n of an experiment's pending examples, in order.
func (s *Store) ResultsToStart(ctx context.Context, experimentID uuid.UUID, n int) ([]*ResultWork, error) {
	rows, err := s.db.Query(ctx, `SELECT r.example_id, e.input, e.source_run_id
		FROM experiment_results r JOIN dataset_examples e ON e.id = r.example_id
		WHERE r.experiment_id = $1 AND r.status = 'pending' ORDER BY r.ord LIMIT $2`, experimentID, n)
	if err != nil {
		return nil, fmt.Errorf("examples to start of experiment %s: %w", experimentID, err)
	}
	ws, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[ResultWork])
	if err != nil {
		return nil, fmt.Errorf("examples to start of experiment %s: %w", experimentID, err)
	}
	return ws, nil
}

// ResultStart records the run of an example; call it in the transaction that creates the run
// (uuid.Nil: the example could not run, and is scored failed next). False when the example was
// started already (by another driver).
func (s *Store) ResultStart(ctx context.Context, experimentID, exampleID, runID uuid.UUID) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE experiment_results SET status = 'running', run_id = NULLIF($3, '00000000-0000-0000-0000-000000000000'::uuid)
		WHERE experiment_id = $1 AND example_id = $2 AND status = 'pending'`, experimentID, exampleID, runID)
	if err != nil {
		return false, fmt.Errorf("start example %s of experiment %s: %w", exampleID, experimentID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ResultsRunning counts an experiment's examples whose run was started and has not ended (an
// ended run waiting to be scored no longer counts: the next example may start meanwhile).
func (s *Store) ResultsRunning(ctx context.Context, experimentID uuid.UUID) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM experiment_results r JOIN runs ON runs.id = r.run_id
		WHERE r.experiment_id = $1 AND r.status = 'running' AND runs.status IN ('queued', 'running')`,
		experimentID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count running examples of experiment %s: %w", experimentID, err)
	}
	return n, nil
}

// ResultsEnded returns up to n of an experiment's running examples whose run has ended (finished,
// or waiting for a reviewer) or was deleted, with the example.
func (s *Store) ResultsEnded(ctx context.Context, experimentID uuid.UUID, n int) ([]*Example, []*uuid.UUID, error) {
	rows, err := s.db.Query(ctx, `SELECT e.id, e.dataset_id, e.key, e.added_in, e.removed_in, e.input, e.reference, e.tags,
			e.source_run_id, e.created_by, e.created_at, r.run_id
		FROM experiment_results r JOIN dataset_examples e ON e.id = r.example_id
		LEFT JOIN runs ON runs.id = r.run_id
		WHERE r.experiment_id = $1 AND r.status = 'running'
			AND (runs.id IS NULL OR runs.status IN ('succeeded', 'failed', 'aborted', 'cancelled', 'interrupted'))
		ORDER BY r.ord LIMIT $2`, experimentID, n)
	if err != nil {
		return nil, nil, fmt.Errorf("ended examples of experiment %s: %w", experimentID, err)
	}
	defer rows.Close()
	var (
		exs  []*Example
		runs []*uuid.UUID
	)
	for rows.Next() {
		var (
			e   Example
			run *uuid.UUID
		)
		if err := rows.Scan(&e.ID, &e.DatasetID, &e.Key, &e.AddedIn, &e.RemovedIn, &e.Input, &e.Reference, &e.Tags,
			&e.SourceRunID, &e.CreatedBy, &e.CreatedAt, &run); err != nil {
			return nil, nil, fmt.Errorf("ended examples of experiment %s: %w", experimentID, err)
		}
		exs, runs = append(exs, &e), append(runs, run)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("ended examples of experiment %s: %w", experimentID, err)
	}
	return exs, runs, nil
}

// Score is one evaluator's verdict on one example of an experiment.
type Score struct {
	Evaluator   string   `db:"evaluator" json:"evaluator"`
	Score       *float64 `db:"score" json:"score,omitempty"`
	Pass        bool     `db:"pass" json:"pass"`
	Explanation string   `db:"explanation" json:"explanation"`
	TraceID     *string  `db:"trace_id" json:"trace_id,omitempty"`
}

// ResultScoreParams is what an example's run ended as, and its scores.
type ResultScoreParams struct {
	ExperimentID uuid.UUID
	ExampleID    uuid.UUID
	RunStatus    string
	Output       json.RawMessage
	Error        string
	LatencyMs    *int64
	InputTokens  int64
	OutputTokens int64
	CostUSD      *float64
	Scores       []Score
}

// ResultScore stores an example's outcome and scores, once: false when it was scored already.
func (s *Store) ResultScore(ctx context.Context, p ResultScoreParams) (bool, error) {
	n := len(p.Scores)
	evaluators, explanations := make([]string, n), make([]string, n)
	scores, traceIDs := make([]*float64, n), make([]*string, n)
	passes := make([]bool, n)
	for i, sc := range p.Scores {
		evaluators[i], scores[i], passes[i], explanations[i], traceIDs[i] = sc.Evaluator, sc.Score, sc.Pass, sc.Explanation, sc.TraceID
	}
	// One statement, so one round trip and atomic: the result, and its scores only when the result
	// was the one to score (a data-modifying WITH runs whether or not it is read).
	var done bool
	err := s.db.QueryRow(ctx, `WITH up AS (
			UPDATE experiment_results SET status = 'scored', run_status = NULLIF($3, ''), output = $4,
				error = NULLIF($5, ''), latency_ms = $6, input_tokens = $7, output_tokens = $8, cost_usd = $9, scored_at = now()
			WHERE experiment_id = $1 AND example_id = $2 AND status = 'running'
			RETURNING experiment_id, example_id),
		ins AS (
			INSERT INTO experiment_scores (experiment_id, example_id, evaluator, score, pass, explanation, trace_id)
			SELECT up.experiment_id, up.example_id, sc.evaluator, sc.score, sc.pass, sc.explanation, sc.trace_id
			FROM up, unnest($10::text[], $11::float8[], $12::bool[], $13::text[], $14::text[])
				AS sc(evaluator, score, pass, explanation, trace_id)
			RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM up)`,
		p.ExperimentID, p.ExampleID, p.RunStatus, nullJSON(p.Output), p.Error, p.LatencyMs, p.InputTokens, p.OutputTokens, p.CostUSD,
		evaluators, scores, passes, explanations, traceIDs).Scan(&done)
	if err != nil {
		return false, fmt.Errorf("score example %s: %w", p.ExampleID, err)
	}
	return done, nil
}

// Result is one example of an experiment, with its scores.
type Result struct {
	ExampleID    uuid.UUID       `json:"example_id"`
	ExampleKey   uuid.UUID       `json:"example_key"`
	Ord          int             `json:"ord"`
	Status       string          `json:"status"`
	RunID        *uuid.UUID      `json:"run_id,omitempty"`
	RunStatus    *string         `json:"run_status,omitempty"`
	Input        json.RawMessage `json:"input"`
	Reference    json.RawMessage `json:"reference,omitempty"`
	SourceRunID  *uuid.UUID      `json:"source_run_id,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	Error        *string         `json:"error,omitempty"`
	LatencyMs    *int64          `json:"latency_ms,omitempty"`
	InputTokens  *int64          `json:"input_tokens,omitempty"`
	OutputTokens *int64          `json:"output_tokens,omitempty"`
	CostUSD      *float64        `json:"cost_usd,omitempty"`
	Scores       []Score         `json:"scores"`
}

// ResultList returns every example of an experiment in order, with its scores: two reads, the
// results and then all their scores, joined here.
func (s *Store) ResultList(ctx context.Context, experimentID uuid.UUID) ([]*Result, error) {
	rows, err := s.db.Query(ctx, `SELECT r.example_id, r.example_key, r.ord, r.status, r.run_id, r.run_status, e.input, e.reference,
			e.source_run_id, r.output, r.error, r.latency_ms, r.input_tokens, r.output_tokens, r.cost_usd
		FROM experiment_results r JOIN dataset_examples e ON e.id = r.example_id
		WHERE r.experiment_id = $1 ORDER BY r.ord`, experimentID)
	if err != nil {
		return nil, fmt.Errorf("results of experiment %s: %w", experimentID, err)
	}
	defer rows.Close()
	var out []*Result
	byExample := map[uuid.UUID]*Result{}
	for rows.Next() {
		r := &Result{Scores: []Score{}}
		if err := rows.Scan(&r.ExampleID, &r.ExampleKey, &r.Ord, &r.Status, &r.RunID, &r.RunStatus, &r.Input, &r.Reference,
			&r.SourceRunID, &r.Output, &r.Error, &r.LatencyMs, &r.InputTokens, &r.OutputTokens, &r.CostUSD); err != nil {
			return nil, fmt.Errorf("results of experiment %s: %w", experimentID, err)
		}
		out = append(out, r)
		byExample[r.ExampleID] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("results of experiment %s: %w", experimentID, err)
	}
	rows.Close()
	srows, err := s.db.Query(ctx, `SELECT example_id, evaluator, score, pass, explanation, trace_id FROM experiment_scores
		WHERE experiment_id = $1 ORDER BY example_id, evaluator`, experimentID)
	if err != nil {
		return nil, fmt.Errorf("scores of experiment %s: %w", experimentID, err)
	}
	defer srows.Close()
	for srows.Next() {
		var (
			example uuid.UUID
			sc      Score
		)
		if err := srows.Scan(&example, &sc.Evaluator, &sc.Score, &sc.Pass, &sc.Explanation, &sc.TraceID); err != nil {
			return nil, fmt.Errorf("scores of experiment %s: %w", experimentID, err)
		}
		if r := byExample[example]; r != nil {
			r.Scores = append(r.Scores, sc)
		}
	}
	if err := srows.Err(); err != nil {
		return nil, fmt.Errorf("scores of experiment %s: %w", experimentID, err)
	}
	return out, nil
}
