package devui_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/devui"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/scripted"
)

// TestHandlerServesTheUIAndRunsTheAppsFlowsInAnotherServer mounts Loupe in a program's own HTTP
// server: before Start it answers 503; started, it serves the pages and the API, and executes the
// app's flow; stopped, it answers 503 again.
func TestHandlerServesTheUIAndRunsTheAppsFlowsInAnotherServer(t *testing.T) {
	t.Parallel()
	app := loupe.New()
	scripted.Define(app, "echo", func(req *ai.ModelRequest) (scripted.Turn, error) {
		return scripted.Text("echo: " + req.Messages[len(req.Messages)-1].Text()), nil
	})
	loupe.DefineFlow(app, "echo", func(ctx context.Context, in string) (string, error) {
		return loupe.GenerateText(ctx, app, ai.WithModelName("echo"), ai.WithPrompt(in))
	})
	h := devui.NewHandler(app, devui.HandlerOptions{DatabaseURL: storetest.NewURL(t), Dev: true, Workers: 2, LogLevel: "error"})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Stop)

	resp, err := http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "not started yet")

	require.NoError(t, h.Start(context.Background()))
	require.Error(t, h.Start(context.Background()), "a second Start fails")
	resp, err = http.Get(srv.URL + "/")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), "Loupe")

	resp, err = http.Post(srv.URL+"/api/v1/runs", "application/json", strings.NewReader(`{"action":"echo","input":"hi"}`))
	require.NoError(t, err)
	var run struct {
		ID     string          `json:"id"`
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&run))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Eventually(t, func() bool {
		resp, err := http.Get(srv.URL + "/api/v1/runs/" + run.ID)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&run) == nil && run.Status == "succeeded"
	}, time.Minute, 50*time.Millisecond, "the app's run never succeeded")
	require.JSONEq(t, `"echo: hi"`, string(run.Output))

	h.Stop()
	h.Stop()
	resp, err = http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "stopped")
}

// A program serving Loupe from its own HTTP server, on a port of its own.
func ExampleNewHandler() {
	app := loupe.New()
	// … loupe.DefineFlow(app, …) …
	h := devui.NewHandler(app, devui.HandlerOptions{Dev: true})
	if err := h.Start(context.Background()); err != nil {
		return
	}
	defer h.Stop()
	_ = http.ListenAndServe("127.0.0.1:4000", h)
}
