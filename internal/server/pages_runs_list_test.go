package server

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserRunsListSortsMarksLineageAndKeepsABadFilter: the runs table shows each run's short
// id, an input preview and a lineage badge on a replay; clicking "Tokens" sorts it largest first
// (and again, smallest first); a filter it cannot read is shown beside its field with the form as
// it was sent.
func TestBrowserRunsListSortsMarksLineageAndKeepsABadFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	travel := b.startRun(t, "/flow/travelAgent", `{"destination":"Lisbon"}`, store.RunInterrupted)
	b.startRun(t, "/flow/countdown", `{"from":2}`, store.RunSucceeded)
	research := b.startRun(t, "/flow/researchAgent", `{"topic":"sorting","depth":2}`, store.RunSucceeded)
	rep, err := b.runs.Replay(ctx, runs.ReplayParams{RunID: research.ID, Mode: store.ReplayExact})
	require.NoError(t, err)
	b.waitStatus(t, rep.ID, store.RunSucceeded)

	br := browsertest.New(t)
	tokens := func() []int64 {
		t.Helper()
		var cells []string
		require.NoError(t, chromedp.Run(br.Ctx, chromedp.Evaluate(
			`[...document.querySelectorAll("#run-rows tr")].map(r => r.children[7].textContent.trim())`, &cells)))
		out := make([]int64, len(cells))
		for i, c := range cells {
			n, err := strconv.ParseInt(c, 10, 64)
			require.NoError(t, err, "tokens cell %q", c)
			out[i] = n
		}
		return out
	}
	var lineage, preview, short string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs"),
		chromedp.WaitVisible(`#run-rows tr[data-run="`+rep.ID.String()+`"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#run-rows tr[data-run="`+rep.ID.String()+`"] [data-lineage]').textContent`, &lineage),
		chromedp.Evaluate(`document.querySelector('#run-rows tr[data-run="`+travel.ID.String()+`"] td.preview').textContent`, &preview),
		chromedp.Evaluate(`document.querySelector('#run-rows tr[data-run="`+travel.ID.String()+`"] td a.mono').textContent`, &short),
	))
	require.Equal(t, "replay", lineage)
	require.Contains(t, preview, "Lisbon")
	require.Equal(t, travel.ID.String()[len(travel.ID.String())-8:], short)

	// The header is a plain link (no script): click it, and wait for the page it leads to with a
	// DOM query, which chromedp retries across the navigation (a script poll right after one can
	// run in the old page's execution context and fail with "Cannot find context").
	follow := func(dir string) {
		t.Helper()
		_, err := chromedp.RunResponse(br.Ctx, browsertest.Click(`th[data-sort="tokens"] a`))
		require.NoError(t, err)
		require.NoError(t, chromedp.Run(br.Ctx, chromedp.WaitVisible(`th[data-sort="tokens"][aria-sort="`+dir+`"]`, chromedp.ByQuery)))
	}
	follow("descending")
	var search string
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Evaluate(`location.search`, &search)))
	require.Contains(t, search, "sort=tokens")
	got := tokens()
	require.Len(t, got, 4)
	for i := 1; i < len(got); i++ {
		require.GreaterOrEqual(t, got[i-1], got[i], "largest first: %v", got)
	}
	require.Greater(t, got[0], got[len(got)-1], "the runs differ in tokens: %v", got)
	follow("ascending")
	got = tokens()
	for i := 1; i < len(got); i++ {
		require.LessOrEqual(t, got[i-1], got[i], "smallest first: %v", got)
	}

	var fieldError, kept string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs?since=yesterday&q=Lisbon"),
		chromedp.WaitVisible(`[data-field-error="since"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('[data-field-error="since"]').textContent`, &fieldError),
		chromedp.Evaluate(`document.querySelector('input[name="since"]').value`, &kept),
		chromedp.Evaluate(`document.querySelector('input[name="q"]').value`, &search),
	))
	require.Contains(t, fieldError, "duration ago such as 24h")
	require.Equal(t, "yesterday", kept)
	require.Equal(t, "Lisbon", search)
	resp, body := get(t, b.url+"/runs?since=yesterday", "Accept", "text/html")
	require.Equal(t, 400, resp.StatusCode)
	require.True(t, strings.Contains(body, `aria-invalid="true"`), "the field is marked invalid")
}

