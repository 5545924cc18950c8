package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/store"
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
			ctx := cmd.Context()
			log, err := cfg.logger()
			if err != nil {
				return err
			}
			db, err := openDatabase(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer db.close()
			if err := db.migrate(ctx, log); err != nil {
				return err
			}
			_, stop, err := newExecutor(ctx, eng, store.New(db.pool), log)
			if err != nil {
				return err
			}
			<-ctx.Done()
			log.Info("worker shutting down")
			stop()
			return nil
		},
	}
	eng.bind(cmd.Flags(), 8)
	return cmd
}
