package cli

import (
	"errors"
	"log/slog"

	"github.com/spf13/cobra"
)

func newWorkerCommand(cfg *config) *cobra.Command {
	var eng engineOptions
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Execute runs without serving HTTP, for scale-out beside devui serve on one PostgreSQL",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if eng.workers < 1 {
				return errors.New("--workers must be at least 1 for a worker")
			}
			tuneGC()
			ctx := cmd.Context()
			return withDatabase(ctx, cfg, true, func(db *database, log *slog.Logger) error {
				svcs, err := newExecutor(ctx, cfg.program, eng, db.pool, log, true)
				if err != nil {
					return err
				}
				defer svcs.Stop() // the executor stops its runs
				return db.wait(ctx)
			})
		},
	}
	eng.bind(cmd.Flags(), 8)
	return cmd
}