// TestBrowserRunsFiltersNarrowTheList filters the runs list by status and by text in a browser.
func TestBrowserRunsFiltersNarrowTheList(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	done := b.startRun(t, "/flow/countdown", `{"from":1}`, store.RunSucceeded)
	waiting := b.startRun(t, "/flow/transferMoney", `{"to":"zed","amount":5,"currency":"EUR"}`, store.RunInterrupted)
	br := browsertest.New(t)
	count := `document.querySelectorAll("tr[data-run]").length`
	var all, interrupted, searched int
	var url string
	submit := func() {
		t.Helper()
		// RunResponse waits for the navigation the click starts.
		_, err := chromedp.RunResponse(br.Ctx, browsertest.Click(`form.filters button[type=submit]`))
		require.NoError(t, err)
	}
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs"),
		chromedp.WaitVisible(`form.filters`, chromedp.ByQuery),
		chromedp.Evaluate(count, &all),
		chromedp.SetValue(`form.filters select[name=status]`, "interrupted", chromedp.ByQuery),
	))
	submit()
	require.NoError(t, br.Run(
		chromedp.WaitVisible(`form.filters`, chromedp.ByQuery),
		chromedp.Evaluate(count, &interrupted),
		chromedp.WaitVisible(`tr[data-run="`+waiting.ID.String()+`"]`, chromedp.ByQuery),
		chromedp.SetValue(`form.filters select[name=status]`, "", chromedp.ByQuery),
		chromedp.SetValue(`form.filters input[name=q]`, "zed", chromedp.ByQuery),
	))
	submit()
	require.NoError(t, br.Run(
		chromedp.WaitVisible(`form.filters`, chromedp.ByQuery),
		chromedp.Evaluate(count, &searched),
		chromedp.Evaluate(`location.href`, &url),
	))
	require.Equal(t, 2, all)
	require.Equal(t, 1, interrupted, "only the interrupted run")
	require.Equal(t, 1, searched, "only the run whose input mentions zed")
	require.Contains(t, url, "q=zed", "the filter is in the address, so it can be shared")
	require.NotContains(t, url, done.ID.String())
	require.Empty(t, br.Problems())
}

// TestBrowserRunsListShowsLineageModelTurnsAndTheWaitApart: for real runs (an original, its
// fork and its exact replay, and a transfer that waited for a reviewer and was then approved), the
// runs table marks the fork "fork" and the replay "replay" and leaves the others unmarked, shows
// each run's model and turns as stored, and keeps the time the transfer waited for a person in its
// own column, apart from (and different from) the time it ran.
func TestBrowserRunsListShowsLineageModelTurnsAndTheWaitApart(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	orig := b.startRun(t, "/flow/researchAgent", `{"topic":"lineage","depth":2}`, store.RunSucceeded)
	one := 1
	fork, err := b.runs.Replay(ctx, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayFork, Turn: &one})
	require.NoError(t, err)
	rep, err := b.runs.Replay(ctx, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact})
	require.NoError(t, err)
	transfer := b.startRun(t, "/flow/transferMoney", `{"to":"ada","amount":20,"currency":"EUR"}`, store.RunInterrupted)
	// The reviewer takes a while to decide: that wait is what the "waited" column measures, and
	// it is made longer than the transfer's own running time so the two cannot be confused.
	time.Sleep(1200 * time.Millisecond)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, transfer.ID).ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	for _, id := range []uuid.UUID{fork.ID, rep.ID, transfer.ID} {
		b.waitStatus(t, id, store.RunSucceeded)
	}

	type cells struct{ Lineage, Model, Turns, Ran, Waited string }
	var got map[string]cells
	br := browsertest.New(t)
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs"),
		chromedp.WaitVisible(`#run-rows tr[data-run]`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => {
			const col = name => [...document.querySelectorAll("table.runs thead th")].findIndex(th => th.textContent.trim().startsWith(name));
			const out = {};
			for (const r of document.querySelectorAll("#run-rows tr[data-run]")) {
				const cell = name => r.children[col(name)].textContent.trim();
				const badge = r.querySelector("[data-lineage]");
				out[r.dataset.run] = {Lineage: badge ? badge.dataset.lineage + ":" + badge.textContent.trim() : "",
					Model: cell("Model"), Turns: cell("Turns"), Ran: cell("Ran for"), Waited: cell("Waited for a person")};
			}
			return out;
		})()`, &got),
	))
	require.Len(t, got, 4)
	require.Equal(t, "fork:fork", got[fork.ID.String()].Lineage)
	require.Equal(t, "replay:replay", got[rep.ID.String()].Lineage)
	require.Empty(t, got[orig.ID.String()].Lineage, "an original has no badge")
	require.Empty(t, got[transfer.ID.String()].Lineage)

	for _, id := range []uuid.UUID{orig.ID, fork.ID, rep.ID, transfer.ID} {
		r, err := b.store.RunGet(ctx, id)
		require.NoError(t, err)
		require.NotNil(t, r.Model, "run %s has a model", id)
		require.GreaterOrEqual(t, r.Turns, 1)
		c := got[id.String()]
		require.Equal(t, *r.Model, c.Model, "model of %s", id)
		require.Equal(t, strconv.Itoa(r.Turns), c.Turns, "turns of %s", id)
		ran := r.FinishedAt.Sub(*r.StartedAt) - time.Duration(r.WaitedMs)*time.Millisecond
		require.Equal(t, fmtNanos(ran.Nanoseconds()), c.Ran, "ran for of %s: its waits left out", id)
		if id != transfer.ID {
			require.Equal(t, "—", c.Waited, "run %s never waited for a person", id)
			continue
		}
		require.GreaterOrEqual(t, r.WaitedMs, int64(1200), "the transfer waited while the reviewer decided")
		require.Equal(t, fmtNanos(r.WaitedMs*int64(time.Millisecond)), c.Waited, "the wait, in its own column")
		require.NotEqual(t, c.Ran, c.Waited, "waited for a person is not the time it ran")
	}
	require.Equal(t, "demo/research", got[orig.ID.String()].Model)
	require.Equal(t, "demo/transfer", got[transfer.ID.String()].Model)
	require.Empty(t, br.Problems())
}
