package server

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/engine"
)

// TestBrowserActionsPlaygroundRunsInPlace: on an action's page a tool runs at once with its output
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
			browsertest.Click(article(key) + ` button[data-run-here]`),
		}
	}
	var toolOut, chunks, flowOut, links, interrupted, inboxLink, bounds, travelStart string
	var fromField int
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+actionURL("/tool/search")),
		chromedp.WaitVisible(article("/tool/search")+` button[data-run-here]`, chromedp.ByQuery),
		runHere("/tool/search", `{"query":"durable retries"}`),
		wait(`document.querySelector('`+article("/tool/search")+` [data-run-state]').textContent === "done"`),
		chromedp.Text(article("/tool/search")+` [data-run-result]`, &toolOut, chromedp.ByQuery),

		// The input form built from the schema: the field writes the JSON that is sent.
		chromedp.Navigate(b.url+actionURL("/flow/countdown")),
		chromedp.WaitVisible(article("/flow/countdown")+` [data-testid="schema-form"] input[data-pointer="/from"]`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => { const el = document.querySelector('`+article("/flow/countdown")+` input[data-pointer="/from"]'); el.value = "3"; el.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil),
		chromedp.Evaluate(`JSON.parse(document.querySelector('`+article("/flow/countdown")+` textarea[name="input"]').value).from`, &fromField),
		chromedp.Evaluate(`document.querySelector('`+article("/flow/countdown")+` [data-field="/from"] .bounds').textContent`, &bounds),
		browsertest.Click(article("/flow/countdown")+` button[data-run-here]`),
		wait(`document.querySelector('`+article("/flow/countdown")+` [data-run-state]').textContent === "done"`),
		chromedp.Text(article("/flow/countdown")+` [data-run-chunks]`, &chunks, chromedp.ByQuery),
		chromedp.Text(article("/flow/countdown")+` [data-run-result]`, &flowOut, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('`+article("/flow/countdown")+` [data-run-links] a')].map(a => a.getAttribute("href")).join(" ")`, &links),

		// The form starts from the required fields only: travelAgent's optional approve is not
		// pre-filled with false (which would take the deny path instead of asking).
		chromedp.Navigate(b.url+actionURL("/flow/travelAgent")),
		chromedp.WaitVisible(article("/flow/travelAgent")+` button[data-run-here]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('`+article("/flow/travelAgent")+` textarea[name="input"]').value`, &travelStart),
		runHere("/flow/travelAgent", `{"destination":"Lisbon"}`),
		// A durable run that stops to ask a person waits; it has not failed.
		wait(`document.querySelector('`+article("/flow/travelAgent")+` [data-run-state]').textContent === "waiting for a reviewer"`),
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
	require.Contains(t, interrupted, "bookFlight: ")
	require.NotContains(t, interrupted, "FAILED_PRECONDITION")
	require.Contains(t, inboxLink, "answer it in the inbox")
	require.NotContains(t, travelStart, "approve")

	var last int
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+actionURL("/flow/countdown")),
		chromedp.WaitVisible(article("/flow/countdown"), chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="last-runs"] tbody tr').length`, &last),
	))
	require.Equal(t, 1, last, "the flow's run is listed among its last runs")
	require.Empty(t, br.Problems())
}

