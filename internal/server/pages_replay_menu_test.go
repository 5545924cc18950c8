package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserReplayMenuConfirmsLiveReplaysAndForksWithAnEdit: the run page has one Replay menu in
// plain words; a live re-run cannot be sent without its confirmation (the browser holds the form,
// and the server refuses it with 422, starting nothing); a fork from the menu with a tool output
// edited at the fork point and a turn limit starts, and its header shows the edit; from the runs
// list, two ticked runs open their comparison.
func TestBrowserReplayMenuConfirmsLiveReplaysAndForksWithAnEdit(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	orig := b.startRun(t, "/flow/researchAgent", `{"topic":"menus","depth":2}`, store.RunSucceeded)
	br := browsertest.New(t)

	var menu string
	var rerunValid bool
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs/"+orig.ID.String()),
		browsertest.Click(`[data-testid="replay-menu"] > summary`),
		chromedp.WaitVisible(`[data-testid="replay-fork"]`, chromedp.ByQuery),
		chromedp.Text(`[data-testid="replay-menu"]`, &menu, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('[data-testid="replay-rerun"]').checkValidity()`, &rerunValid),
	))
	for _, words := range []string{"Replay with the recorded results", "nothing happens twice", "Re-run live", "Fork from a turn",
		"apply the original reviewers' decisions", "I understand"} {
		require.Contains(t, menu, words)
	}
	require.False(t, rerunValid, "a live re-run is held until its box is ticked")

	before, _, err := b.store.RunList(ctx, store.RunListParams{})
	require.NoError(t, err)
	form := url.Values{"mode": {"rerun"}}
	resp, err := http.Post(b.url+"/runs/"+orig.ID.String()+"/replay", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	for _, bad := range []url.Values{
		{"mode": {"fork"}, "turn": {"1"}, "confirm": {"yes"}, "edit_seq": {"x"}},
		{"mode": {"fork"}, "turn": {"1"}, "confirm": {"yes"}, "edit_seq": {"0"}, "edit_message": {"{not json"}},
		{"mode": {"fork"}, "turn": {"1"}, "confirm": {"yes"}, "edit_call": {"0/r0-0"}, "edit_output": {"typhoon"}},
		{"mode": {"rerun"}, "confirm": {"yes"}, "config": {"{"}},
		{"mode": {"exact"}, "tools": {"live"}},
	} {
		resp, err := http.Post(b.url+"/runs/"+orig.ID.String()+"/replay", "application/x-www-form-urlencoded", strings.NewReader(bad.Encode()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%v", bad)
	}
	after, _, err := b.store.RunList(ctx, store.RunListParams{})
	require.NoError(t, err)
	require.Len(t, after, len(before), "nothing started")

	var edits string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.SetValue(`[data-testid="replay-fork"] select[name="turn"]`, "1", chromedp.ByQuery),
		chromedp.SetValue(`[data-testid="replay-fork"] select[name="edit_call"]`, "0/r0-0", chromedp.ByQuery),
		chromedp.SetValue(`[data-testid="replay-fork"] textarea[name="edit_output"]`, `{"query":"q","source":"typed in the menu","summary":"s"}`, chromedp.ByQuery),
		chromedp.SetValue(`[data-testid="replay-fork"] input[name="max_turns"]`, "6", chromedp.ByQuery),
		browsertest.Click(`[data-testid="replay-fork"] input[name="confirm"]`),
		browsertest.Click(`[data-testid="replay-fork"] button[type="submit"]`),
		chromedp.WaitVisible(`[data-testid="fork-edits"]`, chromedp.ByQuery),
		chromedp.Text(`[data-testid="fork-edits"]`, &edits, chromedp.ByQuery),
	))
	require.Contains(t, edits, "tool output of r0-0 in turn 0 set to")
	require.Contains(t, edits, "typed in the menu")
	var forkURL string
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Location(&forkURL)))
	forkID := forkURL[strings.LastIndex(forkURL, "/")+1:]
	rp, err := b.store.ReplayGet(ctx, mustUUID(t, forkID))
	require.NoError(t, err)
	require.JSONEq(t, `{"max_turns":6}`, string(rp.Overrides))

	var compareURL string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs"),
		chromedp.WaitVisible(`tr[data-run="`+forkID+`"]`, chromedp.ByQuery),
		browsertest.Click(`tr[data-run="`+orig.ID.String()+`"] input[name="run"]`),
		browsertest.Click(`tr[data-run="`+forkID+`"] input[name="run"]`),
		browsertest.Click(`[data-testid="compare-selected"]`),
		chromedp.WaitVisible(`[data-testid="diff-run-B"]`, chromedp.ByQuery),
		chromedp.Location(&compareURL),
	))
	require.Contains(t, compareURL, "/diff/")
	require.Contains(t, compareURL, orig.ID.String())
	require.Contains(t, compareURL, forkID)
	resp, body := get(t, b.url+"/runs/compare?run="+orig.ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "pick exactly two runs")
	require.Empty(t, br.Problems())
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err, "%q is not a run id", s)
	return id
}
