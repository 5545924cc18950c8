package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/store"
)

// greetPrompt is the playground tests' .prompt file: its model echoes what it is sent.
const greetPrompt = `---
model: pg/echo
description: Greets someone.
config:
  temperature: 0.2
input:
  schema:
    name: string
---
{{role "system"}}
You greet people.
{{role "user"}}
Hello {{name}}.
`

// promptBundle is a server whose registry loads a prompts directory holding greet.prompt, a
// prompt in a subdirectory (sub/inner), and a model, pg/echo, that answers with the text of the
// last message and the temperature it was given, streamed in three chunks, with usage.
type promptBundle struct {
	*bundle
	dir string
}

func setupPrompts(t *testing.T, o opts) *promptBundle {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "greet.prompt"), []byte(greetPrompt), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "inner.prompt"), []byte("---\nmodel: pg/echo\n---\nInner {{name}}.\n"), 0o644))
	o.define = append(o.define, func(reg *engine.Registry) {
		scripted.DefineFunc(reg, "pg/echo", func(req *engine.ModelRequest) (scripted.Turn, error) {
			text := strings.TrimSpace(req.Messages[len(req.Messages)-1].Text())
			temp := "none"
			if cfg, ok := req.Config.(map[string]any); ok && cfg["temperature"] != nil {
				temp = fmt.Sprint(cfg["temperature"])
			}
			answer := "echo: " + text + " (t=" + temp + ")"
			third := len(answer) / 3
			return scripted.Text(answer).WithUsage(7, 3).WithChunks(
				[]*engine.Part{engine.NewTextPart(answer[:third])},
				[]*engine.Part{engine.NewTextPart(answer[third : 2*third])},
				[]*engine.Part{engine.NewTextPart(answer[2*third:])}), nil
		})
		_, err := engine.LoadPromptDir(reg, dir)
		require.NoError(t, err)
	})
	return &promptBundle{bundle: setup(t, o), dir: dir}
}

type renderResponse struct {
	Source   string           `json:"source"`
	Messages []engine.Message `json:"messages"`
	Model    string           `json:"model"`
	Config   map[string]any   `json:"config"`
	Tools    []string         `json:"tools"`
}

