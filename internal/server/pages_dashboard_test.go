package server

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserDashboardLeadsSomewhere: every count links to its filtered list, the chart has a y
// axis up to its peak, time labels and a range choice kept in the URL, the range's runs get p50
// and p95 running time and tokens per action and model, and a waiting interrupt links to its inbox
// item.
func TestBrowserDashboardLeadsSomewhere(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	waiting := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	it := b.pending(t, waiting.ID)
	for range 3 {
		b.startRun(t, "/flow/researchAgent", `{"topic":"dashboards","depth":1}`, store.RunSucceeded)
	}
	br := browsertest.New(t)

	var hrefs map[string]string
	var yMax, p50, p95, inbox string
	var xLabels int
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/"),
		wait(`document.querySelector('[data-chart="total"]').textContent === "4"`),
		chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll(".cards [data-count]")].map(a => [a.dataset.count, a.getAttribute("href")]))`, &hrefs),
		chromedp.Evaluate(`document.querySelector('[data-axis="y-max"]').textContent`, &yMax),
		chromedp.Evaluate(`document.querySelectorAll('[data-axis="x"]').length`, &xLabels),
		chromedp.Evaluate(`document.querySelector('[data-testid="action-stats"] tr[data-action="/flow/researchAgent"] [data-stat="ran-p50"]').textContent`, &p50),
		chromedp.Evaluate(`document.querySelector('[data-testid="action-stats"] tr[data-action="/flow/researchAgent"] [data-stat="tokens-p95"]').textContent`, &p95),
		chromedp.Evaluate(`document.querySelector('tr[data-interrupt="`+it.ID.String()+`"] [data-testid="inbox-link"]').getAttribute("href")`, &inbox),
	))
	require.Equal(t, "/runs", hrefs["total"])
	require.Equal(t, "/inbox", hrefs["pending-interrupts"])
	require.Equal(t, "/runs?status=succeeded", hrefs["succeeded"])
	require.Equal(t, "/runs?status=interrupted", hrefs["interrupted"])
	require.Equal(t, "4", yMax, "all four runs started in the same minute")
	require.Equal(t, 3, xLabels)
	require.NotEmpty(t, p50)
	require.NotEqual(t, "0", p95, "the research agent's model counts tokens")
	require.Equal(t, "/inbox?sel="+it.ID.String(), inbox)
	require.Empty(t, br.Problems())

	// The interrupted run has not finished: only the three research runs are in the table.
	var runs string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Evaluate(`document.querySelector('[data-testid="action-stats"] tr[data-action="/flow/researchAgent"] td:nth-child(3)').textContent`, &runs)))
	require.Equal(t, "3", runs)

	var current, label string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/?range=7d"),
		wait(`document.querySelector('[data-range="7d"]').getAttribute("aria-current") === "true"`),
		chromedp.Evaluate(`document.querySelector('nav.ranges [aria-current]').dataset.range`, &current),
		chromedp.Evaluate(`document.querySelector('[data-testid="runs-chart"]').getAttribute("aria-label")`, &label),
	))
	require.Equal(t, "7d", current)
	require.True(t, strings.Contains(label, "3 hours") && strings.Contains(label, "last 7 days"), label)
	_, body := get(t, b.url+"/?range=nonsense", "Accept", "text/html")
	require.Contains(t, body, `data-range="1h" aria-current="true"`, "an unknown range is the last hour")
}
