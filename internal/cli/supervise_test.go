package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// buildDevui compiles cmd/devui into a real devui binary for tests that run it as a process.
func buildDevui(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devui")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/devui").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// devuiProcess is the devui binary running one command, here `devui serve --dev` on the embedded
// cluster in its own data dir.
type devuiProcess struct {
	bin     string
	cmd     *exec.Cmd
	url     string // for serve
	dataDir string
	log     *syncBuffer
	exited  chan struct{}
	waitErr error
}

func startDevui(t *testing.T) *devuiProcess {
	t.Helper()
	return serveDevui(t, buildDevui(t), newDataDir(t))
}

// newDataDir is a fresh data dir that the server's account (postgres, when tests run as root) can
// reach.
func newDataDir(t *testing.T) string {
	t.Helper()
	dataDir, err := os.MkdirTemp("", "loupe-devui-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dataDir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	return dataDir
}

// serveDevui runs `devui serve --dev` on a free loopback port, with args after those.
func serveDevui(t *testing.T, bin, dataDir string, args ...string) *devuiProcess {
	t.Helper()
	addr := freePort(t)
	p := runDevui(t, bin, dataDir, append([]string{"serve", "--dev", "--addr", addr}, args...)...)
	p.url = "http://" + addr
	return p
}

// runDevui runs the devui binary bin with args and --data-dir dataDir, with none of the test's
// own DATABASE_URL or LOUPE_ settings. A process still running when the test ends is killed.
func runDevui(t *testing.T, bin, dataDir string, args ...string) *devuiProcess {
	t.Helper()
	return runDevuiEnv(t, bin, dataDir, nil, args...)
}

// runDevuiEnv is runDevui with env (KEY=value) added to the process's environment.
func runDevuiEnv(t *testing.T, bin, dataDir string, env []string, args ...string) *devuiProcess {
	t.Helper()
	p := &devuiProcess{bin: bin, dataDir: dataDir, log: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append(args, "--data-dir", dataDir)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "LOUPE_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	require.NoError(t, p.cmd.Start())
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill() // its postgres follows it (Pdeathsig)
			<-p.exited
		}
		if t.Failed() {
			t.Logf("devui %s's log:\n%s", strings.Join(args, " "), p.log.String())
		}
	})
	return p
}

// wait waits until the process exits and returns how it exited; it fails the test when the process
// is still running after within.
func (p *devuiProcess) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(within):
		t.Fatalf("devui (pid %d) still runs after %s", p.cmd.Process.Pid, within)
		return nil
	}
}

// interrupt sends SIGINT, as Ctrl-C does, and requires a clean exit.
func (p *devuiProcess) interrupt(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, p.wait(t, time.Minute), "devui exits cleanly on SIGINT")
}

// waitReady waits until /readyz answers 200, and fails at once, with the process's log, if the
// process exits meanwhile.
func (p *devuiProcess) waitReady(t *testing.T, within time.Duration) {
	t.Helper()
	eventually(t, within, "devui is ready", func() (bool, string) {
		select {
		case <-p.exited:
			t.Fatalf("devui exited before it was ready (%v)", p.waitErr)
		default:
		}
		status, _, body := p.httpDo(t, http.MethodGet, "/readyz", "")
		return status == http.StatusOK, body
	})
}

// httpDo sends a request to devui and returns the status, the headers and the body.
func (p *devuiProcess) httpDo(t *testing.T, method, path, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.url+path, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(raw)
}

// eventually polls cond until it holds or the deadline passes, then fails with what it last saw.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last seen: %s", what, within, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *devuiProcess) startRun(t *testing.T, from int) string {
	t.Helper()
	status, _, body := p.httpDo(t, http.MethodPost, "/api/v1/runs", fmt.Sprintf(`{"action":"/flow/countdown","input":{"from":%d}}`, from))
	require.Equal(t, http.StatusCreated, status, body)
	var run struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &run))
	return run.ID
}

func (p *devuiProcess) waitRunSucceeded(t *testing.T, id string, within time.Duration) {
	t.Helper()
	eventually(t, within, "run "+id+" succeeds", func() (bool, string) {
		status, _, body := p.httpDo(t, http.MethodGet, "/api/v1/runs/"+id, "")
		var run struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal([]byte(body), &run)
		return status == http.StatusOK && run.Status == "succeeded", fmt.Sprintf("%d %.300s", status, body)
	})
}

// postmasterPID is line 1 of the cluster's postmaster.pid.
func (p *devuiProcess) postmasterPID(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.dataDir, "postgres", "postmaster.pid"))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	require.NoError(t, err)
	return pid
}

