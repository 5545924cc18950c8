// Package server is Loupe's HTTP face: HTML pages, the JSON API, compatibility APIs, health and
// metrics, on echo. It owns authentication, CSRF and CSP; everything else it asks of other packages.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/pricing"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// Config is the server's configuration.
type Config struct {
	// Addr is the listen address, such as 127.0.0.1:4000.
	Addr string
	// Dev skips sign-in. It is refused unless Addr is a loopback address.
	Dev bool
	// Version is shown in /healthz.
	Version string
	// BodyLimit caps request bodies, in bytes; 0 means DefaultBodyLimit. Trace ingest has its own
	// limit (trace.Config.MaxBodyBytes).
	BodyLimit int64
	// BodyReadTimeout bounds how long a client may take to send a request's body (408 beyond);
	// 0 means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// ShutdownTimeout bounds how long Stop waits for in-flight requests.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	// PolicyFile is the approval policy's file when the policy is loaded from one (serve
	// --policy-file): the UI and the API then show it and do not edit it.
	PolicyFile string
	// Prices prices runs by the models they call (serve --prices); nil means pricing.Builtin().
	Prices *pricing.Table
}

// Deps are the services the server fronts. Store is required; the others are optional, and their
// routes are registered only when they are present.
type Deps struct {
	Store *store.Store
	// Reads, when set, serves the trace explorer's reads and the runs list (a store on a read
	// replica, serve --read-database-url); everything else, and every write, goes to Store. Nil
	// reads from Store.
	Reads *store.Store
	// Traces serves Genkit's telemetry API, OTLP/HTTP ingest and the trace reads.
	Traces *trace.Service
	// Runs starts, resolves and cancels runs; with it come the runs, interrupts and actions APIs.
	Runs *runs.Service
	// Live is the live event hub behind /ws; the pages update live only when it is present.
	Live *live.Hub
	// Database, when set, reports outages it knows of (the embedded PostgreSQL restarting), for
	// /readyz and the 503s of requests that need the database.
	Database DatabaseMonitor
	// GenkitApps, when set, lists the Genkit apps this process attached to (devui start, or
	// serve --genkit-project); the Actions page shows each, live or gone, with its actions.
	GenkitApps GenkitApps
	// Experiments, when set (with Runs), keeps datasets and runs experiments: their API and pages.
	Experiments *experiments.Service
}

// GenkitApps lists Genkit apps and their state.
type GenkitApps interface {
	Apps() []genkitapp.AppStatus
}

// Server serves Loupe's HTTP interface. Start and Stop follow the house lifecycle contract.
type Server struct {
	rules   map[routeKey]route // the route table by method and path pattern (routes.go)
	cfg     Config
	deps    Deps
	store   *store.Store
	reads   *store.Store // Deps.Reads, or store
	auth    *auth.Service
	log     *slog.Logger
	echo    *echo.Echo
	metrics *metrics
	// outage and shortage are the database outages seen by requests: unreachable, and short of a
	// resource (unavailable.go).
	outage, shortage outage
	// active are the actions that Genkit's /api/runAction runs, for /api/cancelAction.
	active activeActions
	// closing is closed by Stop, to end long streams (stopStreams).
	closing chan struct{}
	// prices prices runs, sessions and the dashboard's rows (cost.go).
	prices    *pricing.Table
	closeOnce sync.Once
	// presence is who has which inbox item open (pages_inbox_presence.go).
	presence inboxPresence
	// skeletons keeps finished traces' span trees between requests (skeleton_cache.go).
	skeletons skeletonCache

	mu       sync.Mutex
	http     *http.Server
	listener net.Listener
	done     chan struct{}
}

// DefaultBodyLimit is the default cap on a request body: 16 MiB.
const DefaultBodyLimit = 16 << 20

