package server

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserRunsListSortsByEveryColumnAcrossKeysetPages: every column header of the runs table
// but the compare tick (run id, status, action, input, model, turns, tokens, cost, ran for, waited
// for a person, started, pending) is a link that sorts the table, one way on the first click and the
// other way on the next; in each order, two runs a page, following "Older runs" through the keyset
// pages keeps the order and lists every run once.
func TestBrowserRunsListSortsByEveryColumnAcrossKeysetPages(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	// The run left waiting comes first: its wait, which grows while the test reads the pages,
	// stays the longest, so the "waited" order does not change under the test.
	b.startRun(t, "/flow/travelAgent", `{"destination":"Lisbon"}`, store.RunInterrupted)
	b.startRun(t, "/flow/countdown", `{"from":2}`, store.RunSucceeded)
	research := b.startRun(t, "/flow/researchAgent", `{"topic":"sorting","depth":2}`, store.RunSucceeded)
	rep, err := b.runs.Replay(ctx, runs.ReplayParams{RunID: research.ID, Mode: store.ReplayExact})
	require.NoError(t, err)
	transfer := b.startRun(t, "/flow/transferMoney", `{"to":"bo","amount":3,"currency":"EUR"}`, store.RunInterrupted)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, transfer.ID).ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	b.startRun(t, "/flow/countdown", `{"from":5}`, store.RunSucceeded)
	b.waitStatus(t, rep.ID, store.RunSucceeded)
	b.waitStatus(t, transfer.ID, store.RunSucceeded)
	const total = 6

	// Each column's cells, as the page shows them, compared the way its order compares them.
	num := func(s string) int64 {
		if s == "" || s == "—" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, "number %q", s)
		return n
	}
	dur := func(s string) int64 {
		if s == "" || s == "—" {
			return 0
		}
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "duration %q", s)
		return int64(d)
	}
	text := func(s string) string {
		if s == "—" {
			return ""
		}
		return s
	}
	when := func(s string) int64 {
		at, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return at.UnixNano()
	}
	// usd reads a cost cell: "—", a model without a price, sorts below every priced run.
	usd := func(s string) float64 {
		switch s {
		case "—":
			return -1
		case "<$0.0001":
			return 0.00005
		}
		f, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
		require.NoError(t, err, "cost %q", s)
		return f
	}
	columns := map[string]func(a, b string) int{
		"cost":    func(a, b string) int { return cmp.Compare(usd(a), usd(b)) },
		"id":      strings.Compare,
		"status":  strings.Compare,
		"action":  strings.Compare,
		"input":   strings.Compare,
		"model":   func(a, b string) int { return strings.Compare(text(a), text(b)) },
		"turns":   func(a, b string) int { return cmp.Compare(num(a), num(b)) },
		"tokens":  func(a, b string) int { return cmp.Compare(num(a), num(b)) },
		"ran":     func(a, b string) int { return cmp.Compare(dur(a), dur(b)) },
		"waited":  func(a, b string) int { return cmp.Compare(dur(a), dur(b)) },
		"started": func(a, b string) int { return cmp.Compare(when(a), when(b)) },
		"pending": func(a, b string) int { return cmp.Compare(num(a), num(b)) },
	}
	// cellsJS reads the page's rows: each run's id and the sorted column's value (the full id for
	// the run column, the datetime for started).
	cellsJS := func(col string) string {
		return `(() => {
			const col = "` + col + `";
			const at = [...document.querySelectorAll("table.runs thead th")].findIndex(th => th.dataset.sort === col);
			return [...document.querySelectorAll("#run-rows tr[data-run]")].map(r => {
				const td = r.children[at];
				const v = col === "id" ? r.dataset.run : col === "started" ? td.querySelector("time").getAttribute("datetime") : td.textContent.trim();
				return [r.dataset.run, v];
			});
		})()`
	}

	br := browsertest.New(t)
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Navigate(b.url+"/runs?limit=2"), chromedp.WaitVisible(`#run-rows tr[data-run]`, chromedp.ByQuery)))
	var headers []string
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Evaluate(
		`[...document.querySelectorAll("table.runs thead th")].filter(th => th.querySelector("a")).map(th => th.dataset.sort)`, &headers)))
	want := make([]string, 0, len(columns))
	for col := range columns {
		want = append(want, col)
	}
	require.ElementsMatch(t, want, headers, "every column but the compare tick sorts")

	// follow clicks a link and waits for the page it leads to, until selector is on it. The waits
	// are DOM queries, which chromedp retries across the navigation, not script polls, which can
	// run in the page's old execution context and fail ("Cannot find context").
	follow := func(link, selector string) {
		t.Helper()
		_, err := chromedp.RunResponse(br.Ctx, browsertest.Click(link))
		require.NoError(t, err, "click %s", link)
		require.NoError(t, chromedp.Run(br.Ctx, chromedp.WaitVisible(selector, chromedp.ByQuery)))
	}
	// click clicks a column's header and returns the direction the table is then sorted in.
	click := func(col string) string {
		t.Helper()
		var dir string
		follow(`th[data-sort="`+col+`"] a`, `th[data-sort="`+col+`"]:not([aria-sort="none"])`)
		require.NoError(t, chromedp.Run(br.Ctx,
			chromedp.Evaluate(`document.querySelector('th[data-sort="`+col+`"]').getAttribute("aria-sort")`, &dir)))
		return dir
	}
	for col, compare := range columns {
		var dirs []string
		for range 2 {
			dir := click(col)
			dirs = append(dirs, dir)
			var seen [][2]string
			for page := 1; ; page++ {
				var rows [][2]string
				var next string
				require.NoError(t, chromedp.Run(br.Ctx,
					chromedp.Evaluate(cellsJS(col), &rows),
					chromedp.Evaluate(`(document.querySelector('a[rel="next"]') || {}).href || ""`, &next)))
				require.LessOrEqual(t, len(rows), 2, "%s %s page %d: two a page", col, dir, page)
				require.LessOrEqual(t, page, total/2, "%s %s: the pages end", col, dir)
				seen = append(seen, rows...)
				if next == "" {
					break
				}
				require.Contains(t, next, "cursor=")
				follow(`a[rel="next"]`, `th[data-sort="`+col+`"][aria-sort="`+dir+`"]`)
			}
			ids := map[string]bool{}
			for i, r := range seen {
				ids[r[0]] = true
				if i == 0 {
					continue
				}
				c := compare(seen[i-1][1], r[1])
				if dir == "ascending" {
					require.LessOrEqual(t, c, 0, "%s ascending, across pages: %v", col, seen)
				} else {
					require.GreaterOrEqual(t, c, 0, "%s descending, across pages: %v", col, seen)
				}
			}
			require.Len(t, ids, total, "%s %s: every run once over the pages: %v", col, dir, seen)
			require.NotEqual(t, 0, compare(seen[0][1], seen[len(seen)-1][1]), "%s: the runs differ in it: %v", col, seen)
		}
		require.ElementsMatch(t, []string{"ascending", "descending"}, dirs, "%s sorts both ways", col)
	}
	require.Empty(t, br.Problems())
}
