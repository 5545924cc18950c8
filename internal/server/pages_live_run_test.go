package server

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserLiveRunPageGrowsTicksAndFollows: while a streaming flow runs, its page shows the
// trace's running spans (their starts are stored), the "ran for" duration ticks, each of the
// flow's chunks shows its time, the stream follows new chunks until the reader scrolls up (then a
// button counts what came), and the header leaves out what does not apply to a flow with no model.
func TestBrowserLiveRunPageGrowsTicksAndFollows(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	// Long enough (a chunk each 200 ms for 40 s) to be still streaming when the reader scrolls up.
	run := b.startRun(t, "/flow/countdown", `{"from":200}`, store.RunRunning)
	br := browsertest.New(t)

	var first, later string
	var facts []string
	var spanRows, timedChunks int
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()),
		chromedp.WaitVisible(`[data-ticking]`, chromedp.ByQuery),
		wait(`document.querySelectorAll("#trace .span-row").length > 0`),
		chromedp.Evaluate(`document.querySelectorAll("#trace .span-row.running").length`, &spanRows),
		chromedp.Text(`[data-ticking]`, &first, chromedp.ByQuery),
		// The stream is its own tab.
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()+"?tab=stream"),
		chromedp.WaitVisible(`#chunks`, chromedp.ByQuery),
		wait(`document.querySelectorAll("#chunks .chunk-time").length >= 3`),
		chromedp.Evaluate(`document.querySelectorAll("#chunks .chunk-time").length`, &timedChunks),
		chromedp.Evaluate(`[...document.querySelectorAll(".facts [data-fact]")].map(d => d.dataset.fact)`, &facts),
	))
	require.Positive(t, spanRows, "the flow's span shows as running before it ends")
	require.GreaterOrEqual(t, timedChunks, 3)
	require.NotContains(t, facts, "model", "a flow with no model shows no model")
	require.NotContains(t, facts, "tokens")
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Text(`[data-ticking]`, &later, chromedp.ByQuery)))
	require.NotEqual(t, first, later, "the duration ticks")

	var atEnd bool
	var button string
	require.NoError(t, chromedp.Run(br.Ctx,
		wait(`document.getElementById("chunks").scrollHeight > document.getElementById("chunks").clientHeight || document.querySelectorAll("#chunks .chunk-time").length >= 10`),
		chromedp.Evaluate(`(() => { const c = document.getElementById("chunks"); return c.scrollHeight - c.scrollTop - c.clientHeight < 24; })()`, &atEnd),
	))
	require.True(t, atEnd, "the stream follows its new chunks")
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.EmulateViewport(1280, 500)))
	require.NoError(t, chromedp.Run(br.Ctx,
		// Enough chunks below the fold that the top is well away from the end.
		wait(`document.getElementById("chunks").scrollHeight > document.getElementById("chunks").clientHeight + 100`),
		chromedp.Evaluate(`(() => { const c = document.getElementById("chunks"); c.scrollTop = 0; c.dispatchEvent(new Event("scroll")); return true; })()`, nil),
	))
	require.NoError(t, chromedp.Run(br.Ctx,
		wait(`!document.querySelector('[data-testid="new-chunks"]').hidden`),
		chromedp.Text(`[data-testid="new-chunks"]`, &button, chromedp.ByQuery),
	))
	require.Contains(t, button, "new chunk")
	var top float64
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Evaluate(`document.getElementById("chunks").scrollTop`, &top)))
	require.Zero(t, top, "scrolled up, the stream stays where the reader is")
	require.Empty(t, br.Problems())
}
