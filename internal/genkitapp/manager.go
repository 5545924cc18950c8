package genkitapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// Runtime is a runtime file, which a Genkit app in dev mode writes to
// <project root>/.genkit/runtimes/<id>-<time>.json while its reflection server runs.
type Runtime struct {
	ID                       string `json:"id"`
	PID                      int    `json:"pid"`
	Name                     string `json:"name,omitempty"`
	ReflectionServerURL      string `json:"reflectionServerUrl"`
	Timestamp                string `json:"timestamp"`
	GenkitVersion            string `json:"genkitVersion,omitempty"`
	ReflectionAPISpecVersion int    `json:"reflectionApiSpecVersion,omitempty"`
	// File is where it was read from; Project is the project root it belongs to.
	File    string `json:"-"`
	Project string `json:"-"`
}

// ProjectRoots are the project roots a Genkit app started in dir writes its runtime files under:
// Genkit JS's is the nearest directory up from dir holding a package.json, Genkit Go's the nearest
// holding a go.mod. Both are returned when they differ (a JS app in a Go repository), dir itself
// when neither is found.
func ProjectRoots(dir string) []string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	var roots []string
	for _, marker := range []string{"package.json", "go.mod"} {
		if r := nearest(dir, marker); r != "" && !slices.Contains(roots, r) {
			roots = append(roots, r)
		}
	}
	if len(roots) == 0 {
		roots = append(roots, dir)
	}
	return roots
}

func nearest(dir, marker string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// RuntimesDir is where the runtime files of a project root are.
func RuntimesDir(root string) string { return filepath.Join(root, ".genkit", "runtimes") }

// readRuntimes reads the runtime files of a project root; unreadable ones are left out (Genkit may
// be writing one).
func readRuntimes(root string) []*Runtime {
	entries, err := os.ReadDir(RuntimesDir(root))
	if err != nil {
		return nil
	}
	var out []*Runtime
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(RuntimesDir(root), e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var rt Runtime
		if json.Unmarshal(b, &rt) != nil || rt.ReflectionServerURL == "" {
			continue
		}
		rt.File, rt.Project = path, root
		out = append(out, &rt)
	}
	return out
}

// pidAlive says whether a process with the pid exists (a process of another user counts).
func pidAlive(pid int) bool {
	if pid <= 0 {
		return true // unknown: the health check decides
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Config configures the Manager.
type Config struct {
	// Projects are the project roots whose .genkit/runtimes/ are watched.
	Projects []string
	Store    *store.Store
	// TelemetryURL is this server's URL, sent to each app with POST /api/notify.
	TelemetryURL string
	// Workers is how many runs of one app execute at once. Default 4.
	Workers int
	// LeaseTTL is the run services' (runs.Config). Default 15s.
	LeaseTTL time.Duration
	// Interval is how often the runtime files are read and the apps' health checked. Default 1s.
	Interval  time.Duration
	Publisher runs.Publisher
	Logger    *slog.Logger
	HTTP      *http.Client
}

// AppStatus is one Genkit app as the UI shows it.
type AppStatus struct {
	Name          string
	Project       string
	URL           string
	PID           int
	GenkitVersion string
	Live          bool
	// Reason says why an app that is gone is gone.
	Reason string
	// Since is when it was found, or when it went away.
	Since   time.Time
	Actions int
	// Program is its program's name in the action catalogue.
	Program string
}

// Manager watches project roots for Genkit apps and runs a proxy run service for each live one.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	apps    map[string]*appState
	stop    chan struct{}
	done    chan struct{}
	started bool
}

type appState struct {
	status  AppStatus
	runtime *Runtime
	svc     *runs.Service
}

// ProgramPrefix starts the catalogue program name of every Genkit app.
const ProgramPrefix = "genkit:"

// New builds a Manager; it watches from Start.
func New(cfg Config) *Manager {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	return &Manager{cfg: cfg, log: cfg.Logger.With("component", "genkit-apps"), apps: map[string]*appState{}}
}

// SetTelemetryURL sets Config.TelemetryURL, known only once the server listens; call it before
// Start.
func (m *Manager) SetTelemetryURL(u string) { m.cfg.TelemetryURL = u }

// Projects are the watched project roots.
func (m *Manager) Projects() []string { return slices.Clone(m.cfg.Projects) }

// Start reads the runtime files once, attaching to the apps already running, then watches.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return nil
	}
	m.started = true
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	m.mu.Unlock()
	for _, p := range m.cfg.Projects {
		m.log.Info("watching for Genkit apps", "runtimes", RuntimesDir(p))
	}
	m.scan(ctx)
	go m.loop()
	return nil
}

