package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/engine"
)

// TestBrowserPromptPlaygroundEditsRendersRunsAndSaves drives the playground on a .prompt file's
// page: the template and the temperature are edited, Render shows the edited messages and writes
// the field into the front matter; Run streams the scripted model's chunks into the page, then
// its text and usage, with a link to its trace, and the run appears among the prompt's last runs
// (edited, with its tokens) without a reload; a broken template is said inline with its line;
// Save writes the file through the page's CSRF token. No console error, no CSP violation.
func TestBrowserPromptPlaygroundEditsRendersRunsAndSaves(t *testing.T) {
	t.Parallel()
	b := setupPrompts(t, opts{dev: true, stack: true})
	br := browsertest.New(t)
	const pg = `[data-prompt-playground]`
	edited := strings.Replace(greetPrompt, "Hello {{name}}.", "Howdy {{name}}, from the playground.", 1)
	setField := func(sel, value string) chromedp.Action {
		return chromedp.Evaluate(`(() => { const el = document.querySelector(`+jsString(sel)+`); el.value = `+jsString(value)+`;
			el.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil)
	}
	var rendered []struct {
		Role string `json:"role"`
		Text string `json:"text"`
	}
	var source, modelLine, chunks, result, usage, traceHref string
	var row struct {
		Edited bool   `json:"edited"`
		Tokens string `json:"tokens"`
		Output string `json:"output"`
	}
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+actionURL("/prompt/greet")),
		// The page's script marks a field edited on its input event: the edits wait for it, or,
		// on a loaded machine, an edit made before it ran is not sent (seen under make stress).
		wait(`document.querySelector('`+pg+`')?.dataset.ready === "true"`),
		setField(pg+` textarea[name="source"]`, edited),
		setField(pg+` input[name="temperature"]`, "0.9"),
		setField(pg+` textarea[name="input"]`, `{"name":"Ann"}`),
		browsertest.Click(pg+` button[data-playground-render]`),
		wait(`document.querySelectorAll('`+pg+` [data-rendered-messages] .rendered-message').length === 2`),
		chromedp.Evaluate(`[...document.querySelectorAll('`+pg+` .rendered-message')].map(m => ({role: m.dataset.role, text: m.querySelector("pre").textContent.trim()}))`, &rendered),
		chromedp.Evaluate(`document.querySelector('`+pg+` textarea[name="source"]').value`, &source),
		chromedp.Text(pg+` [data-rendered-model]`, &modelLine, chromedp.ByQuery),

		browsertest.Click(pg+` button[data-playground-run]`),
		wait(`document.querySelector('`+pg+` [data-run-state]').textContent === "done"`),
		chromedp.Text(pg+` [data-run-chunks]`, &chunks, chromedp.ByQuery),
		chromedp.Text(pg+` [data-run-result]`, &result, chromedp.ByQuery),
		chromedp.Text(pg+` [data-run-usage]`, &usage, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('`+pg+` [data-run-links] a[href^="/traces/"]')?.getAttribute("href") ?? ""`, &traceHref),
	))
	require.Equal(t, "system", rendered[0].Role)
	require.Equal(t, "user", rendered[1].Role)
	require.Equal(t, "Howdy Ann, from the playground.", rendered[1].Text, "the edited template, rendered")
	require.Contains(t, source, "temperature: 0.9", "the field is written into the front matter")
	require.Contains(t, modelLine, "pg/echo")
	require.Equal(t, "echo: Howdy Ann, from the playground. (t=0.9)", strings.TrimSpace(chunks), "the chunks, streamed into the page")
	require.Equal(t, "echo: Howdy Ann, from the playground. (t=0.9)", strings.TrimSpace(result))
	require.Contains(t, usage, "7 in / 3 out")
	require.Regexp(t, `^/traces/[0-9a-f]{32}$`, traceHref)
	traceID := strings.TrimPrefix(traceHref, "/traces/")

	var saved, errText string
	var editedFlags []bool
	var comparedURL string
	require.NoError(t, chromedp.Run(br.Ctx,
		// The list is refreshed in place once the run's trace is stored.
		wait(`document.querySelector('[data-testid="prompt-runs"] tr[data-trace="`+traceID+`"]') !== null`),
		chromedp.Evaluate(`(() => { const r = document.querySelector('[data-testid="prompt-runs"] tr[data-trace="`+traceID+`"]');
			return {edited: r.querySelector(".badge")?.textContent === "edited", tokens: r.children[5].textContent, output: r.querySelector("[data-run-output-preview]").textContent}; })()`, &row),

		browsertest.Click(pg+` button[data-playground-save]`),
		wait(`document.querySelector('`+pg+` [data-playground-status]').textContent.startsWith("saved")`),
		chromedp.Text(pg+` [data-playground-status]`, &saved, chromedp.ByQuery),

		// Run again, the saved file as it is, then compare the two runs' traces.
		browsertest.Click(pg+` button[data-playground-run]`),
		wait(`document.querySelectorAll('[data-testid="prompt-runs"] tbody tr').length === 2`),
		chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="prompt-runs"] tbody tr')].map(r => r.querySelector(".badge")?.textContent === "edited")`, &editedFlags),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="prompt-runs"] input[name="trace"]').forEach(c => { c.checked = true; }); true`, nil),
		browsertest.Click(`[data-compare-form] button[type="submit"]`),
		chromedp.WaitVisible(`[data-testid="compare-summary"]`, chromedp.ByQuery),
		chromedp.Location(&comparedURL),
		chromedp.Navigate(b.url+actionURL("/prompt/greet")),
		wait(`document.querySelector('`+pg+`')?.dataset.ready === "true"`),

		setField(pg+` textarea[name="source"]`, strings.Replace(greetPrompt, "Hello {{name}}.", "{{#if name}}Hello{{/each}}", 1)),
		browsertest.Click(pg+` button[data-playground-render]`),
		wait(`!document.querySelector('`+pg+` [data-playground-error]').hidden`),
		chromedp.Text(pg+` [data-playground-error]`, &errText, chromedp.ByQuery),
	))
	require.True(t, row.Edited, "the run is marked edited")
	require.Equal(t, "7 / 3", row.Tokens)
	require.Equal(t, "echo: Howdy Ann, from the playground. (t=0.9)", row.Output)
	require.Equal(t, "saved to greet.prompt", saved)
	require.Equal(t, []bool{false, true}, editedFlags, "the newest run ran the saved file, the first an edit")
	require.Contains(t, comparedURL, "/traces/compare?trace=", "the two picked runs open in the trace comparison")
	require.Equal(t, 2, strings.Count(comparedURL, "trace="))
	require.Contains(t, comparedURL, traceID)
	onDisk, err := os.ReadFile(filepath.Join(b.dir, "greet.prompt"))
	require.NoError(t, err)
	require.Contains(t, string(onDisk), "Howdy {{name}}, from the playground.")
	require.Contains(t, string(onDisk), "temperature: 0.9")
	require.Contains(t, errText, "greet.prompt:13: template:", "the broken template's line, inline")

	var problems []string
	for _, p := range br.Problems() {
		if !strings.Contains(p, "status of 422") { // the broken render's answer, logged by Chromium
			problems = append(problems, p)
		}
	}
	require.Empty(t, problems)
}

// TestPromptPageOffersCopyNotSaveOutsideDevMode: outside dev mode an admin's prompt page has the
// playground with Copy and no Save, and says why; a prompt defined in Go has none, and says why.
func TestPromptPageOffersCopyNotSaveOutsideDevMode(t *testing.T) {
	t.Parallel()
	b := setupPrompts(t, opts{dev: false, stack: true, define: []func(*engine.Registry){func(reg *engine.Registry) {
		engine.DefinePrompt(reg, "coded", "A prompt in Go.", func(struct{}) (string, error) { return "hi", nil }, engine.PromptConfig{Model: "pg/echo"})
	}}})
	admin := b.userToken(t, "root", "admin")
	resp, body := get(t, b.url+actionURL("/prompt/greet"), "Authorization", "Bearer "+admin, "Accept", "text/html")
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, body, "data-prompt-playground")
	require.Contains(t, body, "data-playground-copy")
	require.NotContains(t, body, "data-playground-save")
	require.Contains(t, body, "devui serve --dev")
	require.Contains(t, body, "Hello {{name}}.", "the file's text is in the editor")

	resp, body = get(t, b.url+actionURL("/prompt/coded"), "Authorization", "Bearer "+admin, "Accept", "text/html")
	require.Equal(t, 200, resp.StatusCode)
	require.NotContains(t, body, "data-prompt-playground", "a prompt defined in Go has no file to edit")
	require.Contains(t, body, "data-prompt-note")
	require.Contains(t, body, "defined in Go code")
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "$", `\$`)
	return "`" + r.Replace(s) + "`"
}
