package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestServeDevReloadsPromptFilesAndShowsABrokenOne serves a prompts directory with
// serve --dev --prompts: the prompt is in the catalogue; a rewrite that breaks its front matter
// is picked up without a restart and shown, with file and line, in the catalogue API and on the
// Actions page; fixing the file brings the prompt back with its new description.
func TestServeDevReloadsPromptFilesAndShowsABrokenOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "greet.prompt")
	write := func(src string) {
		require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
		later := time.Now().Add(time.Duration(len(src)) * time.Second) // a new mtime, even within the clock's resolution
		require.NoError(t, os.Chtimes(file, later, later))
	}
	write("---\nmodel: m\ndescription: Greets.\ninput:\n  schema:\n    name: string\n---\nHello {{name}}.\n")

	ctx, cancel := context.WithCancel(context.Background())
	addr := freePort(t)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--dev", "--no-demo", "--prompts", dir, "--addr", addr, "--database-url", storetest.NewURL(t),
			"--data-dir", t.TempDir(), "--log-level", "error"})
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
	base := "http://" + addr
	// greet is the catalogue's /prompt/greet, or nil.
	greet := func() map[string]any {
		resp, err := http.Get(base + "/api/v1/actions")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var list struct {
			Actions []map[string]any `json:"actions"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
			return nil
		}
		for _, a := range list.Actions {
			if a["key"] == "/prompt/greet" {
				return a
			}
		}
		return nil
	}
	require.Eventually(t, func() bool { a := greet(); return a != nil && a["description"] == "Greets." }, 60*time.Second, 50*time.Millisecond)
	a := greet()
	require.JSONEq(t, `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`, mustJSON(t, a["inputSchema"]))

	write("---\nmodel: m\ninput: [\n---\nHello.\n")
	var loadErr string
	require.Eventually(t, func() bool {
		a := greet()
		if a == nil {
			return false
		}
		pm, _ := a["metadata"].(map[string]any)["prompt"].(map[string]any)
		loadErr, _ = pm["loadError"].(string)
		return loadErr != ""
	}, 30*time.Second, 50*time.Millisecond, "the broken file is reloaded without a restart")
	require.True(t, strings.HasPrefix(loadErr, file+":3: front matter:"), loadErr)

	resp, err := http.Get(base + "/actions")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), "Did not load: "+file+":3: front matter:")

	write("---\nmodel: m\ndescription: Greets warmly.\n---\nHello, friend.\n")
	require.Eventually(t, func() bool { a := greet(); return a != nil && a["description"] == "Greets warmly." }, 30*time.Second, 50*time.Millisecond)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestRunAndActionsTakePrompts: myagent actions --prompts lists a file's prompt, and
// myagent run /prompt/tale --prompts runs it (its model is the program's teller) to the end; an
// input its front matter's schema refuses is an error naming the field.
func TestRunAndActionsTakePrompts(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tale.prompt"),
		[]byte("---\nmodel: teller\ndescription: Tells a tale.\ninput:\n  schema:\n    topic: string\n---\nA tale about {{topic}}.\n"), 0o644))

	out, _, err := runMyagent(t, "", "actions", "--prompts", dir)
	require.NoError(t, err)
	require.Contains(t, out, "/prompt/tale")
	require.Contains(t, out, "Tells a tale.")

	out, _, err = runMyagent(t, dbURL, "run", "/prompt/tale", "--prompts", dir, "--input", `{"topic":"cats"}`, "--wait")
	require.NoError(t, err)
	require.Contains(t, out, "once upon a time")

	_, _, err = runMyagent(t, dbURL, "run", "/prompt/tale", "--prompts", dir, "--input", `{"topic":7}`, "--wait")
	require.ErrorContains(t, err, "input/topic: must be a string")
}
