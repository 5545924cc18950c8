package server

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// traceListRow is one row of the traces list, read in the browser.
type traceListRow struct {
	ID, Name, Status, Service, Input, Tokens, Spans, Duration, Run string
}

const readTraceList = `[...document.querySelectorAll(".traces-list tbody tr")].map(tr => {
	const td = (c) => (tr.querySelector("td." + c) || {}).textContent?.trim().replace(/\s+/g, " ") || "";
	return {ID: tr.dataset.trace, Name: td("name"), Status: td("status"), Service: td("source"), Input: td("input"),
		Tokens: td("tokens"), Spans: td("spans"), Duration: td("duration"),
		Run: (tr.querySelector("[data-run-link]") || {}).href || ""};
})`

// TestBrowserTracesListFiltersSortsAndLinks: the traces list marks a trace failed when any span
// in it failed (its root did not), says how many; it filters, through its form, on status, time,
// service, a root attribute and text in the input; its columns show the service, status, input
// preview, tokens, span count and a duration that is the one the trace page's header shows
// (start to the last end of any span, past the root's own end); its headings sort it both ways;
// and a trace links to its run, whose page links back to the trace.
func TestBrowserTracesListFiltersSortsAndLinks(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true})
	ctx := context.Background()
	run := b.startRun(t, "/flow/researchAgent", `{"topic":"durable execution retries","depth":1}`, store.RunSucceeded)
	b.flushSpans(t, run.ID, 3)

	now := time.Now()
	sp := func(traceID, id, parent, name string, start, end time.Time, code int16, attrs string) store.Span {
		s := store.Span{TraceID: traceID, SpanID: id, Name: name, Kind: 1, StartTime: start.UnixNano(), EndTime: end.UnixNano(),
			StatusCode: code, Attributes: json.RawMessage(attrs), Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`),
			Resource: json.RawMessage(`{}`), Source: store.SpanSourceOTLP}
		if parent != "" {
			s.ParentSpanID = &parent
		}
		return s
	}
	const failing, healthy = "aa000000000000000000000000000001", "bb000000000000000000000000000002"
	t0 := now.Add(-2 * time.Hour) // older than the last hour
	t1 := now.Add(-30 * time.Minute)
	_, err := b.store.SpanIngest(ctx, []store.Span{
		// The root ends after 10 ms and is OK; its child runs 2 s and fails.
		sp(failing, "a000000000000001", "", "handle ticket", t0, t0.Add(10*time.Millisecond), store.StatusOK, `{"env":"prod"}`),
		sp(failing, "a000000000000002", "a000000000000001", "lookup", t0, t0.Add(2*time.Second), store.StatusError, `{}`),
		sp(healthy, "b000000000000001", "", "nightly report", t1, t1.Add(60*time.Second), store.StatusOK, `{"env":"dev"}`),
		sp(healthy, "b000000000000002", "b000000000000001", "step", t1, t1.Add(time.Second), store.StatusOK, `{}`),
		sp(healthy, "b000000000000003", "b000000000000001", "step", t1, t1.Add(time.Second), store.StatusOK, `{}`),
	})
	require.NoError(t, err)
	require.NoError(t, b.store.TraceUsageFold(ctx, nil, []store.TraceService{{TraceID: failing, Service: "support-bot"}}))

	br := browsertest.New(t)
	var rows []traceListRow
	read := chromedp.Evaluate(readTraceList, &rows)
	ids := func() []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	byID := func(id string) traceListRow {
		for _, r := range rows {
			if r.ID == id {
				return r
			}
		}
		t.Fatalf("trace %s is not listed: %v", id, ids())
		return traceListRow{}
	}
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.EmulateViewport(1440, 900),
		chromedp.Navigate(b.url+"/traces"),
		chromedp.WaitVisible(`.traces-list`, chromedp.ByQuery),
		read,
	))
	require.Len(t, rows, 3)
	f := byID(failing)
	require.Equal(t, "failed 1 span", f.Status, "a failed child fails the trace, though its root is OK")
	require.Contains(t, f.Service, "support-bot")
	require.Equal(t, "2.0s", f.Duration, "start to the last end of any span, not the root's 10 ms")
	require.Equal(t, "2", f.Spans)
	require.Equal(t, "ok", byID(healthy).Status)
	mine := rows[0] // newest first: the run's trace
	require.Contains(t, mine.Input, "durable execution retries", "the input preview")
	require.NotEqual(t, "—", mine.Tokens)
	require.Contains(t, mine.Run, "/runs/"+run.ID.String())

	// The trace page's header measures the same duration.
	var head string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/traces/"+failing),
		chromedp.Text(`.trace-head`, &head, chromedp.ByQuery),
	))
	require.Contains(t, head, "· 2.0s ·")

	// Filters, through the form.
	filter := func(field, value string) []string {
		t.Helper()
		sel := `[data-testid="trace-filters"] [name="` + field + `"]`
		require.NoError(t, chromedp.Run(br.Ctx,
			chromedp.Navigate(b.url+"/traces"),
			chromedp.WaitVisible(sel, chromedp.ByQuery),
			chromedp.SetValue(sel, value, chromedp.ByQuery),
			chromedp.Submit(sel, chromedp.ByQuery),
			chromedp.WaitVisible(`[data-testid="trace-filters"] a[href="/traces"]`, chromedp.ByQuery),
			read,
		))
		return ids()
	}
	require.Equal(t, []string{failing}, filter("status", "error"), "status: failed means any span failed")
	require.NotContains(t, filter("status", "ok"), failing)
	require.Equal(t, []string{failing}, filter("service", "support-bot"))
	require.Equal(t, []string{failing}, filter("attr", "env=prod"))
	require.Equal(t, []string{mine.ID}, filter("text", "DURABLE execution"))
	require.ElementsMatch(t, []string{mine.ID, healthy}, filter("since", "1h"))

	// Sorting by a heading, then the other way.
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/traces"),
		browsertest.Click(`[data-sort="duration"]`),
		chromedp.WaitVisible(`[data-sort="duration"][href*="dir=asc"]`, chromedp.ByQuery),
		read,
	))
	require.Equal(t, []string{healthy, failing}, ids()[:2], "longest first: 60 s, then 2 s")
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`[data-sort="duration"]`),
		chromedp.WaitVisible(`[data-sort="duration"]:not([href*="dir=asc"])`, chromedp.ByQuery),
		read,
	))
	require.Equal(t, healthy, ids()[2], "shortest first")
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/traces?sort=spans"),
		read,
	))
	var counts []int
	for _, r := range rows {
		n, err := strconv.Atoi(r.Spans)
		require.NoError(t, err)
		counts = append(counts, n)
	}
	require.IsNonIncreasing(t, counts, "most spans first")
	require.Equal(t, failing, ids()[2], "the 2-span trace last")

	// From a trace to its run and back. The run's trace tab links the trace's downloads.
	var back, otlpHref string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/traces"),
		browsertest.Click(`tr[data-trace="`+mine.ID+`"] [data-run-link]`),
		chromedp.WaitVisible(`[data-trace-link]`, chromedp.ByQuery),
		chromedp.AttributeValue(`[data-download="otlp"]`, "href", &otlpHref, nil, chromedp.ByQuery),
		browsertest.Click(`[data-trace-link]`),
		chromedp.WaitVisible(`#trace-title`, chromedp.ByQuery),
		chromedp.Evaluate(`location.pathname`, &back),
	))
	require.Equal(t, "/traces/"+mine.ID, back)
	require.Equal(t, "/api/v1/traces/"+mine.ID+"/otlp?download", otlpHref)
	require.Empty(t, br.Problems())
}
