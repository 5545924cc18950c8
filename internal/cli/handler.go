package cli

import (
	"context"
	"errors"
	"net/http"
	"sync"
)

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// DatabaseURL is the PostgreSQL to use; empty starts the embedded cluster in DataDir.
	DatabaseURL string
	// DataDir is the embedded cluster's home; default ".devui".
	DataDir string
	// Dev serves without sign-in, to loopback Host names only, as serve --dev does.
	Dev bool
	// Workers is how many runs the process executes at once; default 8, -1 for none.
	Workers int
	// LogLevel and LogFormat are as LOG_LEVEL and LOG_FORMAT; default info and text.
	LogLevel, LogFormat string
}

// Handler is Loupe's UI and APIs as an http.Handler, for a program that serves them from its own
// HTTP server. Start opens the database and starts the run service; Stop stops them.
type Handler struct {
	p   *Program
	hc  HandlerConfig
	mu  sync.Mutex
	st  *stack
	end bool
}

// NewHandler returns a Handler for p's actions; nothing runs before Start.
func NewHandler(p *Program, hc HandlerConfig) *Handler {
	if hc.DataDir == "" {
		hc.DataDir = defaultDataDir
	}
	if hc.Workers == 0 {
		hc.Workers = 8
	}
	if hc.LogLevel == "" {
		hc.LogLevel = "info"
	}
	if hc.LogFormat == "" {
		hc.LogFormat = "text"
	}
	return &Handler{p: p, hc: hc}
}

// Start opens the database (applying pending migrations) and starts the live hub, tracing and
// the run service. It fails when called twice or after Stop.
func (h *Handler) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st != nil || h.end {
		return errors.New("loupe handler: already started or stopped")
	}
	cfg := &config{program: h.p, mayCreate: true, DatabaseURL: h.hc.DatabaseURL, DataDir: h.hc.DataDir,
		LogLevel: h.hc.LogLevel, LogFormat: h.hc.LogFormat}
	log, err := cfg.logger()
	if err != nil {
		return err
	}
	workers := max(h.hc.Workers, 0)
	// The server never listens. Its address tells it where it is reached: on loopback in Dev mode,
	// from anywhere otherwise (so every Host name is answered, and trace reads need a token).
	addr := "0.0.0.0:0"
	if h.hc.Dev {
		addr = "127.0.0.1:0"
	}
	st, err := newStack(context.WithoutCancel(ctx), cfg, serveOptions{addr: addr, dev: h.hc.Dev, migrate: true, bodyLimit: 16 << 20,
		engine: engineOptions{workers: workers, leaseTTL: defaultLeaseTTL()}}, log)
	if err != nil {
		return err
	}
	h.st = st
	return nil
}

// ServeHTTP serves the UI and the APIs; before Start and after Stop it answers 503.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	st := h.st
	h.mu.Unlock()
	if st == nil {
		http.Error(w, "Loupe is not started", http.StatusServiceUnavailable)
		return
	}
	st.srv.Handler().ServeHTTP(w, r)
}

// Stop stops the run service (runs in progress keep their checkpoints), tracing, the hub and the
// database. It is safe to call twice and without Start.
func (h *Handler) Stop() {
	h.mu.Lock()
	st := h.st
	h.st, h.end = nil, true
	h.mu.Unlock()
	if st != nil {
		st.Stop()
	}
}