// Stop stops watching and stops every app's run service. It is safe to call twice and without
// Start.
func (m *Manager) Stop() {
	m.mu.Lock()
	if !m.started {
		m.mu.Unlock()
		return
	}
	m.started = false
	close(m.stop)
	done := m.done
	m.mu.Unlock()
	<-done
	m.mu.Lock()
	var svcs []*runs.Service
	for _, a := range m.apps {
		if a.svc != nil {
			svcs = append(svcs, a.svc)
			a.svc = nil
		}
	}
	m.mu.Unlock()
	for _, s := range svcs {
		s.Stop()
	}
}

func (m *Manager) loop() {
	defer close(m.done)
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		m.scan(ctx)
		cancel()
	}
}

// Apps lists the apps found so far, live ones first, by name.
func (m *Manager) Apps() []AppStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]AppStatus, 0, len(m.apps))
	for _, a := range m.apps {
		out = append(out, a.status)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Live != out[j].Live {
			return out[i].Live
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// scan reads every runtime file, checks each runtime, and attaches to the live apps and detaches
// from those gone.
func (m *Manager) scan(ctx context.Context) {
	type candidate struct {
		rt  *Runtime
		err error
	}
	byName := map[string][]candidate{}
	for _, root := range m.cfg.Projects {
		for _, rt := range readRuntimes(root) {
			name := rt.Name
			if name == "" {
				name = filepath.Base(rt.Project)
			}
			var err error
			if !pidAlive(rt.PID) {
				err = fmt.Errorf("process %d exited", rt.PID)
			} else if herr := health(ctx, m.client(rt), rt); herr != nil {
				err = fmt.Errorf("health check failed: %v", herr)
			}
			byName[name] = append(byName[name], candidate{rt, err})
		}
	}
	seen := map[string]bool{}
	for name, cands := range byName {
		// The newest live runtime of a name is the app; an older one is a restart's leftover.
		sort.Slice(cands, func(i, j int) bool { return cands[i].rt.Timestamp > cands[j].rt.Timestamp })
		var live *Runtime
		reason := ""
		for _, c := range cands {
			if c.err == nil {
				live = c.rt
				break
			}
			if reason == "" {
				reason = c.err.Error()
			}
		}
		if live == nil {
			m.gone(name, reason)
			continue
		}
		seen[name] = true
		m.attach(ctx, name, live)
	}
	m.mu.Lock()
	var missing []string
	for name, a := range m.apps {
		if !seen[name] && a.status.Live {
			if _, ok := byName[name]; !ok {
				missing = append(missing, name)
			}
		}
	}
	m.mu.Unlock()
	for _, name := range missing {
		m.gone(name, "its runtime file was removed")
	}
}

func (m *Manager) client(rt *Runtime) *Client {
	return &Client{BaseURL: strings.TrimRight(rt.ReflectionServerURL, "/"), HTTP: m.cfg.HTTP}
}

// attach makes the runtime the app's: a new one (a first start, or a restart) gets its actions read
// and a run service of its own, announcing them.
func (m *Manager) attach(ctx context.Context, name string, rt *Runtime) {
	m.mu.Lock()
	a := m.apps[name]
	if a != nil && a.runtime != nil && a.runtime.ID == rt.ID && a.runtime.File == rt.File && a.svc != nil {
		m.mu.Unlock()
		return
	}
	var old *runs.Service
	if a != nil {
		old, a.svc = a.svc, nil
	}
	m.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	svc, n, err := m.connect(ctx, name, rt)
	status := AppStatus{Name: name, Project: rt.Project, URL: rt.ReflectionServerURL, PID: rt.PID, GenkitVersion: rt.GenkitVersion,
		Since: time.Now(), Actions: n, Program: ProgramPrefix + name, Live: err == nil}
	if err != nil {
		status.Reason = err.Error()
		m.log.Warn("cannot attach to a Genkit app; will try again", "app", name, "url", rt.ReflectionServerURL, "err", err)
	} else {
		m.log.Info("attached to a Genkit app", "app", name, "url", rt.ReflectionServerURL, "pid", rt.PID, "actions", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		// rt stays unset: the next scan tries again.
		m.apps[name] = &appState{status: status}
		return
	}
	m.apps[name] = &appState{status: status, runtime: rt, svc: svc}
}

// connect reads the app's actions, tells it where the telemetry goes, and starts its run service.
func (m *Manager) connect(ctx context.Context, name string, rt *Runtime) (*runs.Service, int, error) {
	cl := m.client(rt)
	actions, err := cl.Actions(ctx)
	if err != nil {
		return nil, 0, err
	}
	if m.cfg.TelemetryURL != "" {
		if err := cl.Notify(ctx, m.cfg.TelemetryURL); err != nil {
			m.log.Debug("notify a Genkit app", "app", name, "err", err)
		}
	}
	normalizeActions(actions)
	model := defaultModel(ctx, cl)
	if model == "" {
		model = soleModel(actions)
	}
	c := &conn{name: name, client: cl, runtime: rt, actions: actions, defaultModel: model, goApp: strings.HasPrefix(rt.GenkitVersion, "go/"),
		log: m.log.With("app", name)}
	reg := engine.NewRegistry(engine.WithoutGenerateAction())
	for _, p := range c.proxies() {
		if err := reg.Register(p); err != nil {
			return nil, 0, err
		}
	}
	svc, err := runs.New(runs.Config{Program: ProgramPrefix + name, Workers: m.cfg.Workers, LeaseTTL: m.cfg.LeaseTTL,
		Logger: m.cfg.Logger.With("app", name)}, m.cfg.Store, reg)
	if err != nil {
		return nil, 0, err
	}
	if m.cfg.Publisher != nil {
		svc.SetPublisher(m.cfg.Publisher)
	}
	if err := svc.Start(ctx); err != nil {
		return nil, 0, err
	}
	return svc, len(actions), nil
}

// gone marks an app as gone and stops its run service: its actions stop being live in the
// catalogue, and new runs of them wait, with the reason shown, until it comes back.
func (m *Manager) gone(name, reason string) {
	m.mu.Lock()
	a := m.apps[name]
	if a == nil {
		// Found dead at once (a leftover runtime file): shown as gone.
		m.apps[name] = &appState{status: AppStatus{Name: name, Program: ProgramPrefix + name, Reason: reason, Since: time.Now()}}
		m.mu.Unlock()
		return
	}
	if !a.status.Live && a.svc == nil {
		// Gone already: the latest word on why (a dying process fails its health check before
		// its pid is gone).
		if reason != "" {
			a.status.Reason = reason
		}
		m.mu.Unlock()
		return
	}
	svc := a.svc
	a.svc, a.runtime = nil, nil
	a.status.Live, a.status.Reason, a.status.Since = false, reason, time.Now()
	m.mu.Unlock()
	m.log.Info("a Genkit app went away", "app", name, "reason", reason)
	if svc != nil {
		svc.Stop()
	}
}

// defaultModel asks the app for its default model (GET /api/values?type=defaultModel); "" when
// it has none.
func defaultModel(ctx context.Context, cl *Client) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.BaseURL+"/api/values?type=defaultModel", nil)
	if err != nil {
		return ""
	}
	resp, err := cl.http().Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var v struct {
		DefaultModel json.RawMessage `json:"defaultModel"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil {
		return ""
	}
	var name string
	if json.Unmarshal(v.DefaultModel, &name) == nil {
		return name
	}
	var ref struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(v.DefaultModel, &ref)
	return ref.Name
}
