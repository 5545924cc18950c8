package cli

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestBrowserGenkitJSDeveloperJourney is the "done when", in a real Chromium against
// devui start running the real Genkit JS app: the developer runs a flow from the Actions page and
// watches its run (the app's output, its trace with its tool); runs a prompt whose tool interrupts;
// approves the tool call in the inbox; and sees the conversation go on in the app (its model's
// answer on the run page).
func TestBrowserGenkitJSDeveloperJourney(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	// Port 0: a port picked beforehand can be taken by an outgoing connection before devui
	// binds it; devui says where it listens.
	addr := "127.0.0.1:0"
	logs := runStart(t, "--addr", addr, "--database-url", storetest.NewURL(t), "--data-dir", t.TempDir(), "--log-level", "error",
		"--genkit-project", dir, "--", "sh", "-c", "cd '"+dir+"' && APP_NAME=journey exec node app.mjs")
	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`Loupe is at (http://[0-9.:]+)`).FindStringSubmatch(logs.String())
		if m == nil {
			return false
		}
		base = m[1]
		return true
	}, time.Minute, 50*time.Millisecond, "devui start says where it listens")
	// The browser outlives the test's own waits (a minute for the actions, two for the app's
	// trace, a minute per poll): New's two minutes ran out under load in CI, mid-journey.
	br := browsertest.NewWithTimeout(t, 6*time.Minute)
	article := func(key string) string { return `article[data-action="` + key + `"]` }
	poll := func(expr string) chromedp.Action {
		return chromedp.Poll(expr, nil, chromedp.WithPollingTimeout(time.Minute), chromedp.WithPollingInterval(100*time.Millisecond))
	}
	// Loupe finds the app through its runtime file; the Actions page lists its actions under its name.
	require.Eventually(t, func() bool {
		var list struct {
			Actions []struct {
				Key string `json:"key"`
			} `json:"actions"`
		}
		getJSON(t, base+"/api/v1/actions", &list)
		for _, a := range list.Actions {
			if a.Key == "journey:/prompt/wirePrompt" {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "the app's actions are listed")

	var output, spans, flowRun string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(base+"/actions"),
		chromedp.WaitVisible(`section.genkit-app[data-app="journey"]`, chromedp.ByQuery),
		// The app's row opens the action's page, where its form is.
		browsertest.Click(`tr[data-action="journey:/flow/weatherFlow"] a`),
		chromedp.WaitVisible(article("journey:/flow/weatherFlow")+` textarea[name="input"]`, chromedp.ByQuery),
		chromedp.SetValue(article("journey:/flow/weatherFlow")+` textarea[name="input"]`, `{"city":"Lisbon"}`, chromedp.ByQuery),
		browsertest.Click(article("journey:/flow/weatherFlow")+` button[type="submit"]`),
		chromedp.WaitVisible(`.run-header[data-status="succeeded"]`, chromedp.ByQuery),
		chromedp.Text(`.run-header .io`, &output, chromedp.ByQuery),
		chromedp.Location(&flowRun),
	))
	// The app sends its spans after it has answered: open the run's page again once they are in
	// Loupe (the live page's own updates are TestBrowserRunTraceKeepsUpdatingAfterClicks').
	traceIn := func() bool {
		var v struct {
			TraceID string `json:"trace_id"`
		}
		getJSON(t, base+"/api/v1/runs/"+flowRun[strings.LastIndex(flowRun, "/")+1:], &v)
		if v.TraceID == "" {
			return false
		}
		resp, err := http.Get(base + "/api/v1/traces/" + v.TraceID + "/turns")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "getWeather")
	}
	require.Eventually(t, traceIn, 2*time.Minute, 200*time.Millisecond, "the app's trace, with its tool call, reaches Loupe")
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(flowRun),
		chromedp.WaitVisible(`#trace .span-row`, chromedp.ByQuery),
		poll(`document.querySelector("#trace .spantree").textContent.includes("weatherFlow")`),
		// Its turns: the turn summary names the tool the app's model called.
		poll(`(document.querySelector("#trace .turns-table") || {textContent: ""}).textContent.includes("getWeather")`),
		chromedp.Evaluate(`document.querySelector("#trace .spantree").outerHTML`, &spans),
	))
	require.Contains(t, output, "Lisbon", "the app's output is the run's")
	require.Contains(t, spans, "weatherFlow", "the app's trace is the run's: %s", spans)

	var conversation, runURL string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(base+"/actions/journey:/prompt/wirePrompt"),
		chromedp.WaitVisible(article("journey:/prompt/wirePrompt"), chromedp.ByQuery),
		chromedp.SetValue(article("journey:/prompt/wirePrompt")+` textarea[name="input"]`, `{"to":"Bob","amount":50}`, chromedp.ByQuery),
		browsertest.Click(article("journey:/prompt/wirePrompt")+` button[type="submit"]`),
		chromedp.WaitVisible(`.run-header[data-status="interrupted"]`, chromedp.ByQuery),
		chromedp.Location(&runURL),
		chromedp.Navigate(base+"/inbox"),
		chromedp.WaitVisible(`.inbox-item`, chromedp.ByQuery),
		chromedp.WaitReady(`html[data-live="live"]`, chromedp.ByQuery),
		chromedp.KeyEvent("a"),
		// A transfer moves an amount: approving it asks to confirm, and Enter in the reason confirms.
		chromedp.WaitVisible(`[data-confirm-step]`, chromedp.ByQuery),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(`#flash.ok`, chromedp.ByQuery),
	))
	require.NotEmpty(t, runURL)
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(runURL+"?tab=conversation"),
		chromedp.WaitVisible(`.run-header[data-status="succeeded"]`, chromedp.ByQuery),
		chromedp.Text(`#conversation`, &conversation, chromedp.ByQuery),
	))
	require.True(t, strings.Contains(conversation, "transferMoney"), "the approved call is in the conversation: %s", conversation)
	require.Contains(t, conversation, "Done", "the app's model answered after the approval")
	require.Empty(t, br.Problems())
}