// TestPromptPlaygroundRendersAndRunsAnEdit: render takes the edited source and the model fields
// (written into its front matter) and answers the messages and settings without running
// anything; run streams the model's chunks, then the result, with the trace id; the prompt's
// last runs list it, marked edited, with its tokens; a prompt in a subdirectory is addressed with
// its slash escaped.
func TestPromptPlaygroundRendersAndRunsAnEdit(t *testing.T) {
	t.Parallel()
	b := setupPrompts(t, opts{dev: true, stack: true})
	edited := strings.Replace(greetPrompt, "Hello {{name}}.", "Good evening, {{name}}!", 1)
	body, err := json.Marshal(map[string]any{"source": edited, "input": map[string]any{"name": "Ann"}, "temperature": 0.7, "tools": []string{"search"}})
	require.NoError(t, err)
	var r renderResponse
	require.Equal(t, http.StatusOK, call(t, "POST", b.url+"/api/v1/prompts/greet/render", string(body), &r))
	require.Len(t, r.Messages, 2)
	require.Equal(t, engine.RoleSystem, r.Messages[0].Role)
	require.Equal(t, "Good evening, Ann!", strings.TrimSpace(r.Messages[1].Text()))
	require.Equal(t, "pg/echo", r.Model)
	require.Equal(t, 0.7, r.Config["temperature"], "the field is written into the front matter")
	require.Equal(t, []string{"search"}, r.Tools)
	require.Contains(t, r.Source, "temperature: 0.7")
	require.Contains(t, r.Source, "Good evening, {{name}}!")

	var inner renderResponse
	require.Equal(t, http.StatusOK, call(t, "POST", b.url+"/api/v1/prompts/sub%2Finner/render", `{"input":{"name":"Bo"}}`, &inner))
	require.Equal(t, "Inner Bo.", strings.TrimSpace(inner.Messages[0].Text()))

	body, err = json.Marshal(map[string]any{"source": edited, "input": map[string]any{"name": "Ann"}, "temperature": 0.7})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, b.url+"/api/v1/prompts/greet/run?stream=true", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	rawBytes, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	raw := string(rawBytes)
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
	traceID := resp.Header.Get("X-Genkit-Trace-Id")
	require.Len(t, traceID, 32)
	lines := strings.Split(strings.TrimSpace(raw), "\n")
	require.Len(t, lines, 4, "three chunks, then the result: %s", raw)
	var streamed strings.Builder
	for _, l := range lines[:3] {
		var ch engine.ModelResponseChunk
		require.NoError(t, json.Unmarshal([]byte(l), &ch), l)
		streamed.WriteString(ch.Text())
	}
	require.Equal(t, "echo: Good evening, Ann! (t=0.7)", strings.TrimSpace(streamed.String()))
	var final struct {
		Result struct {
			Text  string `json:"text"`
			Usage struct {
				InputTokens int `json:"inputTokens"`
			} `json:"usage"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[3]), &final))
	require.Equal(t, streamed.String(), final.Result.Text)
	require.Equal(t, 7, final.Result.Usage.InputTokens)

	var got apiPrompt
	require.Eventually(t, func() bool {
		require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/prompts/greet", "", &got))
		return len(got.Runs) == 1 && got.Runs[0].OutputTokens == 3
	}, 30e9, 50e6, "the run is among the prompt's last runs: %+v", got.Runs)
	require.Equal(t, traceID, got.Runs[0].TraceID)
	require.True(t, got.Runs[0].Edited, "run with an edit")
	require.Equal(t, store.RunSucceeded, got.Runs[0].Status)
	require.Equal(t, "echo: Good evening, Ann! (t=0.7)", got.Runs[0].Output)
	require.Equal(t, "greet.prompt", got.File)
	require.Equal(t, greetPrompt, got.Source, "running an edit does not save it")
	require.True(t, got.Editable)
}

// TestPromptPlaygroundSavesInDevModeAndTheReloadedPromptUsesIt: in dev mode an admin's save
// writes the prompt's own file (the model fields written into its front matter), leaves no
// temporary file behind, and the registered prompt renders and runs the new text at once.
func TestPromptPlaygroundSavesInDevModeAndTheReloadedPromptUsesIt(t *testing.T) {
	t.Parallel()
	b := setupPrompts(t, opts{dev: true, stack: true})
	edited := strings.Replace(greetPrompt, "Hello {{name}}.", "Saved hello to {{name}}.", 1)
	body, err := json.Marshal(map[string]any{"source": edited, "max_output_tokens": 64})
	require.NoError(t, err)
	var saved struct {
		File   string `json:"file"`
		Source string `json:"source"`
	}
	require.Equal(t, http.StatusOK, call(t, "PUT", b.url+"/api/v1/prompts/greet/source", string(body), &saved))
	require.Equal(t, "greet.prompt", saved.File)
	onDisk, err := os.ReadFile(filepath.Join(b.dir, "greet.prompt"))
	require.NoError(t, err)
	require.Equal(t, saved.Source, string(onDisk))
	require.Contains(t, string(onDisk), "Saved hello to {{name}}.")
	require.Contains(t, string(onDisk), "maxOutputTokens: 64")
	entries, err := os.ReadDir(b.dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), ".loupe-save-"), "no temporary file is left: %s", e.Name())
	}

	p, ok := b.runs.Registry().Lookup("/prompt/greet").(*engine.FilePrompt)
	require.True(t, ok)
	msgs, err := p.Render(json.RawMessage(`{"name":"Cy"}`), nil)
	require.NoError(t, err)
	require.Equal(t, "Saved hello to Cy.", strings.TrimSpace(msgs[1].Text()), "the registered prompt was reloaded")

	var out struct {
		Result struct {
			Text string `json:"text"`
		} `json:"result"`
	}
	require.Equal(t, http.StatusOK, call(t, "POST", b.url+"/api/runAction", `{"key":"/prompt/greet","input":{"name":"Cy"}}`, &out))
	require.Equal(t, "echo: Saved hello to Cy. (t=0.2)", strings.TrimSpace(out.Result.Text), "and runs the saved text")
}

// TestPromptPlaygroundSaveIsRefusedOutsideDevModeForNonAdminsAndWithoutCSRF: outside dev mode a
// reviewer's save is 403 for the role and an admin's 403 for the mode; in dev mode a browser's
// save with a wrong CSRF token, or from another site, is 403. The file is never written.
func TestPromptPlaygroundSaveIsRefusedOutsideDevModeForNonAdminsAndWithoutCSRF(t *testing.T) {
	t.Parallel()
	body := `{"source":"---\nmodel: pg/echo\n---\nOverwritten.\n"}`
	unchanged := func(b *promptBundle) {
		t.Helper()
		onDisk, err := os.ReadFile(filepath.Join(b.dir, "greet.prompt"))
		require.NoError(t, err)
		require.Equal(t, greetPrompt, string(onDisk), "the file is not written")
	}

	b := setupPrompts(t, opts{dev: false, stack: true})
	reviewer := b.userToken(t, "rita", store.RoleReviewer)
	admin := b.userToken(t, "root", store.RoleAdmin)
	var e apiError
	require.Equal(t, http.StatusForbidden, call(t, "PUT", b.url+"/api/v1/prompts/greet/source", body, &e, "Authorization", "Bearer "+reviewer))
	require.Equal(t, "forbidden", e.Error.Code)
	e = apiError{}
	require.Equal(t, http.StatusForbidden, call(t, "PUT", b.url+"/api/v1/prompts/greet/source", body, &e, "Authorization", "Bearer "+admin))
	require.Equal(t, "dev_only", e.Error.Code, e.Error.Message)
	var r renderResponse
	require.Equal(t, http.StatusOK, call(t, "POST", b.url+"/api/v1/prompts/greet/render", `{"input":{"name":"Ann"}}`, &r, "Authorization", "Bearer "+reviewer),
		"a reviewer renders outside dev mode: only saving is refused")
	var got apiPrompt
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/prompts/greet", "", &got, "Authorization", "Bearer "+admin))
	require.False(t, got.Editable)
	unchanged(b)

	d := setupPrompts(t, opts{dev: true, stack: true})
	e = apiError{}
	require.Equal(t, http.StatusForbidden, call(t, "PUT", d.url+"/api/v1/prompts/greet/source", body, &e,
		"Origin", d.url, "Cookie", "loupe_csrf=aaaa", "X-CSRF-Token", "bbbb"))
	require.Equal(t, "csrf_failed", e.Error.Code, "a browser's request with a token that is not its cookie's")
	e = apiError{}
	require.Equal(t, http.StatusForbidden, call(t, "PUT", d.url+"/api/v1/prompts/greet/source", body, &e,
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"))
	require.NotEmpty(t, e.Error.Message, "another site's page is refused by the CSRF check's Sec-Fetch-Site rule")
	unchanged(d)
	require.Equal(t, http.StatusOK, call(t, "PUT", d.url+"/api/v1/prompts/greet/source", body, nil,
		"Origin", d.url, "Cookie", "loupe_csrf=aaaa", "X-CSRF-Token", "aaaa"), "the same request with the right token saves")
}

// TestPromptPlaygroundSaveNeverLeavesThePromptDirectory: a name that climbs out of the directory
// is no prompt (404) and writes nothing outside it, a path in the body is not a field (400), a
// prompt whose file is a link out of the directory is not written (409), and a prompt defined in
// Go has no file (409).
func TestPromptPlaygroundSaveNeverLeavesThePromptDirectory(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "outside.prompt")
	require.NoError(t, os.WriteFile(outside, []byte("---\nmodel: pg/echo\n---\nOutside.\n"), 0o644))
	b := setupPrompts(t, opts{dev: true, stack: true, define: []func(*engine.Registry){func(reg *engine.Registry) {
		engine.DefinePrompt(reg, "coded", "A prompt in Go.", func(struct{}) (string, error) { return "hi", nil }, engine.PromptConfig{Model: "pg/echo"})
	}}})
	require.NoError(t, os.Symlink(outside, filepath.Join(b.dir, "linked.prompt")))
	_, err := b.runs.Registry().PromptDirs()[0].Reload()
	require.NoError(t, err)
	require.NotNil(t, b.runs.Registry().Lookup("/prompt/linked"), "the link loads as a prompt")

	body := `{"source":"---\nmodel: pg/echo\n---\nPwned.\n"}`
	rel, err := filepath.Rel(b.dir, strings.TrimSuffix(outside, ".prompt"))
	require.NoError(t, err)
	for _, name := range []string{
		"..%2F" + filepath.Base(filepath.Dir(b.dir)), // a sibling of the directory
		strings.ReplaceAll(rel, "/", "%2F"),          // the outside file, relative
		"%2E%2E%2Fgreet",
		"..%2Fgreet.prompt",
		"%2Fetc%2Fpasswd",
	} {
		var e apiError
		code := call(t, "PUT", b.url+"/api/v1/prompts/"+name+"/source", body, &e)
		require.Contains(t, []int{http.StatusNotFound, http.StatusBadRequest}, code, "%s: %+v", name, e)
	}
	var e apiError
	require.Equal(t, http.StatusBadRequest, call(t, "PUT", b.url+"/api/v1/prompts/greet/source",
		`{"source":"x","file":"../outside.prompt"}`, &e), "a path is not a field of the body")
	e = apiError{}
	require.Equal(t, http.StatusConflict, call(t, "PUT", b.url+"/api/v1/prompts/linked/source", body, &e))
	require.Equal(t, "not_saved", e.Error.Code, e.Error.Message)
	e = apiError{}
	require.Equal(t, http.StatusConflict, call(t, "PUT", b.url+"/api/v1/prompts/coded/source", body, &e))
	require.Equal(t, "not_a_file", e.Error.Code)

	onDisk, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "---\nmodel: pg/echo\n---\nOutside.\n", string(onDisk), "nothing outside the directory was written")
	greet, err := os.ReadFile(filepath.Join(b.dir, "greet.prompt"))
	require.NoError(t, err)
	require.Equal(t, greetPrompt, string(greet))
}

// TestPromptPlaygroundBrokenTemplateIs422NamingTheLine: a template that does not compile, or a
// front matter that does not parse, is a 422 naming the file and the line, to render, run and
// save alike; the file is not written.
func TestPromptPlaygroundBrokenTemplateIs422NamingTheLine(t *testing.T) {
	t.Parallel()
	b := setupPrompts(t, opts{dev: true, stack: true})
	// Line 13 of the file: the block is closed by the wrong helper.
	broken := strings.Replace(greetPrompt, "Hello {{name}}.", "{{#if name}}Hello{{/each}}", 1)
	before, _, found := strings.Cut(broken, "{{#if")
	require.True(t, found)
	require.Equal(t, 13, strings.Count(before, "\n")+1)
	body, err := json.Marshal(map[string]any{"source": broken, "input": map[string]any{"name": "Ann"}})
	require.NoError(t, err)
	for _, c := range []struct{ method, path string }{
		{"POST", "/render"}, {"POST", "/run?stream=true"}, {"PUT", "/source"},
	} {
		var e apiError
		require.Equal(t, http.StatusUnprocessableEntity, call(t, c.method, b.url+"/api/v1/prompts/greet"+c.path, string(body), &e), c.path)
		require.Equal(t, "invalid_prompt", e.Error.Code)
		require.Contains(t, e.Error.Message, "greet.prompt:13: template:", c.path)
		require.EqualValues(t, 13, e.Error.Details["line"])
	}

	badYAML := strings.Replace(greetPrompt, "  temperature: 0.2", "  temperature: [0.2", 1)
	body, err = json.Marshal(map[string]any{"source": badYAML})
	require.NoError(t, err)
	var e apiError
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", b.url+"/api/v1/prompts/greet/render", string(body), &e))
	require.Contains(t, e.Error.Message, "greet.prompt:")
	require.Contains(t, e.Error.Message, "front matter")
	require.Positive(t, e.Error.Details["line"])

	onDisk, err := os.ReadFile(filepath.Join(b.dir, "greet.prompt"))
	require.NoError(t, err)
	require.Equal(t, greetPrompt, string(onDisk))
}