// New builds the server and its routes. It does not listen until Start.
func New(cfg Config, deps Deps) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = DefaultBodyLimit
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Dev {
		if err := CheckLoopback(cfg.Addr); err != nil {
			return nil, err
		}
	}
	if deps.Store == nil {
		return nil, errors.New("server: a store is required")
	}
	if deps.Reads == nil {
		deps.Reads = deps.Store
	}
	s := &Server{cfg: cfg, deps: deps, store: deps.Store, reads: deps.Reads, auth: auth.New(deps.Store), log: cfg.Logger, echo: echo.New(),
		closing: make(chan struct{})}
	if cfg.Prices == nil {
		cfg.Prices = pricing.Builtin()
		s.cfg.Prices = cfg.Prices
	}
	s.prices = cfg.Prices
	s.metrics = newMetrics(deps.Store)
	s.routes()
	return s, nil
}

// CheckLoopback returns an error unless addr's host is a loopback address, because local mode,
// which skips sign-in, must never be reachable from another machine.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--dev skips sign-in, so it is only allowed on a loopback address (127.0.0.1, ::1 or localhost), not %q", addr)
	}
	return nil
}

// loopbackHostsOnly guards a server bound to loopback against DNS rebinding: a web page whose
// domain an attacker points at 127.0.0.1 reaches the server as same-origin, with the attacker's
// domain in Host. Such a server only answers requests addressed to localhost, 127.0.0.1, ::1 or
// the address it listens on, as the README says, and not to every address of 127.0.0.0/8.
func (s *Server) loopbackHostsOnly() echo.MiddlewareFunc {
	if CheckLoopback(s.cfg.Addr) != nil {
		return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	}
	allowed, names := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, "localhost, 127.0.0.1 or ::1"
	if h, _, err := net.SplitHostPort(s.cfg.Addr); err == nil {
		if ip := net.ParseIP(h); ip != nil && !slices.ContainsFunc(allowed, ip.Equal) {
			allowed, names = append(allowed, ip), "localhost, 127.0.0.1, ::1 or "+h
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			host := c.Request().Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			ip := net.ParseIP(strings.Trim(host, "[]"))
			if !strings.EqualFold(host, "localhost") && !slices.ContainsFunc(allowed, ip.Equal) {
				return Errorf(http.StatusMisdirectedRequest, "misdirected", "this server is bound to loopback and only answers requests addressed to %s, not %q", names, c.Request().Host)
			}
			return next(c)
		}
	}
}

func (s *Server) routes() {
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = echo.ExtractIPDirect()

	e.Pre(middleware.RequestID())
	e.Use(s.recoverPanics())
	// The metrics count the status the client got, which the error handler decides: they come
	// before the request log, which hands errors to it.
	e.Use(s.metrics.middleware())
	e.Use(s.logRequests())
	e.Use(s.loopbackHostsOnly())
	e.Use(s.readBodies())
	// Routes marked raw in the table write as they go or compress themselves (see route.raw).
	e.Use(middleware.GzipWithConfig(middleware.GzipConfig{Skipper: func(c echo.Context) bool { return s.ruleOf(c).raw }}))
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{
		Limit: strconv.FormatInt(s.cfg.BodyLimit, 10),
		// Ingest enforces its own limit, and answers OTLP clients in OTLP's error shape.
		Skipper: func(c echo.Context) bool {
			return c.Request().Method == http.MethodPost && s.ruleOf(c).access == accessTelemetry
		},
	}))
	e.Use(s.securityHeaders())
	e.Use(s.csrf())
	e.Use(s.authenticate())
	e.Use(refuseUnstorableText())

	if s.deps.Traces != nil {
		s.metrics.registry.MustRegister(s.deps.Traces.Collectors()...)
	}
	s.register(s.routeTable()) // routes.go
}

// Handler is the server's http.Handler, for tests that drive it without a listener.
func (s *Server) Handler() http.Handler { return s.echo }

// Start listens on the configured address and serves in the background.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return errors.New("server already started")
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	s.listener = l
	s.http = &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	s.log.Info("listening", "addr", "http://"+l.Addr().String(), "dev", s.cfg.Dev)
	return nil
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return s.cfg.Addr
	}
	return s.listener.Addr().String()
}

// Stop stops accepting connections and waits for in-flight requests, up to the shutdown timeout.
// It is safe to call twice and without Start.
func (s *Server) Stop() {
	s.stopStreams()
	s.mu.Lock()
	srv, done := s.http, s.done
	s.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		s.log.Warn("graceful shutdown timed out; closing connections", "err", err)
		_ = srv.Close()
	}
	<-done
}
