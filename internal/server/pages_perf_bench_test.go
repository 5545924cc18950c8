package server

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
)

// longTaskObserver is added to every document before its own scripts run: it keeps the end of
// every long task (50 ms or more of main-thread work), from which ms-to-interactive is read.
const longTaskObserver = `window.__loupeLongTasks = [];
try {
	new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__loupeLongTasks.push(e.startTime + e.duration); })
		.observe({ type: "longtask", buffered: true });
} catch (e) {}`

// interactiveJS waits until the page's main thread has been free of long tasks for 500 ms after
// the load event, then answers the time to interactive (the later of DOMContentLoaded's end,
// when ui.js, a module, has run and wired the tree, and the end of the last long task),
// DOMContentLoaded's end, the HTML's last byte received, and the number of tree rows on the page.
const interactiveJS = `(async () => {
	const nav = performance.getEntriesByType("navigation")[0];
	while (!nav.loadEventEnd) await new Promise((r) => setTimeout(r, 10));
	let seen = -1;
	while (seen !== window.__loupeLongTasks.length) {
		seen = window.__loupeLongTasks.length;
		await new Promise((r) => setTimeout(r, 500));
	}
	return {
		tti: Math.max(nav.domContentLoadedEventEnd, ...window.__loupeLongTasks),
		dcl: nav.domContentLoadedEventEnd,
		response: nav.responseEnd,
		rows: document.querySelectorAll("#trace .spantree .span-row[data-span]").length,
	};
})()`

// timeUntil is the body of an async function that starts the clock, runs act(), and stops the
// clock when done() first holds, checked after every DOM mutation under #trace (and every 5 ms,
// for changes a mutation does not announce). It answers the milliseconds (-1 after 30 s) and,
// from the Resource Timing API, the requests the page made meanwhile and the milliseconds they
// took from request to last byte, added up (the part of the time spent waiting on the server).
const timeUntil = `(act, done) => new Promise((resolve) => {
	const root = document.getElementById("trace");
	const t0 = performance.now();
	let over = false;
	const finish = (ms) => {
		over = true; obs.disconnect(); clearInterval(iv);
		const rs = performance.getEntriesByType("resource").filter((e) => e.startTime >= t0);
		resolve({ ms, requests: rs.length, fetchMs: rs.reduce((a, e) => a + e.duration, 0) });
	};
	const check = () => {
		if (over) return;
		if (done()) finish(performance.now() - t0);
		else if (performance.now() - t0 > 30000) finish(-1);
	};
	const obs = new MutationObserver(check);
	obs.observe(root, { subtree: true, childList: true, attributes: true, characterData: true });
	const iv = setInterval(check, 5);
	act();
	check();
})`

// expandJS opens the first closed row of the tree (a click on its toggle) and times it until the
// row says it is open and its children are on the page (fetched from /children and inserted).
const expandJS = `(` + timeUntil + `)(
	() => {
		window.__li = document.querySelector('#trace .spantree .span-row[aria-expanded="false"]');
		window.__li.querySelector("[data-toggle]").click();
	},
	() => {
		const li = window.__li, next = li.nextElementSibling;
		return li.getAttribute("aria-expanded") === "true" && next && Number(next.dataset.depth) > Number(li.dataset.depth);
	})`

// selectJS selects the last row on the page (a click on its name) and times it until the row is
// marked selected and the span panel beside the tree shows that span (fetched from /spans/{id}).
const selectJS = `(` + timeUntil + `)(
	() => {
		const rows = document.querySelectorAll("#trace .spantree .span-row[data-span]:not(.selected)");
		window.__li = rows[rows.length - 1];
		window.__li.querySelector("[data-select]").click();
	},
	() => window.__li.classList.contains("selected") &&
		!!document.querySelector('#span-detail .span-panel[data-span="' + window.__li.dataset.span + '"]'))`

// searchJS types a query into the tree's search box and presses Enter (which searches at once;
// typing alone waits 250 ms for the next key), and times it until the count of matches is shown
// and the first match is highlighted, selected and shown in the span panel.
const searchJS = `(q) => (` + timeUntil + `)(
	() => {
		const input = document.getElementById("tree-find");
		input.focus();
		input.value = q;
		input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
	},
	() => {
		const count = document.querySelector("#trace .search-count")?.textContent ?? "";
		const cur = document.querySelector("#trace .span-row.current-match.selected");
		return /^1 of /.test(count) && !!cur && !!document.querySelector('#span-detail .span-panel[data-span="' + cur.dataset.span + '"]');
	})`

