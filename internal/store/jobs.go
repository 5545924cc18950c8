package store

import (
	"context"
	"fmt"
	"time"
)

// JobCancelAbandoned finalizes, as cancelled, the River jobs of runs that their worker abandoned:
// jobs still `running` after olderThan whose worker (the last in attempted_by, which is the run
// service's lease owner) no longer executes the run, because another execution holds its lease,
// its lease lapsed, or the run settled. River's own rescuer never finalizes them, since run jobs
// have no timeout (JobTimeout -1) and the rescuer leaves alone a job without one. The runs
// themselves are taken over by the recovery sweep: this only makes the job table tell the truth.
// It returns how many jobs it finalized.
func (s *Store) JobCancelAbandoned(ctx context.Context, olderThan time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `UPDATE river_job j SET state = 'cancelled', finalized_at = now(),
			errors = array_append(coalesce(j.errors, '{}'), jsonb_build_object('at', now(), 'attempt', j.attempt,
				'error', 'abandoned: the worker that ran this job stopped, and the run was taken over or settled', 'trace', ''))
		FROM runs r
		WHERE j.kind = 'loupe.run' AND j.state = 'running' AND j.attempted_at < now() - $1::interval
			AND r.id::text = j.args->>'run_id'
			AND (r.status <> 'running' AND r.updated_at < now() - $1::interval
				OR r.status = 'running' AND (r.lease_expires_at IS NULL OR r.lease_expires_at < now() - $1::interval
					OR r.lease_owner IS DISTINCT FROM j.attempted_by[array_length(j.attempted_by, 1)]))`, olderThan)
	if err != nil {
		return 0, fmt.Errorf("cancel abandoned run jobs: %w", err)
	}
	return tag.RowsAffected(), nil
}
