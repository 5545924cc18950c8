package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserExperimentPagesReadableAndLive opens the datasets list, a dataset's page (its forms
// opened) and an experiment's page against a baseline in Chromium: axe-core finds no contrast or
// naming violation in either theme, and the page of an experiment still running shows its
// progress and reloads itself until it has finished.
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

	br := browsertest.NewWithTimeout(t, 3*time.Minute)
	// Opened at once, the second experiment may still run: its page follows it to the end.
	var status string
	require.NoError(t, br.Run(chromedp.Navigate(b.url+other), chromedp.WaitVisible(`[data-testid="experiment-progress"]`, chromedp.ByQuery)))
	// The page reloads itself while the experiment runs; read its status between reloads.
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