// BenchmarkRunPageInChromium10k opens the run page of a 10,000-span run (seedTrace's
// Genkit-shaped run; LOUPE_BENCH_SPANS sets another size) on its trace tab, in headless Chromium
// over loopback against a real server and database, and reports, as the means over b.N page
// loads (and the slowest of them):
//
//   - ms-to-interactive: from navigation to the later of DOMContentLoaded's end (ui.js, a module,
//     has run and wired the tree by then) and the end of the last long task;
//   - ms-expand: a click on a closed row's toggle until its children are on the page;
//   - ms-select: a click on a row's name until the span panel shows that span;
//   - ms-search: Enter in the search box (query "demo/research", 1,250 model spans) until the
//     count is shown and the first match is highlighted, selected and in the span panel.
//
// Each is measured in the page with performance.now() around the action, until the DOM reflects
// it. Nothing is asserted about the times.
//
//	go test ./internal/server -run '^$' -bench RunPageInChromium10k -benchtime 10x
func BenchmarkRunPageInChromium10k(b *testing.B) {
	spans := 10_000
	if s := os.Getenv("LOUPE_BENCH_SPANS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(b, err)
		spans = n
	}
	tb := setup(b, opts{ingest: true, dev: true})
	runID := seedTrace(b, tb.store, spans)
	_, err := tb.store.Pool().Exec(context.Background(), `ANALYZE spans, traces`)
	require.NoError(b, err)
	br := browsertest.New(b)
	require.NoError(b, br.Run(
		chromedp.EmulateViewport(1440, 900),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(longTaskObserver).Do(ctx)
			return err
		}),
	))
	url := tb.url + "/runs/" + runID.String() + "?tab=trace"

	type loadTimes struct {
		TTI      float64 `json:"tti"`
		DCL      float64 `json:"dcl"`
		Response float64 `json:"response"`
		Rows     int     `json:"rows"`
	}
	type actionTimes struct {
		MS       float64 `json:"ms"`
		Requests int     `json:"requests"`
		FetchMS  float64 `json:"fetchMs"`
	}
	// metric keeps the mean and the largest of one figure over the page loads.
	type metric struct {
		name       string
		sum, worst float64
	}
	metrics := map[string]*metric{}
	var order []string
	note := func(name string, v float64) {
		m := metrics[name]
		if m == nil {
			m = &metric{name: name}
			metrics[name] = m
			order = append(order, name)
		}
		m.sum += v
		m.worst = max(m.worst, v)
	}
	rows, requests := 0, map[string]int{}
	for b.Loop() {
		var lt loadTimes
		var expand, sel, search actionTimes
		require.NoError(b, br.Run(
			chromedp.Navigate(url),
			chromedp.Evaluate(interactiveJS, &lt, awaitPromise),
			chromedp.Evaluate(expandJS, &expand, awaitPromise),
			chromedp.Evaluate(selectJS, &sel, awaitPromise),
			chromedp.Evaluate(`(`+searchJS+`)("demo/research")`, &search, awaitPromise),
		))
		if lt.Rows == 0 {
			b.Fatal("no tree rows on the run page's trace tab")
		}
		rows = lt.Rows
		note("ms-to-interactive", lt.TTI)
		note("ms-DOMContentLoaded", lt.DCL)
		note("ms-html-received", lt.Response)
		for _, a := range []struct {
			name string
			t    actionTimes
		}{{"expand", expand}, {"select", sel}, {"search", search}} {
			if a.t.MS < 0 {
				b.Fatalf("%s: the page did not show the answer within 30 s", a.name)
			}
			note("ms-"+a.name, a.t.MS)
			note("ms-"+a.name+"-fetching", a.t.FetchMS)
			requests[a.name] = a.t.Requests
		}
	}
	n := float64(b.N)
	for _, name := range order {
		b.ReportMetric(metrics[name].sum/n, name)
	}
	for _, name := range []string{"ms-to-interactive", "ms-expand", "ms-select", "ms-search"} {
		b.ReportMetric(metrics[name].worst, "max-"+name)
	}
	b.ReportMetric(float64(rows), "rows-on-load")
	for name, r := range requests {
		b.ReportMetric(float64(r), name+"-requests")
	}
	require.Empty(b, br.Problems())
}

// awaitPromise makes chromedp.Evaluate wait for the promise an expression answers.
func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }
