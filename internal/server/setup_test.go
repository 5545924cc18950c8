package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/notify"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/services"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// bundle is a real server on a loopback port over a fresh database, with what the test asked
// for (opts); the fields it did not ask for are nil.
type bundle struct {
	srv    *Server
	url    string
	store  *store.Store
	dbURL  string
	runs   *runs.Service
	hub    *live.Hub
	prov   *trace.Provider
	traces *trace.Service
	log    *syncBuffer // the server's log, when opts.log was given
	// runsLog is the run service's log, when opts.runsLog was given.
	runsLog *syncBuffer
}

// opts says what a test's server has besides the store.
type opts struct {
	dev bool
	// stack wires the services as devui serve does (internal/services): the live hub, Loupe's span
	// pipeline, and the demo agents (and define's actions) on workers run workers (default 4).
	// noRuns leaves the run service out of the server, so that no worker touches the runs a test
	// writes to the store.
	stack   bool
	noRuns  bool
	workers int
	// runs, without stack, is the demo agents' run service alone, executing in-process (2 workers,
	// a 1 s lease), without tracing or a hub.
	runs   bool
	define []func(*engine.Registry)
	// ingest adds trace ingest and reads (Genkit's telemetry API, OTLP), with maxBody and token.
	ingest  bool
	maxBody int64
	token   string
	// addr is where the server listens (default 127.0.0.1:0); baseHost, where clients connect when
	// addr is not loopback.
	addr, baseHost string
	// log receives the server's log; runsLog, the run service's (River's with it).
	log, runsLog *syncBuffer
	// dbURL is the database to serve over, instead of a fresh one.
	dbURL string
	// bodyTimeout is the server's BodyReadTimeout (its default when 0).
	bodyTimeout time.Duration
	// webhooks are the run service's (with runs or stack).
	webhooks notify.Config
}

func setup(t testing.TB, o opts) *bundle {
	t.Helper()
	ctx := context.Background()
	if o.addr == "" {
		o.addr = "127.0.0.1:0"
	}
	dbURL := o.dbURL
	if dbURL == "" {
		dbURL = storetest.NewURL(t)
	}
	pcfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	store.SessionDefaults(pcfg.ConnConfig) // as devui's pool
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := &bundle{store: store.New(pool), dbURL: dbURL, log: o.log, runsLog: o.runsLog}
	deps := Deps{Store: b.store}
	var runsLog *slog.Logger
	if o.runsLog != nil {
		runsLog = slog.New(slog.NewTextHandler(o.runsLog, nil))
	}
	registry := func() *engine.Registry {
		reg := engine.NewRegistry()
		require.NoError(t, demo.Register(bridge.NewApp(reg).(*loupe.App), demo.Config{}))
		for _, d := range o.define {
			d(reg)
		}
		return reg
	}
	switch {
	case o.stack:
		workers := o.workers
		if workers == 0 {
			workers = 4
		}
		if o.noRuns {
			workers = 0
		}
		var in *services.Ingest
		if o.ingest {
			in = &services.Ingest{IngestToken: o.token, MaxBodyBytes: o.maxBody}
		}
		svcs, err := services.Start(ctx, services.Config{Pool: pool, Registry: registry(),
			Runs: runs.Config{Workers: workers, LeaseTTL: 5 * time.Second, Logger: runsLog, Webhooks: o.webhooks}, Ingest: in,
			Tracing: services.Tracing{NoForward: true, FlushInterval: 50 * time.Millisecond}, DriveExperiments: !o.noRuns})
		require.NoError(t, err)
		t.Cleanup(svcs.Stop)
		b.store, b.hub, b.traces = svcs.Store, svcs.Hub, svcs.Traces
		deps.Store, deps.Live, deps.Traces = svcs.Store, svcs.Hub, svcs.Traces
		if !o.noRuns {
			b.runs, b.prov, deps.Runs = svcs.Runs, svcs.Provider, svcs.Runs
			deps.Experiments = svcs.Experiments
		}
	case o.runs:
		svc, err := runs.New(runs.Config{Workers: 2, LeaseTTL: time.Second, Logger: runsLog, Webhooks: o.webhooks}, b.store, registry())
		require.NoError(t, err)
		require.NoError(t, svc.Start(ctx))
		t.Cleanup(svc.Stop)
		b.runs, deps.Runs = svc, svc
		deps.Experiments = experiments.New(experiments.Config{}, b.store, svc)
	}
	if o.ingest && b.traces == nil {
		svc, err := trace.NewService(trace.Config{Store: b.store, MaxBodyBytes: o.maxBody, IngestToken: o.token})
		require.NoError(t, err)
		t.Cleanup(svc.Close)
		b.traces, deps.Traces = svc, svc
	}
	cfg := Config{Addr: o.addr, Dev: o.dev, Version: "test", ShutdownTimeout: 5 * time.Second, BodyReadTimeout: o.bodyTimeout}
	if o.log != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(o.log, nil))
	}
	srv, err := New(cfg, deps)
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop) // before the services: cleanups run last first
	b.srv, b.url = srv, "http://"+srv.Addr()
	if o.baseHost != "" {
		_, port, _ := strings.Cut(srv.Addr()[strings.LastIndex(srv.Addr(), ":"):], ":")
		b.url = "http://" + o.baseHost + ":" + port
	}
	return b
}