// listening returns the channels that the server's connections LISTEN on, as pg_stat_activity
// shows them (the last statement of each idle connection), on a connection of its own.
func (p *devuiProcess) listening(t *testing.T) []string {
	t.Helper()
	url, err := exec.Command(p.bin, "db", "url", "--data-dir", p.dataDir).Output()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, strings.TrimSpace(string(url)))
	if err != nil {
		return []string{err.Error()}
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'listen %' ORDER BY 1`)
	require.NoError(t, err)
	queries, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return queries
}

// holdStartLock takes the lock under which devui (re)starts its cluster, as a second devui starting
// the same cluster would, and so holds the outage open while the test looks at it.
func (p *devuiProcess) holdStartLock(t *testing.T) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(p.dataDir, "postgres.lock"), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	var once sync.Once
	release := func() {
		once.Do(func() {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// TestEmbeddedPostgresIsRestartedAfterSIGKILL runs the real devui binary on its embedded cluster,
// SIGKILLs the postmaster in the middle of a run, and checks what a user sees: /readyz is a 503
// that says the database is down and being restarted, API and page requests are 503s with
// Retry-After (not 500s), readiness comes back by itself, River and the live hub LISTEN again, the
// interrupted run and a new one succeed, and Ctrl-C afterwards stops devui and its PostgreSQL for
// good.
func TestEmbeddedPostgresIsRestartedAfterSIGKILL(t *testing.T) {
	t.Parallel()
	p := startDevui(t)
	eventually(t, 2*time.Minute, "devui is ready", func() (bool, string) {
		status, _, body := p.httpDo(t, http.MethodGet, "/readyz", "")
		return status == http.StatusOK, body
	})

	// A run in flight: a countdown of 25 ticks, 200 ms apart, already streaming.
	inFlight := p.startRun(t, 25)
	eventually(t, 30*time.Second, "the run streams", func() (bool, string) {
		status, _, body := p.httpDo(t, http.MethodGet, "/api/v1/runs/"+inFlight+"/chunks?after=0", "")
		return status == http.StatusOK && strings.Contains(body, `"seq"`), body
	})

	release := p.holdStartLock(t)
	crashed := p.postmasterPID(t)
	require.NoError(t, syscall.Kill(crashed, syscall.SIGKILL))
	killedAt := time.Now()

	eventually(t, 30*time.Second, "/readyz reports the outage", func() (bool, string) {
		status, header, body := p.httpDo(t, http.MethodGet, "/readyz", "")
		var ready map[string]string
		_ = json.Unmarshal([]byte(body), &ready)
		return status == http.StatusServiceUnavailable && ready["status"] == "unavailable" &&
			strings.HasPrefix(ready["database"], "down since ") && strings.Contains(ready["database"], "restarting (attempt 1)") &&
			header.Get("Retry-After") != "", fmt.Sprintf("%d %s", status, body)
	})
	status, header, body := p.httpDo(t, http.MethodGet, "/api/v1/runs", "")
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Equal(t, "5", header.Get("Retry-After"))
	require.Contains(t, body, `"code":"database_unavailable"`)
	require.Contains(t, body, "restarting (attempt 1)")
	status, _, body = p.httpDo(t, http.MethodPost, "/api/v1/runs", `{"action":"/flow/countdown","input":{"from":3}}`)
	require.Equal(t, http.StatusServiceUnavailable, status, "starting a run while down: %s", body)
	status, _, body = p.httpDo(t, http.MethodGet, "/runs", "", "Accept", "text/html")
	require.Equal(t, http.StatusServiceUnavailable, status, "a page while down: %.300s", body)
	require.Contains(t, body, "the database is unavailable")

	release()
	eventually(t, time.Minute, "/readyz recovers", func() (bool, string) {
		status, _, body := p.httpDo(t, http.MethodGet, "/readyz", "")
		return status == http.StatusOK, fmt.Sprintf("%d %s", status, body)
	})
	t.Logf("ready again %s after the SIGKILL (the test held the start lock for part of it)", time.Since(killedAt).Round(time.Millisecond))
	require.NotEqual(t, crashed, p.postmasterPID(t), "a new postmaster runs")
	require.Contains(t, p.log.String(), "embedded PostgreSQL exited unexpectedly; restarting it")
	require.Contains(t, p.log.String(), "embedded PostgreSQL restarted")
	status, _, body = p.httpDo(t, http.MethodGet, "/api/v1/runs", "")
	require.Equal(t, http.StatusOK, status, body)
	// River's notifier and the live hub LISTEN again, each on its own new connection.
	eventually(t, time.Minute, "River and the live hub LISTEN again", func() (bool, string) {
		got := strings.Join(p.listening(t), "; ")
		return strings.Contains(got, "river_") && strings.Contains(got, "loupe_live"), got
	})

	// The run that was in flight finishes (River retries or rescues its job), and a new one runs.
	p.waitRunSucceeded(t, inFlight, 2*time.Minute)
	p.waitRunSucceeded(t, p.startRun(t, 3), time.Minute)

	// Ctrl-C: devui stops its PostgreSQL, and does not take that for a crash.
	restarted := p.postmasterPID(t)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-p.exited:
		require.NoError(t, p.waitErr, "devui exits cleanly on SIGINT")
	case <-time.After(time.Minute):
		t.Fatal("devui did not stop on SIGINT")
	}
	require.Error(t, syscall.Kill(restarted, 0), "PostgreSQL stopped with devui")
	_, err := os.Stat(filepath.Join(p.dataDir, "postgres", "postmaster.pid"))
	require.True(t, os.IsNotExist(err), "PostgreSQL shut down cleanly")
	require.Equal(t, 1, strings.Count(p.log.String(), "exited unexpectedly"), "a stop on purpose is not restarted")
}
