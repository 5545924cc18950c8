package server

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
)

// TestBrowserActionsPlaygroundRunsInPlace: on the Actions page a tool runs at once with its output
// shown in place; a streaming flow's chunks appear as they come, then its result, with links to its
// run and trace, and it is listed among the flow's last runs; a flow that stops at an interrupt
// says so, with a link to answer it in the inbox.
func TestBrowserActionsPlaygroundRunsInPlace(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	br := browsertest.New(t)
	article := func(key string) string { return `article[data-action="` + key + `"]` }
	runHere := func(key, input string) chromedp.Tasks {
		return chromedp.Tasks{
			chromedp.SetValue(article(key)+` textarea[name="input"]`, input, chromedp.ByQuery),
			chromedp.Click(article(key)+` button[data-run-here]`, chromedp.ByQuery),
		}
	}
	var toolOut, chunks, flowOut, links, interrupted, inboxLink, bounds string
	var fromField int
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/actions"),
		chromedp.WaitVisible(article("/tool/search")+` button[data-run-here]`, chromedp.ByQuery),
		runHere("/tool/search", `{"query":"durable retries"}`),
		wait(`document.querySelector('`+article("/tool/search")+` [data-run-state]').textContent === "done"`),
		chromedp.Text(article("/tool/search")+` [data-run-result]`, &toolOut, chromedp.ByQuery),

		// The input form built from the schema: the field writes the JSON that is sent.
		chromedp.WaitVisible(article("/flow/countdown")+` [data-testid="schema-form"] input[data-pointer="/from"]`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => { const el = document.querySelector('`+article("/flow/countdown")+` input[data-pointer="/from"]'); el.value = "3"; el.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil),
		chromedp.Evaluate(`JSON.parse(document.querySelector('`+article("/flow/countdown")+` textarea[name="input"]').value).from`, &fromField),
		chromedp.Evaluate(`document.querySelector('`+article("/flow/countdown")+` [data-field="/from"] .bounds').textContent`, &bounds),
		chromedp.Click(article("/flow/countdown")+` button[data-run-here]`, chromedp.ByQuery),
		wait(`document.querySelector('`+article("/flow/countdown")+` [data-run-state]').textContent === "done"`),
		chromedp.Text(article("/flow/countdown")+` [data-run-chunks]`, &chunks, chromedp.ByQuery),
		chromedp.Text(article("/flow/countdown")+` [data-run-result]`, &flowOut, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('`+article("/flow/countdown")+` [data-run-links] a')].map(a => a.getAttribute("href")).join(" ")`, &links),

		runHere("/flow/travelAgent", `{"destination":"Lisbon"}`),
		wait(`document.querySelector('`+article("/flow/travelAgent")+` [data-run-state]').textContent === "failed"`),
		chromedp.Text(article("/flow/travelAgent")+` [data-run-result]`, &interrupted, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('`+article("/flow/travelAgent")+` [data-run-links] a')].map(a => a.textContent).join(" ")`, &inboxLink),
	))
	require.Contains(t, toolOut, "Notes on durable retries")
	require.Equal(t, 3, fromField, "the field wrote the JSON")
	require.NotEmpty(t, bounds, "a number field carries its bounds")
	require.Equal(t, []string{`{"n":3}`, `{"n":2}`, `{"n":1}`}, strings.Fields(chunks), "the flow's chunks, in order")
	require.Equal(t, "liftoff", flowOut)
	require.Contains(t, links, "/runs/")
	require.Contains(t, links, "/traces/")
	require.Contains(t, interrupted, "waits in Loupe's inbox")
	require.Contains(t, inboxLink, "answer it in the inbox")

	var last int
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/actions"),
		chromedp.WaitVisible(article("/flow/countdown"), chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('`+article("/flow/countdown")+` [data-testid="last-runs"] li').length`, &last),
	))
	require.Equal(t, 1, last, "the flow's run is listed beside its form")
	require.Empty(t, br.Problems())
}
