// Package services builds Loupe's services over one database and starts and stops them in one
// order, written here once: the live hub, tracing (Loupe's own TracerProvider, and for a serving
// process the trace service and retention), the run service on the program's registry, and the
// Genkit app manager when projects are watched. Stop stops them in reverse. devui serve, devui
// worker, devui run, the library's devui.Handler and the tests all wire through it; the HTTP
// server is built on top by its caller (server.Deps from the fields here), so that nothing here
// imports the server.
package services

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// Config says what to build.
type Config struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool
	// ReadPool, when set, is a read replica of Pool: the trace service's reads and the server's
	// trace pages and runs list go to it (Services.Reads). Nil reads from Pool.
	ReadPool *pgxpool.Pool
	// Registry holds the program's actions; its spans are reported to Loupe's TracerProvider.
	// Required.
	Registry *engine.Registry
	// Runs configures the run service (program name, workers, lease TTL, faults). Its Logger
	// defaults to Logger.
	Runs runs.Config
	// Ingest, when set, also builds the trace service (Genkit telemetry and OTLP ingest, the trace
	// reads) and retention: what a serving process needs. A worker only reports its own spans.
	Ingest *Ingest
	// Tracing tunes Loupe's own TracerProvider.
	Tracing Tracing
	// GenkitProjects are project roots watched for Genkit apps (see StartApps).
	GenkitProjects []string
	// LeaseTTL of the Genkit app manager's runs.
	AppLeaseTTL time.Duration
	// Experiments configures the experiment service (its LeaseTTL defaults to the runs'), and
	// DriveExperiments makes this process drive the experiments no live process drives (those
	// started from the UI or the API, or whose devui eval run died): what serve and worker do.
	Experiments      experiments.Config
	DriveExperiments bool
	Logger           *slog.Logger
}

// Ingest configures the trace service and retention of a serving process.
type Ingest struct {
	IngestToken  string
	MaxBodyBytes int64
	Retention    trace.RetentionConfig
}

// Tracing tunes Loupe's own TracerProvider.
type Tracing struct {
	ServiceVersion string
	// NoForward ignores OTEL_EXPORTER_OTLP_* (tests).
	NoForward bool
	// FlushInterval of the span processor; 0 is its default.
	FlushInterval time.Duration
}

// Services is the started graph. Its fields are for building the HTTP server on top.
type Services struct {
	Store *store.Store
	// Reads is the store on Config.ReadPool, or Store.
	Reads    *store.Store
	Hub      *live.Hub
	Provider *trace.Provider
	// Traces is nil unless Config.Ingest was set.
	Traces *trace.Service
	Runs   *runs.Service
	// Apps is nil unless Config.GenkitProjects were given; StartApps starts it.
	Apps *genkitapp.Manager
	// Experiments keeps datasets and runs experiments on the run service.
	Experiments *experiments.Service

	metrics *trace.Metrics
	stops   []func()
}

// Start builds the services and starts them in order: the hub first (tracing and the runs
// publish to it until they stop), then tracing, then the run service. On an error it stops what
// it started.
func Start(ctx context.Context, cfg Config) (_ *Services, err error) {
	if cfg.Pool == nil || cfg.Registry == nil {
		return nil, errors.New("services: Pool and Registry are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Services{Store: store.New(cfg.Pool), metrics: trace.NewMetrics()}
	s.Reads = s.Store
	if cfg.ReadPool != nil {
		s.Reads = store.New(cfg.ReadPool)
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	if s.Hub, err = live.New(live.Config{Pool: cfg.Pool, Logger: log}); err != nil {
		return nil, err
	}
	if err := s.Hub.Start(ctx); err != nil {
		return nil, err
	}
	s.stops = append(s.stops, s.Hub.Stop)

	if err := s.startTracing(ctx, cfg, log); err != nil {
		return nil, err
	}
	cfg.Registry.SetTracerProvider(s.Provider.TracerProvider())

	rc := cfg.Runs
	if rc.Logger == nil {
		rc.Logger = log
	}
	if s.Runs, err = runs.New(rc, s.Store, cfg.Registry); err != nil {
		return nil, err
	}
	s.Runs.SetPublisher(s.Hub)
	if len(cfg.GenkitProjects) > 0 {
		s.Apps = genkitapp.New(genkitapp.Config{Projects: cfg.GenkitProjects, Store: s.Store, LeaseTTL: cfg.AppLeaseTTL,
			Publisher: s.Hub, Logger: log})
	}
	if err := s.Runs.Start(ctx); err != nil {
		return nil, err
	}
	s.stops = append(s.stops, s.Runs.Stop)

	ec := cfg.Experiments
	if ec.LeaseTTL == 0 {
		ec.LeaseTTL = rc.LeaseTTL
	}
	if ec.Logger == nil {
		ec.Logger = log
	}
	s.Experiments = experiments.New(ec, s.Store, s.Runs)
	s.Experiments.SetPublisher(s.Hub)
	if cfg.DriveExperiments {
		// The drivers start runs: they stop before the run service does.
		dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Experiments.RunDrivers(dctx)
		}()
		s.stops = append(s.stops, func() { cancel(); <-done })
	}
	return s, nil
}

// startTracing starts Loupe's TracerProvider and, for a serving process, the trace service and
// retention. They stop after the runs, so that the runs' spans are flushed; the provider writes
// the spans still queued and the trace service the span starts it still holds.
func (s *Services) startTracing(ctx context.Context, cfg Config, log *slog.Logger) error {
	var err error
	if in := cfg.Ingest; in != nil {
		s.Traces, err = trace.NewService(trace.Config{Store: s.Store, Reads: s.Reads, Metrics: s.metrics, MaxBodyBytes: in.MaxBodyBytes,
			IngestToken: in.IngestToken, Logger: log, Publisher: s.Hub.Spans()})
		if err != nil {
			return err
		}
		s.stops = append(s.stops, s.Traces.Close)
	}
	s.Provider, err = trace.NewProvider(ctx, trace.ProviderConfig{ServiceName: "loupe", ServiceVersion: cfg.Tracing.ServiceVersion,
		NoForward: cfg.Tracing.NoForward, Logger: log,
		Processor: trace.ProcessorConfig{Store: s.Store, Metrics: s.metrics, Logger: log, Publisher: s.Hub.Spans(),
			FlushInterval: cfg.Tracing.FlushInterval}})
	if err != nil {
		return err
	}
	if err := s.Provider.Start(ctx); err != nil {
		return err
	}
	s.stops = append(s.stops, s.Provider.Stop)
	if in := cfg.Ingest; in != nil {
		ret := trace.NewRetention(s.Store, in.Retention, s.metrics, log)
		if err := ret.Start(ctx); err != nil {
			return err
		}
		s.stops = append(s.stops, ret.Stop)
	}
	return nil
}

// StartApps starts watching for Genkit apps, whose traces go to telemetryURL (the server's
// address, known once it listens). The manager stops first: its runs before everything else.
func (s *Services) StartApps(ctx context.Context, telemetryURL string) error {
	if s.Apps == nil {
		return nil
	}
	s.Apps.SetTelemetryURL(telemetryURL)
	if err := s.Apps.Start(ctx); err != nil {
		return err
	}
	s.stops = append(s.stops, s.Apps.Stop)
	return nil
}

// Stop stops what Start (and StartApps) started, the last first. It is safe to call twice.
func (s *Services) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}
