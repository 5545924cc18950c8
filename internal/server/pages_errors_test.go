package server

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// failedSpanView is what a page shows of its failure and failing span, read in the browser.
type failedSpanView struct {
	Failure        string
	Failed         []string // rows marked failed (where an error starts)
	Containing     int      // rows marked "contains an error"
	SelectedID     string
	SelectedInView bool
	DetailError    string
}

const readFailedSpanView = `(() => {
	const sel = document.querySelector(".span-row.selected");
	const r = sel ? sel.getBoundingClientRect() : null;
	const err = document.querySelector('[data-testid="span-error"]');
	return {
		Failure: (document.querySelector('[data-testid="trace-failure"] strong') || {}).textContent || "",
		Failed: [...document.querySelectorAll(".span-row.error")].map(e => e.dataset.span),
		Containing: document.querySelectorAll(".span-row.contains-error").length,
		SelectedID: sel ? sel.dataset.span : "",
		SelectedInView: !!r && r.top >= 0 && r.bottom <= innerHeight,
		DetailError: err ? err.textContent : "",
	};
})()`

// TestBrowserErrorsAreFindableInOneClick: a run aborted by its turn limit says so in its header
// ("turn limit 1 reached"); only the span where the error starts is marked failed, its ancestors
// say they contain an error; one click on the header's link selects the failing span, opens the
// spans above it, scrolls to it, and its panel starts with the error message. The same holds for an
// OTLP trace whose tool failed, inside a collapsed agent span.
func TestBrowserErrorsAreFindableInOneClick(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	orig := b.startRun(t, "/flow/researchAgent", `{"topic":"limits","depth":2}`, store.RunSucceeded)
	one := 1
	aborted, err := b.runs.Replay(ctx, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{MaxTurns: &one}})
	require.NoError(t, err)
	b.waitStatus(t, aborted.ID, store.RunAborted)
	b.flushSpans(t, aborted.ID, 3)

	br := browsertest.New(t)
	var v failedSpanView
	var href string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(b.url+"/runs/"+aborted.ID.String()),
		chromedp.WaitVisible(`[data-testid="trace-failure"]`, chromedp.ByQuery),
		chromedp.Evaluate(readFailedSpanView, &v),
		chromedp.Evaluate(`document.querySelector('[data-testid="trace-failure"] a').href`, &href),
	))
	require.Equal(t, "turn limit 1 reached", v.Failure)
	require.LessOrEqual(t, len(v.Failed), 1, "only where the error starts is red: %v", v.Failed)
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`[data-testid="trace-failure"] a`),
		chromedp.WaitVisible(`.span-row.selected`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-testid="span-error"]`, chromedp.ByQuery),
		chromedp.Evaluate(readFailedSpanView, &v),
	))
	require.Contains(t, href, "span=")
	require.Equal(t, []string{v.SelectedID}, v.Failed, "the failing span is selected, and it is the only one marked failed")
	require.Positive(t, v.Containing, "its ancestors say they contain an error")
	require.True(t, v.SelectedInView, "the failing span is scrolled into view")
	require.Contains(t, v.DetailError, "exceeded maximum tool call iterations (1)", "the panel starts with the error")
	var runError string
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Text(`[data-testid="run-error-message"]`, &runError, chromedp.ByQuery)))
	require.Contains(t, runError, "ABORTED", "the run's error message comes before its folded details")
	require.Empty(t, br.Problems())
}

// TestBrowserOTLPFailedToolIsFoundInOneClick: the OTel JS GenAI capture's trace whose
// execute_tool span failed ("card declined") says "tool book_flight failed: card declined"; the
// link opens the collapsed agent span and selects the tool.
func TestBrowserOTLPFailedToolIsFoundInOneClick(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	replayFixture(t, b, "otel-js-genai-otlp.jsonl")
	const id, book = "32a6543ea49e8b7b5c3dfd944745d97f", "849f129f5830550d"
	br := browsertest.New(t)
	var v failedSpanView
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/traces/"+id),
		chromedp.WaitVisible(`[data-testid="trace-failure"]`, chromedp.ByQuery),
		chromedp.Evaluate(readFailedSpanView, &v),
	))
	require.True(t, strings.HasPrefix(v.Failure, "tool book_flight failed: card declined"), v.Failure)
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`[data-testid="trace-failure"] a`),
		chromedp.WaitVisible(`.span-row.selected[data-span="`+book+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-testid="span-error"]`, chromedp.ByQuery),
		chromedp.Evaluate(readFailedSpanView, &v),
	))
	require.Equal(t, []string{book}, v.Failed)
	require.True(t, v.SelectedInView)
	require.Contains(t, v.DetailError, "card declined")
}
