// Package runs makes agent runs durable. A run is a row plus a River job inserted in one
// transaction; a worker executes it through the engine while a recorder persists every message,
// chunk, tool call and interrupt as it happens. An interrupted run waits for reviewers; resolving its
// last pending interrupt enqueues the resume in the same transaction. A worker that dies loses its
// lease, and the run is taken over from its last checkpoint without running completed tools again.
package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/notify"
	"github.com/loupe-dev/loupe/internal/store"
)

// Config configures the run service.
type Config struct {
	// Workers is how many runs this process executes at once; 0 makes an insert-only service that
	// starts, resolves and cancels runs but executes none (the API of a scale-out deployment whose
	// workers run in `devui worker`).
	Workers int
	// LeaseTTL bounds how long a dead worker keeps a run: another takes over after it. Default 15s.
	LeaseTTL time.Duration
	// SweepInterval is how often orphaned runs are looked for. Default LeaseTTL/3.
	SweepInterval time.Duration
	// Program names the program whose actions this service executes, in the action catalogue
	// that several programs on one database share; its workers work the program's own queue
	// (ProgramQueue). Default: the binary's name.
	Program string
	// AnnounceInterval is how often a service with workers renews its entry in the catalogue; the
	// entry is live for three intervals. Default LeaseTTL/3.
	AnnounceInterval time.Duration
	// Faults makes the process kill itself at the named fault points (fault.go) with the given
	// probabilities. It exists for the crash harness (make chaos); leave it nil.
	Faults map[string]float64
	// Webhooks are posted on a new pending interrupt, an escalation and an expiry (notify.go).
	// A process with workers delivers them; every such process needs the same list and secret.
	Webhooks notify.Config
	Logger   *slog.Logger
}

// Service starts, executes, resolves, resumes, cancels and recovers runs.
type Service struct {
	cfg      Config
	store    *store.Store
	registry *engine.Registry
	river    *river.Client[pgx.Tx]
	log      *slog.Logger
	owner    string
	queue    string // the program's River queue
	descs    descCache
	pol      policies
	hooks    notify.Config
	sender   *notify.Sender
	// publisher is set before Start and only read after.
	publisher Publisher

	mu      sync.Mutex
	active  map[uuid.UUID]context.CancelFunc // the runs this process executes, with their cancel (nil: claimed, not yet started)
	stopped chan struct{}
	sweepWG sync.WaitGroup
	started bool
}

// RunArgs is the River job that executes, resumes or recovers one run.
type RunArgs struct {
	RunID uuid.UUID `json:"run_id"`
	// Action is the run's action, so that a worker that lacks it routes the job on without
	// reading the run; jobs inserted before it existed leave it empty.
	Action string `json:"action,omitempty"`
}

// Kind names the job kind in River's tables.
func (RunArgs) Kind() string { return "loupe.run" }

