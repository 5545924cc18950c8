package server

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
)

// TestBrowserRunsListIsOneLineARowAt1280: at 1280 px every row of the runs list is one line
// (the started time relative, the absolute one its tooltip), the page does not scroll sideways,
// a failed run shows its error in its row (cut, whole in the tooltip), and a run that waited for a
// worker shows how long.
func TestBrowserRunsListIsOneLineARowAt1280(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	long := strings.Repeat("the upstream booking service refused the request ", 6)
	_, err := b.store.Pool().Exec(context.Background(), `
		INSERT INTO runs (action, input, status, model, created_at, started_at, finished_at, error, turns, input_tokens, output_tokens)
		VALUES
		('/flow/travelAgent', '{"destination":"Lisbon with a rather long name to preview"}', 'failed', 'demo/travel-model-with-a-long-name',
			now() - interval '3 hours', now() - interval '3 hours' + interval '2.5 s', now() - interval '3 hours' + interval '4 s',
			jsonb_build_object('status', 'INTERNAL', 'message', $1::text), 3, 12345, 6789),
		('/flow/researchAgent', '{"topic":"durable execution","depth":3}', 'succeeded', 'demo/research',
			now() - interval '2 days', now() - interval '2 days', now() - interval '2 days' + interval '9 s', NULL, 12, 99999, 88888),
		('/flow/countdown', '{"from":3}', 'queued', NULL, now() - interval '40 s', NULL, NULL, NULL, 0, 0, 0)`, long)
	require.NoError(t, err)
	br := browsertest.New(t)
	type row struct {
		Height          float64
		Error, ErrTitle string
		Queued, Ago     string
		AgoTitle        string
	}
	var rows []row
	var scrollW, clientW float64
	var lineH float64
	require.NoError(t, br.Run(
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(b.url+"/runs"),
		chromedp.WaitVisible(`#run-rows tr[data-run]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#run-rows tr[data-run]")].map((r) => ({
			Height: r.getBoundingClientRect().height,
			Error: r.querySelector("[data-run-error]")?.textContent ?? "", ErrTitle: r.querySelector("[data-run-error]")?.title ?? "",
			Queued: r.querySelector("[data-queued]").textContent.trim(),
			Ago: r.querySelector("time").textContent, AgoTitle: r.querySelector("time").title}))`, &rows),
		chromedp.Evaluate(`document.documentElement.scrollWidth`, &scrollW),
		chromedp.Evaluate(`document.documentElement.clientWidth`, &clientW),
		chromedp.Evaluate(`parseFloat(getComputedStyle(document.querySelector("#run-rows td")).lineHeight) || 20`, &lineH),
	))
	require.Len(t, rows, 3)
	require.LessOrEqual(t, scrollW, clientW, "no horizontal scroll at 1280 px")
	for _, r := range rows {
		require.Less(t, r.Height, 2*lineH+12, "one line a row: %+v", r)
		require.Regexp(t, `^\d+[smhd] ago$`, r.Ago)
		require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`, r.AgoTitle)
	}
	queued, failed, done := rows[0], rows[1], rows[2] // newest first
	require.Contains(t, failed.Error, "INTERNAL: the upstream booking service refused")
	require.Contains(t, failed.ErrTitle, strings.TrimSpace(long))
	require.Equal(t, "2.5s", failed.Queued, "it waited 2.5 s for a worker")
	require.Equal(t, "—", done.Queued, "started at once")
	require.Regexp(t, `^4\d(\.\d)?s$`, queued.Queued, "still in the queue: how long so far")
	require.Equal(t, "3h ago", failed.Ago)
	require.Empty(t, br.Problems())
}
