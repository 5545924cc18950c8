package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestServeAttachesToARunningGenkitApp starts a real Genkit JS app first, then
// `serve --genkit-project` on its folder: the app's actions are listed and run through the API,
// the Actions page shows the app under its name, and once the app is killed it shows it as gone,
// still answering 200.
func TestServeAttachesToARunningGenkitApp(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	app := genkitapptest.Start(t, dir, "shop")
	dbURL := storetest.NewURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	addr := freePort(t)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--dev", "--no-demo", "--addr", addr, "--database-url", dbURL, "--data-dir", t.TempDir(),
			"--log-level", "error", "--genkit-project", dir})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Fatal("serve did not stop after its context ended")
		}
	})
	url := "http://" + addr
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
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	require.Eventually(t, func() bool {
		_, body := get("/api/v1/runs/" + created.ID)
		require.NoError(t, json.Unmarshal([]byte(body), &detail))
		require.NotEqual(t, "failed", detail.Status)
		return detail.Status == "succeeded"
	}, 60*time.Second, 50*time.Millisecond)
	require.JSONEq(t, `"echo: hi"`, string(detail.Output))

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
