package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestServeRunsAnotherProgramsFlowThroughItsWorker runs a user's program as `worker` and devui
// as `serve --dev --no-demo`, two programs with different actions, on one database: serve lists the
// worker's flow, starts it, and approves its interrupt through its API; the worker executes it.
func TestServeRunsAnotherProgramsFlowThroughItsWorker(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	reg := engine.NewRegistry()
	require.NoError(t, demo.Register(bridge.NewApp(reg).(*loupe.App), demo.Config{}))
	agents := &Program{Name: "agents", Registry: reg}
	done := make(chan error, 2)
	go func() {
		done <- Run(ctx, agents, []string{"worker", "--workers", "2", "--database-url", dbURL, "--data-dir", t.TempDir(), "--log-level", "error"})
	}()
	addr := freePort(t)
	go func() {
		done <- run(ctx, []string{"serve", "--dev", "--no-demo", "--addr", addr, "--database-url", dbURL, "--data-dir", t.TempDir(), "--log-level", "error"})
	}()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(60 * time.Second):
				t.Fatal("a command did not stop after its context ended")
			}
		}
	})
	url := "http://" + addr
	api := func(method, path, body string, out any) int {
		req, err := http.NewRequest(method, url+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		if out != nil {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
		}
		return resp.StatusCode
	}
	require.Eventually(t, func() bool {
		var list struct {
			Actions []struct {
				Key string `json:"key"`
			} `json:"actions"`
		}
		if api("GET", "/api/v1/actions", "", &list) != http.StatusOK {
			return false
		}
		for _, a := range list.Actions {
			if a.Key == "/flow/transferMoney" {
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "serve lists the flow the worker announced")

	var run struct {
		ID string `json:"id"`
	}
	require.Equal(t, http.StatusCreated, api("POST", "/api/v1/runs", `{"action":"transferMoney","input":{"to":"bob","amount":7,"currency":"EUR"}}`, &run))
	var pending struct {
		Interrupts []struct {
			ID    string `json:"id"`
			RunID string `json:"run_id"`
		} `json:"interrupts"`
	}
	require.Eventually(t, func() bool {
		api("GET", "/api/v1/interrupts?status=pending", "", &pending)
		return len(pending.Interrupts) == 1
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, run.ID, pending.Interrupts[0].RunID)
	require.Equal(t, http.StatusOK, api("POST", "/api/v1/interrupts/"+pending.Interrupts[0].ID+"/resolve", `{"action":"approve"}`, nil))
	var detail struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	require.Eventually(t, func() bool {
		api("GET", "/api/v1/runs/"+run.ID, "", &detail)
		require.NotEqual(t, "failed", detail.Status)
		return detail.Status == "succeeded"
	}, 60*time.Second, 50*time.Millisecond)
	require.Contains(t, string(detail.Output), "sent 7 EUR to bob")
}
