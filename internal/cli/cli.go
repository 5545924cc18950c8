// Package cli is the devui command set — serve, worker, run, runs, interrupts, replay, migrate, db,
// user — for any program's actions: Loupe's own devui binary, with the demo agents, and a user's
// program through the public devui package. Its commands share one configuration, parsed once from
// flags and the environment.
package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/loupe-dev/loupe/internal/engine"
)

// Program is what a devui-style binary executes.
type Program struct {
	// Name is the command's name in help and messages; default the binary's.
	Name string
	// Version is printed by the version command and reported in spans.
	Version string
	// Registry holds the program's actions. The commands give it their tracer provider.
	Registry *engine.Registry
	// Demo, when set, registers the demo agents into Registry, unless --no-demo is given: devui's
	// own binary.
	Demo func(reg *engine.Registry, log *slog.Logger) error

	demoOnce sync.Once
	demoErr  error
}

func (p *Program) name() string {
	if p.Name != "" {
		return p.Name
	}
	return filepath.Base(os.Args[0])
}

// Main runs the program with the process's arguments until it is done or interrupted (SIGINT,
// SIGTERM), and exits with the command's exit code.
func Main(p *Program) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, p, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.name(), err)
		os.Exit(exitCode(err))
	}
}

// Run builds the command tree for p and executes it with args.
func Run(ctx context.Context, p *Program, args []string) error {
	if p.Version != "" {
		version = p.Version
	}
	if p.Registry == nil {
		p.Registry = engine.NewRegistry()
	}
	if len(args) == 0 && os.Getenv(startEnv) != "" {
		args = []string{"worker"} // devui start runs the program as its worker
	}
	cmd := newRootCommand(p)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}
