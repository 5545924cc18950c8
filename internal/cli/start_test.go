package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/pgcluster"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestStartRunsTheProgramBesideTheUIAndRestartsIt runs `devui start -- <quickstart>`: the UI
// serves, the quickstart program (built from examples/quickstart) runs as its worker on the same
// database, and its flow runs through the UI's API to its interrupt and, once approved, to the
// end. Killed, the program is started again, and a new run goes through too.
func TestStartRunsTheProgramBesideTheUIAndRestartsIt(t *testing.T) {
	t.Parallel()
	bin := buildQuickstart(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	logs := runStart(t, "--addr", addr, "--database-url", storetest.NewURL(t), "--log-level", "error", "--", bin)
	base := "http://" + addr

	runTrip := func() {
		t.Helper()
		var run struct {
			ID     string          `json:"id"`
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		}
		require.Eventually(t, func() bool {
			return postJSON(t, base+"/api/v1/runs", `{"action":"/flow/trip","input":"Lisbon"}`, &run) == http.StatusCreated
		}, time.Minute, 100*time.Millisecond, "the program's flow never became startable")
		var list struct {
			Interrupts []struct {
				ID      string `json:"id"`
				RunID   string `json:"run_id"`
				Version int64  `json:"version"`
			} `json:"interrupts"`
		}
		require.Eventually(t, func() bool {
			getJSON(t, base+"/api/v1/interrupts?status=pending", &list)
			return len(list.Interrupts) == 1 && list.Interrupts[0].RunID == run.ID
		}, time.Minute, 50*time.Millisecond, "the booking never reached the inbox")
		it := list.Interrupts[0]
		require.Equal(t, http.StatusOK, postJSON(t, base+"/api/v1/interrupts/"+it.ID+"/resolve",
			fmt.Sprintf(`{"action":"approve","version":%d}`, it.Version), nil))
		require.Eventually(t, func() bool {
			getJSON(t, base+"/api/v1/runs/"+run.ID, &run)
			return run.Status == "succeeded"
		}, time.Minute, 50*time.Millisecond, "the run never succeeded")
		require.JSONEq(t, `"Your flight is booked."`, string(run.Output))
	}
	runTrip()

	pid := pidOf(t, bin)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		p := pidOf(t, bin)
		return p != 0 && p != pid
	}, time.Minute, 50*time.Millisecond, "the program was not started again")
	runTrip()
	require.Contains(t, logs.String(), "exited (signal: killed); running it again")
}

