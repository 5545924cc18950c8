package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserExperimentPagesReadableAndLive opens the datasets list, a dataset's page (its forms
// opened) and an experiment's page against a baseline in Chromium: axe-core finds no contrast or
// naming violation in either theme, and the page of an experiment still running shows its
// progress and follows it, live, until it has finished.
func TestBrowserExperimentPagesReadableAndLive(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	b.recordTrips(t, "Lisbon", "Oslo")
	resp, body := postForm(t, noRedirect, b.url+"/datasets", url.Values{"name": {"trips"}, "from_runs": {"action=travelAgent&status=succeeded"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	resp, _ = postForm(t, noRedirect, b.url+"/datasets/trips/experiments", url.Values{"action": {"/flow/travelAgent"}, "name": {"base"},
		"evaluator": {"exact", "trajectory"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	base := resp.Header.Get("Location")
	b.waitExperiment(t, strings.TrimPrefix(base, "/experiments/"))
	resp, _ = postForm(t, noRedirect, b.url+"/datasets/trips/experiments", url.Values{"action": {"/flow/travelAgent"}, "name": {"other"},
		"evaluator": {"exact", "trajectory"}, "model": {"demo/research"}, "baseline": {strings.TrimPrefix(base, "/experiments/")}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	other := resp.Header.Get("Location")

	recorded, _, err := b.store.RunList(context.Background(), store.RunListParams{Action: "/flow/travelAgent", Status: store.RunSucceeded, Limit: 1})
	require.NoError(t, err)
	picked := recorded[0].ID.String()

	br := browsertest.New(t)
	// Opened at once, the second experiment may still run: its page follows it to the end.
	var status string
	require.NoError(t, br.Run(chromedp.Navigate(b.url+other), chromedp.WaitVisible(`[data-testid="experiment-progress"]`, chromedp.ByQuery)))
	// The page follows the experiment's live events; read its status as it changes.
	var seen []string
	deadline := time.Now().Add(60 * time.Second)
	for status != "finished" && time.Now().Before(deadline) {
		var got string
		if err := br.Run(chromedp.Evaluate(`(document.querySelector('#page') || {dataset: {}}).dataset.status || ''`, &got)); err == nil && got != "" {
			status = got
			if len(seen) == 0 || seen[len(seen)-1] != got {
				seen = append(seen, got)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, "finished", status, "the page never showed the experiment finished (saw %v)", seen)
	t.Logf("the experiment's page showed %v without being navigated", seen)
	var regressions string
	require.NoError(t, br.Run(chromedp.Text(`[data-testid="experiment-regressions"]`, &regressions, chromedp.ByQuery)))
	require.Contains(t, regressions, "2 regressions")

	var failures []string
	for _, scheme := range []string{"light", "dark"} {
		require.NoError(t, br.Run(browsertest.ColorScheme(scheme)))
		for _, p := range []string{"/datasets", "/datasets/trips", base, other, "/datasets/from-runs?run=" + picked} {
			var found []browsertest.AxeViolation
			require.NoError(t, br.Run(
				chromedp.Navigate(b.url+p),
				chromedp.WaitReady(`body`, chromedp.ByQuery),
				// Open the folded forms, so that their fields are checked too.
				chromedp.Evaluate(`document.querySelectorAll('details').forEach(d => d.open = true)`, nil),
				browsertest.Axe(browsertest.AxeReadabilityRules, &found),
			), p)
			for _, v := range found {
				failures = append(failures, scheme+" "+p+": "+v.String())
			}
		}
	}
	require.Empty(t, failures, "axe-core violations:\n%s", strings.Join(failures, "\n"))
	require.Empty(t, br.Problems())
}

// TestBrowserExperimentProgressIsLive opens the page of a running experiment whose examples the
// test lets through one at a time (a flow that waits for the test): the progress bar and its
// counts advance with each example scored, from the experiment's live events, and the page then
// shows its final table, all without a reload (a mark left on the window survives).
func TestBrowserExperimentProgressIsLive(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	b := setup(t, opts{dev: true, stack: true, define: []func(*engine.Registry){func(reg *engine.Registry) {
		engine.DefineFlow(reg, "gated", func(ctx context.Context, n int) (int, error) {
			select {
			case <-gate:
				return n, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
	}}})
	ctx := context.Background()
	exps := b.srv.deps.Experiments
	var examples []store.ExampleParams
	for i := 1; i <= 4; i++ {
		in := json.RawMessage(strconv.Itoa(i))
		examples = append(examples, store.ExampleParams{Input: in, Reference: in})
	}
	_, err := exps.CreateDataset(ctx, "gates", "", "test", examples)
	require.NoError(t, err)
	e, err := exps.Start(ctx, experiments.StartParams{Dataset: "gates", Action: "/flow/gated", Evaluators: []string{"exact"},
		Tools: store.ReplayToolsLive, Concurrency: 1})
	require.NoError(t, err)

	br := browsertest.New(t)
	require.NoError(t, br.Run(chromedp.Navigate(b.url+"/experiments/"+e.ID.String()),
		chromedp.WaitVisible(`[data-testid="experiment-progress"]`, chromedp.ByQuery),
		chromedp.Evaluate(`window.loupeNotReloaded = true`, nil)))
	waitFor := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var ok bool
			if err := br.Run(chromedp.Evaluate(expr, &ok)); err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				var state string
				_ = br.Run(chromedp.Evaluate(`JSON.stringify({live: document.documentElement.dataset, page: document.querySelector("#page")?.dataset, meta: document.querySelector('meta[name="loupe-live"]')?.content})`, &state))
				t.Fatalf("the page never showed %s: %s; problems: %v", what, state, br.Problems())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("its live connection", `document.documentElement.dataset.live === "live"`)
	var before string
	require.NoError(t, br.Run(chromedp.Text(`[data-testid="experiment-progress-text"]`, &before, chromedp.ByQuery)))
	require.Contains(t, before, "0 of 4 scored")
	for n := 1; n <= 2; n++ {
		gate <- struct{}{}
		waitFor(strconv.Itoa(n)+" scored", fmt.Sprintf(`document.querySelector("#exp-progress").value === %d && document.querySelector('[data-count="scored"]').textContent === "%d"`, n, n))
	}
	gate <- struct{}{}
	gate <- struct{}{}
	waitFor("the experiment finished", `document.querySelector("#page").dataset.status === "finished" && document.querySelectorAll('[data-testid="experiment-results"] tbody tr[data-verdict="pass"]').length === 4`)
	var text string
	var notReloaded bool
	require.NoError(t, br.Run(chromedp.Text(`[data-testid="experiment-progress-text"]`, &text, chromedp.ByQuery),
		chromedp.Evaluate(`window.loupeNotReloaded === true`, &notReloaded)))
	require.Contains(t, text, "4 of 4 scored")
	require.True(t, notReloaded, "the page was reloaded")
	require.Empty(t, br.Problems())
}
