package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// engineOptions configure the registry and the run service.
type engineOptions struct {
	noDemo   bool
	workers  int
	leaseTTL time.Duration
}

func (o *engineOptions) bind(fs *pflag.FlagSet, defaultWorkers int) {
	fs.BoolVar(&o.noDemo, "no-demo", false, "do not register the demo agents")
	fs.IntVar(&o.workers, "workers", defaultWorkers, "runs this process executes at once (0: none, only start, resolve and cancel)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", defaultLeaseTTL(), "how long a run stays with a worker that stopped answering before another takes it over (env LOUPE_LEASE_TTL)")
}

// newRegistry is the program's registry, reporting its spans to tp, with the demo agents when
// the program has them and --no-demo was not given. The demo agents are registered once per
// process.
func newRegistry(p *Program, o engineOptions, tp oteltrace.TracerProvider, log *slog.Logger) (*engine.Registry, error) {
	if tp != nil {
		p.Registry.SetTracerProvider(tp)
	}
	if p.Demo == nil || o.noDemo {
		return p.Registry, nil
	}
	p.demoOnce.Do(func() { p.demoErr = p.Demo(p.Registry, log) })
	if p.demoErr != nil {
		return nil, fmt.Errorf("register demo agents: %w", p.demoErr)
	}
	return p.Registry, nil
}

// newRuns builds the run service of program p: its workers announce p's actions in the catalogue
// under p's name and work p's queue.
func newRuns(p *Program, o engineOptions, st *store.Store, reg *engine.Registry, log *slog.Logger) (*runs.Service, error) {
	// LOUPE_FAULTS is the crash harness's (make chaos): the process kills itself at fault points.
	faults, err := runs.ParseFaults(os.Getenv("LOUPE_FAULTS"))
	if err != nil {
		return nil, fmt.Errorf("LOUPE_FAULTS: %w", err)
	}
	if len(faults) > 0 {
		log.Warn("fault injection is on: this process kills itself at fault points (LOUPE_FAULTS)", "faults", faults)
	}
	ttl := o.leaseTTL
	if ttl <= 0 {
		ttl = 15 * time.Second
	}
	return runs.New(runs.Config{Program: p.name(), Workers: o.workers, LeaseTTL: ttl, Faults: faults, Logger: log}, st, reg)
}

// newExecutor builds what a process that executes runs needs without serving HTTP (devui worker,
// devui run --wait): a TracerProvider exporting to PostgreSQL, the registry on it, and the run
// service. stop flushes the spans after the runs stop.
func newExecutor(ctx context.Context, p *Program, o engineOptions, st *store.Store, log *slog.Logger) (*runs.Service, func(), error) {
	// A hub without WebSocket clients still sends its events to the other instances, so pages
	// served by devui serve update live for runs executed here.
	hub, err := live.New(live.Config{Pool: st.Pool(), Logger: log})
	if err != nil {
		return nil, nil, err
	}
	if err := hub.Start(ctx); err != nil {
		return nil, nil, err
	}
	provider, err := trace.NewProvider(ctx, trace.ProviderConfig{ServiceName: "loupe", ServiceVersion: version,
		Processor: trace.ProcessorConfig{Store: st, Metrics: trace.NewMetrics(), Logger: log, Publisher: hub.Spans()}, Logger: log})
	if err != nil {
		hub.Stop()
		return nil, nil, err
	}
	if err := provider.Start(ctx); err != nil {
		hub.Stop()
		return nil, nil, err
	}
	fail := func(err error) (*runs.Service, func(), error) {
		provider.Stop()
		hub.Stop()
		return nil, nil, err
	}
	reg, err := newRegistry(p, o, provider.TracerProvider(), log)
	if err != nil {
		return fail(err)
	}
	svc, err := newRuns(p, o, st, reg, log)
	if err != nil {
		return fail(err)
	}
	svc.SetPublisher(hub)
	if err := svc.Start(ctx); err != nil {
		return fail(err)
	}
	return svc, func() { svc.Stop(); provider.Stop(); hub.Stop() }, nil
}

// withExecutor opens the database (migrating it) and runs fn with an executing run service, for
// the commands that start runs and may follow them (devui run, devui replay). With no workers it
// only starts runs, for devui serve or devui worker to execute.
func withExecutor(cmd *cobra.Command, cfg *config, o engineOptions, fn func(*runs.Service, *store.Store) error) error {
	ctx := cmd.Context()
	return withDatabase(ctx, cfg, true, func(db *database, log *slog.Logger) error {
		st := store.New(db.pool)
		svc, stop, err := newExecutor(ctx, cfg.program, o, st, log)
		if err != nil {
			return err
		}
		defer stop()
		return fn(svc, st)
	})
}

// defaultLeaseTTL is LOUPE_LEASE_TTL, or 15 seconds.
func defaultLeaseTTL() time.Duration {
	ttl, err := time.ParseDuration(envOr("LOUPE_LEASE_TTL", "15s"))
	if err != nil || ttl <= 0 {
		return 15 * time.Second
	}
	return ttl
}
