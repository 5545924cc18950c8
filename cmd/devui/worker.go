package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/runs"
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
			tuneGC()
			return withExecutor(cmd, cfg, eng, func(*runs.Service, *store.Store) error {
				<-cmd.Context().Done() // until SIGINT or SIGTERM; the executor then stops its runs
				return nil
			})
		},
	}
	eng.bind(cmd.Flags(), 8)
	return cmd
}