// New builds the service. Workers, if any, begin with Start.
func New(cfg Config, st *store.Store, reg *engine.Registry) (*Service, error) {
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = cfg.LeaseTTL / 3
	}
	if cfg.AnnounceInterval == 0 {
		cfg.AnnounceInterval = cfg.LeaseTTL / 3
	}
	if cfg.Program == "" {
		cfg.Program = filepath.Base(os.Args[0])
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	s := &Service{
		cfg: cfg, store: st, registry: reg, log: cfg.Logger,
		owner:  fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(4)),
		queue:  ProgramQueue(cfg.Program),
		active: map[uuid.UUID]context.CancelFunc{},
	}
	if cfg.Webhooks.Enabled() {
		if err := cfg.Webhooks.Check(); err != nil {
			return nil, fmt.Errorf("runs: %w", err)
		}
		s.hooks = cfg.Webhooks.WithDefaults()
		s.sender = &notify.Sender{Secret: s.hooks.Secret, Timeout: s.hooks.Timeout, Client: &http.Client{}}
		cfg.Logger.Info("webhooks configured", "webhooks", s.hooks, "delivering", cfg.Workers > 0)
		if len(s.hooks.Secret) == 0 {
			cfg.Logger.Warn("webhooks are not signed: no secret (LOUPE_WEBHOOK_SECRET)", "webhooks", len(s.hooks.URLs))
		}
	}
	rcfg := &river.Config{
		// The client's id is the lease owner: a job's attempted_by then names the process whose
		// lease its run must be under (store.JobCancelAbandoned).
		ID:                   s.owner,
		Logger:               cfg.Logger.With("component", "river"),
		JobTimeout:           -1, // runs last as long as their model calls; cancellation goes through the lease
		RescueStuckJobsAfter: 2 * cfg.LeaseTTL,
		MaxAttempts:          25,
	}
	if cfg.Workers > 0 {
		workers := river.NewWorkers()
		if err := river.AddWorkerSafely(workers, &runWorker{svc: s}); err != nil {
			return nil, fmt.Errorf("runs: register worker: %w", err)
		}
		if s.hooks.Enabled() {
			if err := river.AddWorkerSafely(workers, &webhookWorker{svc: s}); err != nil {
				return nil, fmt.Errorf("runs: register webhook worker: %w", err)
			}
		}
		rcfg.Workers = workers
		// The program's queue gets the workers. The default queue is worked too, for the jobs that
		// releases before the catalogue inserted there; a job of an action this program lacks is
		// routed on from it (worker.go).
		rcfg.Queues = map[string]river.QueueConfig{
			s.queue:            {MaxWorkers: cfg.Workers},
			river.QueueDefault: {MaxWorkers: max(1, cfg.Workers/4)},
		}
		if s.hooks.Enabled() {
			rcfg.Queues[WebhookQueue] = river.QueueConfig{MaxWorkers: 4}
		}
		rcfg.FetchCooldown = 20 * time.Millisecond
		rcfg.FetchPollInterval = 250 * time.Millisecond
	}
	client, err := river.NewClient(riverpgxv5.New(st.Pool()), rcfg)
	if err != nil {
		return nil, fmt.Errorf("runs: river client: %w", err)
	}
	s.river = client
	return s, nil
}

// Registry is the engine registry the service runs actions from.
func (s *Service) Registry() *engine.Registry { return s.registry }

// Start announces the program's actions in the catalogue (taking the runs that waited for them),
// then starts the workers, the recovery sweep and the announcement's heartbeat. It is a no-op for
// an insert-only service.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.cfg.Workers == 0 {
		return nil
	}
	if err := s.announce(ctx); err != nil {
		return fmt.Errorf("runs: announce actions: %w", err)
	}
	if err := s.river.Start(context.WithoutCancel(ctx)); err != nil {
		s.unannounce()
		return fmt.Errorf("runs: start workers: %w", err)
	}
	s.started = true
	s.stopped = make(chan struct{})
	s.sweepWG.Add(2)
	go s.sweepLoop()
	go s.announceLoop()
	s.log.Info("run workers started", "workers", s.cfg.Workers, "owner", s.owner, "program", s.cfg.Program, "queue", s.queue)
	return nil
}

// Stop removes the process from the catalogue, so that no more runs are routed to it, stops
// fetching jobs and waits for the running ones to finish, up to 30 seconds, then cancels them;
// cancelled executions keep their checkpoints and are taken over later. It is safe to call twice
// and without Start.
func (s *Service) Stop() {
	s.mu.Lock()
	started := s.started
	s.started = false
	s.mu.Unlock()
	if !started {
		return
	}
	close(s.stopped)
	s.sweepWG.Wait()
	s.unannounce()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.river.Stop(ctx); err != nil {
		s.log.Warn("runs: workers did not stop in time; cancelling them", "err", err)
		_ = s.river.StopAndCancel(context.Background())
	}
	if s.sender != nil {
		s.sender.Client.CloseIdleConnections()
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Error kinds the API maps to status codes.
var (
	// ErrInvalid marks a request that is malformed or fails validation (422 or 400).
	ErrInvalid = errors.New("invalid")
	// ErrConflict marks a request that lost a race or targets the wrong state (409).
	ErrConflict = errors.New("conflict")
	// ErrForbidden marks a decision its reviewer may not make: the policy rule that routed the
	// interrupt requires another role or a group they are not in (403).
	ErrForbidden = errors.New("forbidden")
)

// ErrUnreachable, wrapped in an action's error, says that the action could not be started
// because what executes it cannot be reached at the moment (a Genkit app that has just gone
// away): nothing of the run happened, so it is not failed; it keeps its checkpoint and waits to be
// tried again, by this process or by the next one that has the action.
var ErrUnreachable = errors.New("cannot be reached")
