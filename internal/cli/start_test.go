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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestStartRunsTheProgramBesideTheUIAndRestartsIt runs `devui start -- <quickstart>`: the UI
// serves, the quickstart program (built from examples/quickstart) runs as its worker on the same
// database, and its flow runs through the UI's API to its interrupt and, once approved, to the
// end. Killed, the program is started again, and a new run goes through too.
func TestStartRunsTheProgramBesideTheUIAndRestartsIt(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "examples", "quickstart")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the quickstart module: %s", out)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	cmd := newRootCommand(demoProgram())
	cmd.SetOut(&logs)
	cmd.SetErr(&logs)
	cmd.SetArgs([]string{"start", "--addr", addr, "--database-url", storetest.NewURL(t), "--log-level", "error", "--", bin})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		if t.Failed() {
			t.Logf("devui start's output:\n%s", logs.String())
		}
	})
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
