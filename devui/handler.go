package devui

import (
	"context"
	"net/http"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/cli"
)

// HandlerOptions configures a Handler.
type HandlerOptions struct {
	// DatabaseURL is the PostgreSQL to use; empty starts Loupe's embedded cluster in DataDir.
	DatabaseURL string
	// DataDir is the embedded cluster's home; default ".devui".
	DataDir string
	// Dev serves without sign-in, as `serve --dev` does. It then answers only requests addressed
	// to a loopback host name (localhost, 127.0.0.1, ::1): serve it on loopback only.
	Dev bool
	// Workers is how many runs the process executes at once; default 8, -1 for none (another
	// process then executes them: `worker`).
	Workers int
	// LogLevel (debug, info, warn, error) and LogFormat (text, json); default info and text.
	LogLevel, LogFormat string
}

// Handler is Loupe's UI and APIs as an http.Handler, with Start and Stop, for a program that
// serves them from its own HTTP server, as riverui's handler does. Start opens the database
// (applying pending migrations), starts the live hub, tracing and the run service that executes
// app's actions; Stop stops them.
//
// Its limits: it must be served at the root of its own host or port (its pages and assets use
// absolute paths, so it cannot sit under a path prefix such as /loupe); its WebSocket (/ws) and
// streaming routes must not be cut by the server's write timeout; and outside Dev mode users sign
// in as with `serve` (create them with the user command).
type Handler struct {
	h *cli.Handler
}

// NewHandler returns a Handler for app's actions. Nothing runs before Start.
func NewHandler(app *loupe.App, opts HandlerOptions) *Handler {
	return &Handler{h: cli.NewHandler(&cli.Program{Registry: bridge.AppRegistry(app)}, cli.HandlerConfig{
		DatabaseURL: opts.DatabaseURL, DataDir: opts.DataDir, Dev: opts.Dev, Workers: opts.Workers,
		LogLevel: opts.LogLevel, LogFormat: opts.LogFormat,
	})}
}

// Start starts Loupe. It fails when called twice or after Stop.
func (h *Handler) Start(ctx context.Context) error { return h.h.Start(ctx) }

// Stop stops Loupe: runs in progress keep their checkpoints and go on at the next start. It is
// safe to call twice and without Start.
func (h *Handler) Stop() { h.h.Stop() }

// ServeHTTP serves the UI and the APIs; before Start and after Stop it answers 503.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }
