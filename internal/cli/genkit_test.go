package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestServeAttachesToARunningGenkitApp starts a real Genkit JS app first, then
// `serve --genkit-project` on its folder: the app's actions are listed and run through the API, its
// trace comes to Loupe (the app was told where through /api/notify), the Actions page shows the app
// under its name, and once the app is killed it shows it as gone,
// still answering 200.
func TestServeAttachesToARunningGenkitApp(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	app := genkitapptest.Start(t, dir, "shop")
	url := serveGenkitProject(t, dir)
	get := func(path string) (int, string) {
		resp, err := http.Get(url + path)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		_, body := get("/api/v1/actions")
		return strings.Contains(body, `"shop:/flow/echo"`)
	}, 60*time.Second, 50*time.Millisecond, "serve lists the app's actions")

	resp, err := http.Post(url+"/api/v1/runs", "application/json", strings.NewReader(`{"action":"shop:/flow/echo","input":"hi"}`))
	require.NoError(t, err)
	var created struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var detail struct {
		Status  string          `json:"status"`
		Output  json.RawMessage `json:"output"`
		TraceID string          `json:"trace_id"`
	}
	require.Eventually(t, func() bool {
		_, body := get("/api/v1/runs/" + created.ID)
		require.NoError(t, json.Unmarshal([]byte(body), &detail))
		require.NotEqual(t, "failed", detail.Status)
		return detail.Status == "succeeded"
	}, 60*time.Second, 50*time.Millisecond)
	require.JSONEq(t, `"echo: hi"`, string(detail.Output))
	require.Eventually(t, func() bool {
		code, _ := get("/api/v1/traces/" + detail.TraceID)
		return detail.TraceID != "" && code == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "the app, told where Loupe is (POST /api/notify), sent the run's trace")

	code, page := get("/actions")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `data-app="shop" data-live`)
	require.Contains(t, page, `data-action="shop:/flow/echo"`)

	app.Kill(t)
	require.Eventually(t, func() bool {
		code, page = get("/actions")
		return code == http.StatusOK && strings.Contains(page, `data-app="shop">`) && strings.Contains(page, "gone since")
	}, 30*time.Second, 50*time.Millisecond, "the app is shown as gone, not as an error")
	require.NotContains(t, page, `data-action="shop:/flow/echo"`)
}

// TestStartRunsAGenkitAppAndResumesItsInterrupt runs `devui start -- node app.mjs` on the real
// Genkit JS app: the app's traces come to Loupe (GENKIT_TELEMETRY_SERVER), its actions are listed
// once its runtime file appears, its prompt interrupts into Loupe's inbox and, answered there, goes
// on in the app. Killed, the app is started again and found again under the same name.
func TestStartRunsAGenkitAppAndResumesItsInterrupt(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	addr := freePort(t)
	// The app runs in its own folder, where Genkit JS finds its package.json.
	runStart(t, "--addr", addr, "--database-url", storetest.NewURL(t), "--data-dir", t.TempDir(), "--log-level", "error",
		"--genkit-project", dir, "--", "sh", "-c", "cd '"+dir+"' && APP_NAME=started exec node app.mjs")
	base := "http://" + addr
	listed := func() bool {
		var list struct {
			Actions []struct {
				Key string `json:"key"`
			} `json:"actions"`
		}
		getJSON(t, base+"/api/v1/actions", &list)
		for _, a := range list.Actions {
			if a.Key == "started:/prompt/transferPrompt" {
				return true
			}
		}
		return false
	}
	require.Eventually(t, listed, time.Minute, 100*time.Millisecond, "the app's actions are listed")

	var run struct {
		ID       string          `json:"id"`
		Status   string          `json:"status"`
		TraceID  string          `json:"trace_id"`
		Messages json.RawMessage `json:"messages"`
	}
	require.Equal(t, http.StatusCreated, postJSON(t, base+"/api/v1/runs", `{"action":"started:/prompt/transferPrompt","input":{"to":"Bob","amount":50}}`, &run))
	var list struct {
		Interrupts []struct {
			ID    string `json:"id"`
			RunID string `json:"run_id"`
		} `json:"interrupts"`
	}
	require.Eventually(t, func() bool {
		getJSON(t, base+"/api/v1/interrupts?status=pending", &list)
		return len(list.Interrupts) == 1 && list.Interrupts[0].RunID == run.ID
	}, time.Minute, 50*time.Millisecond, "the app's interrupt reached the inbox")
	require.Equal(t, http.StatusOK, postJSON(t, base+"/api/v1/interrupts/"+list.Interrupts[0].ID+"/resolve", `{"action":"respond","output":{"approved":true}}`, nil))
	require.Eventually(t, func() bool {
		getJSON(t, base+"/api/v1/runs/"+run.ID, &run)
		require.NotEqual(t, "failed", run.Status)
		return run.Status == "succeeded"
	}, time.Minute, 50*time.Millisecond)
	require.Contains(t, string(run.Messages), `Done: approveTransfer={\"approved\":true}`, "the app's model answered after the reviewer")
	require.NotEmpty(t, run.TraceID)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/api/v1/traces/" + run.TraceID)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "the app sent the run's trace to Loupe")

	// Kill the app (its pid is in its runtime file): devui start runs it again, and Loupe finds
	// the new one.
	pidOf := func() int {
		files, _ := filepath.Glob(filepath.Join(dir, ".genkit", "runtimes", "*.json"))
		for _, f := range files {
			var rt struct {
				PID int `json:"pid"`
			}
			if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &rt) == nil && rt.PID > 0 && syscall.Kill(rt.PID, 0) == nil {
				return rt.PID
			}
		}
		return 0
	}
	first := pidOf()
	require.NotZero(t, first)
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		p := pidOf()
		return p != 0 && p != first
	}, time.Minute, 100*time.Millisecond, "devui start ran the app again")
	var echo struct {
		ID     string          `json:"id"`
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	require.Eventually(t, func() bool {
		return listed() && postJSON(t, base+"/api/v1/runs", `{"action":"started:/flow/echo","input":"again"}`, &echo) == http.StatusCreated
	}, time.Minute, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		getJSON(t, base+"/api/v1/runs/"+echo.ID, &echo)
		require.NotEqual(t, "failed", echo.Status)
		return echo.Status == "succeeded"
	}, time.Minute, 50*time.Millisecond, "the restarted app runs the flow")
	require.JSONEq(t, `"echo: again"`, string(echo.Output))
}
