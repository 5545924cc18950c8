package store

import (
	"context"
	"fmt"
)

// RunTraceAdd links the run of the fence to traceID, the trace of its current execution that
// another program recorded, unless the two are linked already; the execution is the run's resumes
// plus one. The run's trace_id becomes traceID when it has none: the run shows its trace while it
// runs, and keeps it when cancelled. A stale execution (another holds the run) links nothing.
func (s *Store) RunTraceAdd(ctx context.Context, f Fence, traceID string) error {
	_, err := s.db.Exec(ctx, `WITH run AS (
			UPDATE runs SET trace_id = coalesce(trace_id, $3) WHERE id = $1 AND lease_epoch = $2
			RETURNING id, resumes)
		INSERT INTO run_traces (run_id, trace_id, execution)
		SELECT id, $3, resumes + 1 FROM run
		ON CONFLICT (run_id, trace_id) DO NOTHING`, f.RunID, f.Epoch, traceID)
	if err != nil {
		return fmt.Errorf("link run %s to trace %s: %w", f.RunID, traceID, err)
	}
	return nil
}
