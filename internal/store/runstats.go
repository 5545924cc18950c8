package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunMinute is how many runs started in one minute, and how many of them failed or aborted.
type RunMinute struct {
	Minute time.Time `db:"minute"`
	Total  int       `db:"total"`
	Errors int       `db:"errors"`
}

// RunStatsPerMinute counts the runs created since a time, per minute, oldest first; minutes
// without runs are absent.
func (s *Store) RunStatsPerMinute(ctx context.Context, since time.Time) ([]RunMinute, error) {
	rows, err := s.db.Query(ctx, `SELECT date_trunc('minute', created_at) AS minute, count(*)::int AS total,
			(count(*) FILTER (WHERE status IN ('failed', 'aborted')))::int AS errors
		FROM runs WHERE created_at >= $1 GROUP BY 1 ORDER BY 1`, since)
	if err != nil {
		return nil, fmt.Errorf("run stats: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunMinute])
	if err != nil {
		return nil, fmt.Errorf("run stats: %w", err)
	}
	return out, nil
}
