package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
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
	var barCounts []int
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/"),
		wait(`document.querySelector('[data-chart="total"]').textContent === "4"`),
		chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll(".cards [data-count]")].map(a => [a.dataset.count, a.getAttribute("href")]))`, &hrefs),
		chromedp.Evaluate(`document.querySelector('[data-axis="y-max"]').textContent`, &yMax),
		chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="runs-chart"] rect.bar title')].map(t => parseInt(t.textContent.match(/: (\d+) runs/)[1]))`, &barCounts),
		chromedp.Evaluate(`document.querySelectorAll('[data-axis="x"]').length`, &xLabels),
		chromedp.Evaluate(`document.querySelector('[data-testid="action-stats"] tr[data-action="/flow/researchAgent"] [data-stat="ran-p50"]').textContent`, &p50),
		chromedp.Evaluate(`document.querySelector('[data-testid="action-stats"] tr[data-action="/flow/researchAgent"] [data-stat="tokens-p95"]').textContent`, &p95),
		chromedp.Evaluate(`document.querySelector('tr[data-interrupt="`+it.ID.String()+`"] [data-testid="inbox-link"]').getAttribute("href")`, &inbox),
	))
	require.Equal(t, "/runs", hrefs["total"])
	require.Equal(t, "/inbox", hrefs["pending-interrupts"])
	require.Equal(t, "/runs?status=succeeded", hrefs["succeeded"])
	require.Equal(t, "/runs?status=interrupted", hrefs["interrupted"])
	// The four runs fall in one minute's bar, or two when a minute ended while they started.
	total, peak := 0, 0
	for _, n := range barCounts {
		total, peak = total+n, max(peak, n)
	}
	require.Equal(t, 4, total, "the bars hold the four runs: %v", barCounts)
	require.Equal(t, fmt.Sprint(peak), yMax, "the y axis goes up to the peak bar: %v", barCounts)
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

// defineAskModel adds an askModel flow that asks the model its input names (test/fast or
// test/slow), so that one action's runs have two models.
func defineAskModel(reg *engine.Registry) {
	scripted.DefineFunc(reg, "test/fast", func(*engine.ModelRequest) (scripted.Turn, error) {
		return scripted.Text("fast answer").WithUsage(10, 5), nil
	})
	scripted.DefineFunc(reg, "test/slow", func(*engine.ModelRequest) (scripted.Turn, error) {
		return scripted.Text("slow answer").WithUsage(100, 50), nil
	})
	engine.DefineFlow(reg, "askModel", func(ctx context.Context, in struct {
		Model string `json:"model"`
	}) (string, error) {
		resp, err := engine.Generate(ctx, reg, engine.WithModelName(in.Model), engine.WithPrompt("Answer."))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// TestBrowserDashboardAsksTheQuestionAndStatsPerModel: the waiting list's "Asks" is the
// interrupt's question, never its metadata as JSON; the range's p50/p95 are given per model of an
// action, and a model links to the runs of that action with that model, which the runs list then
// shows alone.
func TestBrowserDashboardAsksTheQuestionAndStatsPerModel(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, define: []func(*engine.Registry){defineAskModel}})
	tr := b.pending(t, b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted).ID)
	booking := b.travel(t, "Lisbon") // its metadata has a price beside the message
	b.startRun(t, "/flow/askModel", `{"model":"test/fast"}`, store.RunSucceeded)
	b.startRun(t, "/flow/askModel", `{"model":"test/fast"}`, store.RunSucceeded)
	slow := b.startRun(t, "/flow/askModel", `{"model":"test/slow"}`, store.RunSucceeded)
	br := browsertest.New(t)

	type stats struct{ Runs, Model, Href, P50, P95, TokensP50 string }
	row := func(model string, dst *stats) chromedp.Action {
		return chromedp.Evaluate(fmt.Sprintf(`(() => { const r = document.querySelector('[data-testid="action-stats"] tr[data-action="/flow/askModel"][data-model=%q]');
			return r && {Runs: r.cells[2].innerText, Model: r.querySelector('[data-stat="model"]').innerText, Href: r.querySelector('[data-stat="model"] a')?.getAttribute("href") ?? "",
				P50: r.querySelector('[data-stat="ran-p50"]').innerText, P95: r.querySelector('[data-stat="ran-p95"]').innerText, TokensP50: r.querySelector('[data-stat="tokens-p50"]').innerText}; })()`, model), dst)
	}
	var asks map[string]string
	var fast, slowStats stats
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/"),
		chromedp.WaitVisible(`[data-testid="action-stats"]`, chromedp.ByQuery),
		chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll("tr[data-interrupt]")].map((r) => [r.dataset.interrupt, r.cells[1].innerText]))`, &asks),
		row("test/fast", &fast),
		row("test/slow", &slowStats),
	))
	require.Equal(t, "Confirm transfer of ¥500 to bob?", asks[tr.ID.String()])
	require.Equal(t, interruptMessage(booking.Metadata), asks[booking.ID.String()])
	for _, q := range asks {
		require.NotContains(t, q, "{", "the question, not the metadata JSON")
		require.NotContains(t, q, `"price"`)
	}
	require.Equal(t, "2", fast.Runs)
	require.Equal(t, "1", slowStats.Runs)
	require.Equal(t, "test/fast", fast.Model)
	require.Equal(t, "test/slow", slowStats.Model)
	for _, st := range []stats{fast, slowStats} {
		require.NotEmpty(t, st.P50)
		require.NotEmpty(t, st.P95)
	}
	require.Equal(t, "15", fast.TokensP50)
	require.Equal(t, "150", slowStats.TokensP50, "each model has its own percentiles")
	require.Contains(t, slowStats.Href, "model=test%2Fslow")

	var listed []string
	var model string
	require.NoError(t, br.Run(
		chromedp.Evaluate(`document.body.dataset.before = "1"`, nil),
		browsertest.Click(`[data-testid="action-stats"] tr[data-model="test/slow"] [data-stat="model"] a`),
		chromedp.WaitVisible(`body:not([data-before]) table.runs`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("table.runs tr[data-run]")].map((r) => r.dataset.run)`, &listed),
		chromedp.Evaluate(`document.querySelector('form.filters input[name="model"]').value`, &model),
	))
	require.Equal(t, []string{slow.ID.String()}, listed, "the model's link lists that model's runs only")
	require.Equal(t, "test/slow", model, "and the form keeps the filter")
	require.Empty(t, br.Problems())
}
