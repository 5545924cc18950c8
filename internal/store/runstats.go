package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loupe-dev/loupe/internal/pricing"
)

// RunBucket is how many runs were created in one time bucket, and how many of them failed or
// aborted.
type RunBucket struct {
	Start  time.Time `db:"start"`
	Total  int       `db:"total"`
	Errors int       `db:"errors"`
}

// RunStatsPerBucket counts the runs created since a time, in buckets of the given width that start
// at since, oldest first; buckets without runs are absent.
func (s *Store) RunStatsPerBucket(ctx context.Context, since time.Time, width time.Duration) ([]RunBucket, error) {
	rows, err := s.db.Query(ctx, `SELECT date_bin($2::interval, created_at, $1) AS start, count(*)::int AS total,
			(count(*) FILTER (WHERE status IN ('failed', 'aborted')))::int AS errors
		FROM runs WHERE created_at >= $1 GROUP BY 1 ORDER BY 1`, since, width)
	if err != nil {
		return nil, fmt.Errorf("run stats: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunBucket])
	if err != nil {
		return nil, fmt.Errorf("run stats: %w", err)
	}
	return out, nil
}

// RunPercentiles are one action and model's runs created in a range: how many, how many failed
// and aborted (maxTurns exceeded, counted apart from failures), and the duration and token
// percentiles of those that finished.
type RunPercentiles struct {
	Action  string `db:"action"`
	Model   string `db:"model"`
	Runs    int    `db:"runs"`
	Failed  int    `db:"failed"`
	Aborted int    `db:"aborted"`
	// Finished is how many of them finished: the percentiles are theirs (0 when none did).
	Finished int `db:"finished"`
	// RanMs are percentiles of the time the runs ran, their waits for reviewers left out.
	RanP50Ms float64 `db:"ran_p50_ms"`
	RanP95Ms float64 `db:"ran_p95_ms"`
	// Tokens are percentiles of input plus output tokens per run.
	TokensP50 float64 `db:"tokens_p50"`
	TokensP95 float64 `db:"tokens_p95"`
	TokensSum int64   `db:"tokens_sum"`
	// Usage is the runs' tokens per model called, summed: what their cost is priced from.
	Usage map[string]pricing.Tokens `db:"usage"`
}

// RunPercentilesSince returns, per action and model, the runs created since a time (every
// status: queued, running and waiting ones count too) and the p50 and p95 running time and
// tokens of those of them that finished, most runs first (at most limit rows).
func (s *Store) RunPercentilesSince(ctx context.Context, since time.Time, limit int) ([]RunPercentiles, error) {
	rows, err := s.db.Query(ctx, `WITH r AS MATERIALIZED (SELECT action, coalesce(model, '') AS model, status, input_tokens,
			output_tokens, usage, finished_at, started_at, created_at, waited_ms FROM runs WHERE created_at >= $1),
		u AS (SELECT action, model, jsonb_object_agg(key, jsonb_build_object('input', i, 'output', o)) AS usage
			FROM (SELECT r.action, r.model, e.key, sum((e.value->>'input')::bigint) AS i, sum((e.value->>'output')::bigint) AS o
				FROM r, jsonb_each(r.usage) e GROUP BY 1, 2, 3) g GROUP BY 1, 2)
		SELECT s.*, u.usage FROM (SELECT action, model, count(*)::int AS runs,
			(count(*) FILTER (WHERE status = 'failed'))::int AS failed,
			(count(*) FILTER (WHERE status = 'aborted'))::int AS aborted,
			count(tokens)::int AS finished,
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ran), 0) AS ran_p50_ms,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ran), 0) AS ran_p95_ms,
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY tokens), 0) AS tokens_p50,
			coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY tokens), 0) AS tokens_p95,
			coalesce(sum(input_tokens + output_tokens), 0)::bigint AS tokens_sum
		FROM (SELECT action, model, status, input_tokens, output_tokens,
				-- percentile_cont skips NULLs: the runs still going count, but not in the percentiles.
				CASE WHEN finished_at IS NOT NULL THEN input_tokens + output_tokens END AS tokens,
				greatest(extract(epoch FROM finished_at - coalesce(started_at, created_at)) * 1000 - waited_ms, 0) AS ran
			FROM r) r
		GROUP BY action, model) s LEFT JOIN u USING (action, model) ORDER BY runs DESC, action, model LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("run percentiles: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunPercentiles])
	if err != nil {
		return nil, fmt.Errorf("run percentiles: %w", err)
	}
	return out, nil
}
