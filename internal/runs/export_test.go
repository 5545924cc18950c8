package runs

import (
	"context"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// WorkJob works a job of run id as River would, in the calling goroutine.
func WorkJob(ctx context.Context, s *Service, id uuid.UUID) error {
	return (&runWorker{svc: s}).Work(ctx, &river.Job[RunArgs]{JobRow: &rivertype.JobRow{}, Args: RunArgs{RunID: id}})
}
