package cli

import (
	"context"
	"log/slog"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/internal/engine"
)

// demoProgram is devui's own program as the tests run it in-process: the demo agents on scripted
// models, a registry of its own for each call.
func demoProgram() *Program {
	return &Program{Name: "devui", Registry: engine.NewRegistry(), Demo: func(reg *engine.Registry, _ *slog.Logger) error {
		return demo.Register(bridge.NewApp(reg).(*loupe.App), demo.Config{})
	}}
}

// run runs devui's commands in-process with args.
func run(ctx context.Context, args []string) error { return Run(ctx, demoProgram(), args) }