// TestBrowserActionsPlaygroundStreamsModelsAndSaysWhatIsWrong: on their pages, a flow's chunks appear in place
// while it still runs, not only once it is done; a model is run from its own form, which starts
// from a request with one user message, and answers in place; a refused input is said in words at
// the field it names, by the page before it sends and by the server without JavaScript.
func TestBrowserActionsPlaygroundStreamsModelsAndSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	br := browsertest.New(t)
	article := func(key string) string { return `article[data-action="` + key + `"]` }
	var midway struct {
		State  string `json:"state"`
		Chunks string `json:"chunks"`
	}
	var modelOut, modelState, fieldErr, boxErr string
	var fieldInvalid bool
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+actionURL("/flow/countdown")),
		chromedp.WaitVisible(article("/flow/countdown")+` button[data-run-here]`, chromedp.ByQuery),
		// countdown sends a chunk every 200 ms: from 10 it runs about two seconds.
		chromedp.SetValue(article("/flow/countdown")+` textarea[name="input"]`, `{"from":10}`, chromedp.ByQuery),
		browsertest.Click(article("/flow/countdown")+` button[data-run-here]`),
		wait(`document.querySelector('`+article("/flow/countdown")+` [data-run-chunks]').textContent.includes('{"n":9}')`),
		chromedp.Evaluate(`({state: document.querySelector('`+article("/flow/countdown")+` [data-run-state]').textContent,
			chunks: document.querySelector('`+article("/flow/countdown")+` [data-run-chunks]').textContent})`, &midway),
		wait(`document.querySelector('`+article("/flow/countdown")+` [data-run-state]').textContent === "done"`),

		chromedp.Navigate(b.url+actionURL("/model/demo/travel")),
		chromedp.WaitVisible(article("/model/demo/travel")+` button[data-run-here]`, chromedp.ByQuery),
		browsertest.Click(article("/model/demo/travel")+` button[data-run-here]`),
		wait(`["done", "failed"].includes(document.querySelector('`+article("/model/demo/travel")+` [data-run-state]').textContent)`),
		chromedp.Text(article("/model/demo/travel")+` [data-run-state]`, &modelState, chromedp.ByQuery),
		chromedp.Text(article("/model/demo/travel")+` [data-run-result]`, &modelOut, chromedp.ByQuery),

		chromedp.Navigate(b.url+actionURL("/flow/travelAgent")),
		chromedp.WaitVisible(article("/flow/travelAgent")+` button[data-run-here]`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => { const el = document.querySelector('`+article("/flow/travelAgent")+` input[data-pointer="/destination"]'); el.value = ""; el.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil),
		browsertest.Click(article("/flow/travelAgent")+` button[data-run-here]`),
		chromedp.WaitVisible(article("/flow/travelAgent")+` [data-error-for="/destination"]`, chromedp.ByQuery),
		chromedp.Text(article("/flow/travelAgent")+` [data-error-for="/destination"]`, &fieldErr, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('`+article("/flow/travelAgent")+` [data-field="/destination"]').classList.contains("invalid")`, &fieldInvalid),
		chromedp.Evaluate(`document.querySelector('`+article("/flow/travelAgent")+` .form-error').textContent`, &boxErr),
	))
	require.NotEqual(t, "done", midway.State, "a chunk was shown while the flow still ran")
	require.Contains(t, midway.Chunks, `{"n":10}`)
	require.NotContains(t, midway.Chunks, `{"n":1}`+"\n", "the last chunk had not come yet: %q", midway.Chunks)
	require.Equal(t, "done", modelState, modelOut)
	require.Contains(t, modelOut, `"message"`, "the model's response, shown in place")
	require.Equal(t, "must not be empty", fieldErr)
	require.True(t, fieldInvalid, "the field is marked")
	require.Empty(t, strings.TrimSpace(boxErr), "the error is at its field, not repeated in the box")
	require.Empty(t, br.Problems())
}

// TestBrowserActionPageRunsInPlaceWithContext: on the actions list, typing filters the rows at
// once (and widens them again) and the address follows; a row opens the action's page, where a
// flow run in place with a context answers that context (the flow reads it), in the page without
// leaving it, and the run is then among the page's last runs.
func TestBrowserActionPageRunsInPlaceWithContext(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, define: []func(*engine.Registry){defineWhoAmI}})
	br := browsertest.New(t)
	const whoami = `article[data-action="/flow/whoami"]`
	type listState struct {
		Who       bool   `json:"who"`
		Countdown bool   `json:"countdown"`
		Count     string `json:"count"`
		URL       string `json:"url"`
	}
	state := `({who: !document.querySelector('tr[data-action="/flow/whoami"]').hidden,
		countdown: !document.querySelector('tr[data-action="/flow/countdown"]').hidden,
		count: document.querySelector("[data-actions-count]").textContent, url: location.pathname + location.search})`
	var narrowed, widened listState
	var path, runState, result, links string
	var lastRuns int
	var sameLoad bool
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/actions"),
		chromedp.WaitVisible(`input[data-actions-search]`, chromedp.ByQuery),
		chromedp.SendKeys(`input[data-actions-search]`, "WHOAM", chromedp.ByQuery),
		wait(`document.querySelector('tr[data-action="/flow/countdown"]').hidden`),
		chromedp.Evaluate(state, &narrowed),
		chromedp.Evaluate(`(() => { const el = document.querySelector("input[data-actions-search]"); el.value = ""; el.dispatchEvent(new Event("input")); return true; })()`, nil),
		wait(`!document.querySelector('tr[data-action="/flow/countdown"]').hidden`),
		chromedp.Evaluate(state, &widened),

		browsertest.Click(`tr[data-action="/flow/whoami"] a`),
		chromedp.WaitVisible(whoami+` button[data-run-here]`, chromedp.ByQuery),
		chromedp.Evaluate(`location.pathname`, &path),
		chromedp.Evaluate(`window.sameLoad = true`, nil),
		browsertest.Click(whoami+` details.run-context summary`),
		chromedp.SetValue(whoami+` textarea[name="context"]`, `{"auth":{"uid":"ann"}}`, chromedp.ByQuery),
		browsertest.Click(whoami+` button[data-run-here]`),
		wait(`document.querySelector('`+whoami+` [data-run-state]').textContent === "done"`),
		chromedp.Text(whoami+` [data-run-state]`, &runState, chromedp.ByQuery),
		chromedp.Text(whoami+` [data-run-result]`, &result, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('`+whoami+` [data-run-links] a')].map(a => a.getAttribute("href")).join(" ")`, &links),
		chromedp.Evaluate(`window.sameLoad === true`, &sameLoad),
		chromedp.Reload(),
		chromedp.WaitVisible(whoami, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="last-runs"] tbody tr').length`, &lastRuns),
	))
	require.True(t, narrowed.Who, "the typed text matches whoami, case aside")
	require.False(t, narrowed.Countdown, "and not countdown")
	require.Equal(t, "/actions?q=WHOAM", narrowed.URL, "the address follows the search")
	require.Regexp(t, `^1 of \d+ actions$`, narrowed.Count)
	require.True(t, widened.Who)
	require.True(t, widened.Countdown, "emptied, the search shows every row again")
	require.Equal(t, "/actions", widened.URL)
	require.Equal(t, "/actions/flow/whoami", path, "the row opens the action's page")
	require.Equal(t, "done", runState)
	require.JSONEq(t, `{"auth":{"uid":"ann"}}`, result, "the flow ran under the context given")
	require.Contains(t, links, "/runs/", "a link to its run")
	require.True(t, sameLoad, "in place: the page was not left")
	require.Equal(t, 1, lastRuns, "the run is among the action's last runs")
	require.Empty(t, br.Problems())
}
