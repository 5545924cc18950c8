// Package devui gives your program Loupe's whole command set for your own agents: the trace
// explorer and the reviewers' inbox (serve), durable runs executed by your process (worker, and
// serve too), and run, runs, interrupts, replay, migrate, db and user, on PostgreSQL, with Loupe's
// private embedded cluster when DATABASE_URL is not set.
//
//	func main() {
//		app := loupe.New()
//		// … loupe.DefineFlow(app, …), loupe.DefineTool(app, …) …
//		devui.Main(app)
//	}
//
// Then `go run . serve --dev` opens the UI at http://127.0.0.1:4000 with your flows in it, and
// `go run . run myFlow --input '{…}' --wait` runs one from the shell. Your process is the worker:
// runs of your actions are executed by it, checkpointed at every turn, and taken over from their
// checkpoints after a crash or a restart.
package devui

import (
	"context"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/cli"
)

// Option configures the commands.
type Option func(*settings)

type settings struct{ name, version string }

// WithName names the command in help and messages (default: the binary's name).
func WithName(name string) Option { return func(s *settings) { s.name = name } }

// WithVersion sets the version the version command prints and spans report.
func WithVersion(v string) Option { return func(s *settings) { s.version = v } }

// Main runs the command the process's arguments name, for app's actions, and exits with its exit
// code (0 on success). SIGINT and SIGTERM stop it gracefully: runs in progress keep their
// checkpoints and go on at the next start.
func Main(app *loupe.App, opts ...Option) {
	cli.Main(program(app, opts))
}

// Run runs the command args name, for app's actions, until it is done or ctx ends. Main is Run
// with the process's arguments and signals.
func Run(ctx context.Context, app *loupe.App, args []string, opts ...Option) error {
	return cli.Run(ctx, program(app, opts), args)
}

func program(app *loupe.App, opts []Option) *cli.Program {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	return &cli.Program{Registry: bridge.AppRegistry(app), Name: s.name, Version: s.version}
}