// TestStartStopsTheProgramBeforeTheDatabase runs `devui start -- <quickstart>` on the embedded
// cluster and stops it as Ctrl-C does: the program is stopped first, while the database and the
// server are still up, so it leaves the action catalogue on its way out and logs no connection
// error. Afterwards no process is listed in the catalogue. Before, PostgreSQL was stopped at the
// same moment as the program, which then failed to leave the catalogue.
func TestStartStopsTheProgramBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	bin := buildQuickstart(t)
	dataDir := newDataDir(t)
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	cmd := newRootCommand(demoProgram())
	cmd.SetOut(logs)
	cmd.SetErr(logs)
	cmd.SetArgs([]string{"start", "--addr", addr, "--data-dir", dataDir, "--log-level", "warn", "--", bin})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("devui start's output:\n%s", logs.String())
		}
	})
	require.Eventually(t, func() bool {
		var list struct {
			Actions []struct {
				Key string `json:"key"`
			} `json:"actions"`
		}
		getJSON(t, "http://"+addr+"/api/v1/actions", &list)
		for _, a := range list.Actions {
			if a.Key == "/flow/trip" {
				return true
			}
		}
		return false
	}, 2*time.Minute, 50*time.Millisecond, "the program announces its flow")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("devui start did not stop")
	}
	require.Zero(t, pidOf(t, bin), "the program is stopped")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.HasPrefix(line, "app | ") {
			require.NotContains(t, line, "level=ERROR", "the program logs no error while it stops")
			require.NotContains(t, line, "level=WARN", "the program logs no warning while it stops")
		}
	}

	cluster, err := pgcluster.New(pgcluster.Config{DataDir: dataDir})
	require.NoError(t, err)
	require.NoError(t, cluster.StartDetached(context.Background()))
	t.Cleanup(func() { _ = cluster.StopDetached(context.Background()) })
	url, ok := cluster.Running()
	require.True(t, ok)
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT program FROM action_catalogue_workers ORDER BY 1`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, left, "every process left the action catalogue as it stopped")
}

// buildQuickstart builds examples/quickstart, a Loupe program, and returns the binary.
func buildQuickstart(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "examples", "quickstart")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the quickstart module: %s", out)
	return bin
}

// pidOf finds the process running the executable bin, or 0.
func pidOf(t *testing.T, bin string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && strings.TrimSuffix(exe, " (deleted)") == bin {
			return pid
		}
	}
	return 0
}

func postJSON(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
}

// TestStartGivesTheCommandGenkitDevModeAndLoupesTelemetryAddress runs `devui start` on port 0 with a
// shell holding other Genkit settings, and a command that writes its environment to a file: the
// command gets GENKIT_ENV=dev and GENKIT_TELEMETRY_SERVER set to the address devui listens at (not
// the :0 it was asked for, nor the shell's), once each, and a Genkit trace posted there, as a
// Genkit app posts its spans, is stored and read back through Loupe's API.
func TestStartGivesTheCommandGenkitDevModeAndLoupesTelemetryAddress(t *testing.T) {
	// Not parallel: t.Setenv. A shell where the user ran a Genkit app against something else.
	t.Setenv("GENKIT_ENV", "prod")
	t.Setenv("GENKIT_TELEMETRY_SERVER", "http://127.0.0.1:9")
	envFile := filepath.Join(t.TempDir(), "env")
	logs := runStart(t, "--addr", "127.0.0.1:0", "--database-url", storetest.NewURL(t), "--data-dir", t.TempDir(), "--log-level", "error",
		"--", "sh", "-c", `env > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 600`, envFile)
	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`Loupe is at (http://[0-9.:]+);`).FindStringSubmatch(logs.String())
		if m == nil {
			return false
		}
		base = m[1]
		return true
	}, time.Minute, 50*time.Millisecond, "devui start says where it listens")
	require.NotEqual(t, "http://127.0.0.1:0", base)

	var env []string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(envFile)
		env = strings.Split(string(b), "\n")
		return err == nil
	}, time.Minute, 50*time.Millisecond, "the command ran and wrote its environment")
	values := func(name string) []string {
		var vs []string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				vs = append(vs, v)
			}
		}
		return vs
	}
	require.Equal(t, []string{"dev"}, values("GENKIT_ENV"))
	require.Equal(t, []string{base}, values("GENKIT_TELEMETRY_SERVER"), "the telemetry server is this Loupe")

	// What a Genkit JS app sends there: POST /api/traces with a span of Genkit's TraceData.
	telemetry := values("GENKIT_TELEMETRY_SERVER")[0]
	const traceID, spanID = "3c1e5a7b9d0f4e2a8b6c4d2e0f1a3b5c", "9a8b7c6d5e4f3a2b"
	body := fmt.Sprintf(`{"traceId":%q,"displayName":"envFlow","startTime":1796002500000,"endTime":1796002500010,
		"spans":{%q:{"spanId":%q,"traceId":%q,"startTime":1796002500000,"endTime":1796002500010,"displayName":"envFlow",
		"attributes":{"genkit:name":"envFlow","genkit:type":"action","genkit:metadata:subtype":"flow","genkit:path":"/{envFlow,t:flow}","genkit:state":"success","genkit:output":"\"ok\""},
		"instrumentationLibrary":{"name":"genkit-tracer","version":"v1"},"spanKind":"INTERNAL","status":{"code":0},"timeEvents":{}}}}`,
		traceID, spanID, spanID, traceID)
	resp, err := http.Post(telemetry+"/api/traces", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", out)
	var tree struct {
		Roots []struct {
			Name string `json:"name"`
		} `json:"roots"`
	}
	getJSON(t, base+"/api/v1/traces/"+traceID, &tree)
	require.Len(t, tree.Roots, 1, "the trace sent to GENKIT_TELEMETRY_SERVER is Loupe's")
	require.Equal(t, "envFlow", tree.Roots[0].Name)
}

// runStart runs devui start with args until the test ends, and returns what it prints (logged
// when the test fails).
func runStart(t *testing.T, args ...string) *syncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	cmd := newRootCommand(demoProgram())
	cmd.SetOut(logs)
	cmd.SetErr(logs)
	cmd.SetArgs(append([]string{"start"}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		if t.Failed() {
			t.Logf("devui start's output:\n%s", logs.String())
		}
	})
	return logs
}
