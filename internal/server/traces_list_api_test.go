package server

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// TestTraceListAPISortsPagesAndFilters: GET /api/v1/traces sorts by span count either way, and
// paging through it one trace at a time, cursor after cursor, gives the same order as one page;
// service and text filter as the page does; a trace says how many of its spans failed;
// min_duration and max_duration bound the list, on the API and the page.
func TestTraceListAPISortsPagesAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	for _, f := range []string{"otel-js-genai-otlp.jsonl", "genkit-js-1.42-dev.jsonl"} {
		replayFixture(t, b, f)
	}
	type page struct {
		Traces     []store.Trace `json:"traces"`
		NextCursor *string       `json:"next_cursor"`
	}
	list := func(q url.Values) page {
		t.Helper()
		var p page
		require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?"+q.Encode(), &p))
		return p
	}
	for _, dir := range []string{"asc", "desc"} {
		all := list(url.Values{"sort": {"spans"}, "dir": {dir}})
		require.Greater(t, len(all.Traces), 2)
		var paged []string
		cursor := ""
		for range len(all.Traces) + 1 {
			q := url.Values{"sort": {"spans"}, "dir": {dir}, "limit": {"1"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			p := list(q)
			for _, tr := range p.Traces {
				paged = append(paged, tr.TraceID)
			}
			if p.NextCursor == nil {
				break
			}
			cursor = *p.NextCursor
		}
		var ids []string
		for i, tr := range all.Traces {
			ids = append(ids, tr.TraceID)
			if i > 0 {
				prev := all.Traces[i-1].SpanCount
				if dir == "asc" {
					require.LessOrEqual(t, prev, tr.SpanCount)
				} else {
					require.GreaterOrEqual(t, prev, tr.SpanCount)
				}
			}
		}
		require.Equal(t, ids, paged, "paging in the order %s", dir)
	}
	svc := list(url.Values{"service": {"otel-genai-json"}})
	require.NotEmpty(t, svc.Traces)
	for _, tr := range svc.Traces {
		require.Equal(t, "otel-genai-json", tr.Service)
	}
	const agent = "32a6543ea49e8b7b5c3dfd944745d97f"
	for _, tr := range svc.Traces {
		if tr.TraceID == agent {
			require.Equal(t, 1, tr.ErrorSpans, "its book_flight tool failed")
		}
	}
	text := list(url.Values{"text": {"travel-BOT"}})
	require.Len(t, text.Traces, 2, "two traces of the fixture are the travel-bot agent's")
	for _, tr := range text.Traces {
		require.Equal(t, "invoke_agent travel-bot", tr.DisplayName)
	}
	// Duration bounds: each trace of all lies within min_duration..max_duration taken from the
	// list's own extremes, and a bound between two traces' durations splits them.
	all := list(url.Values{"sort": {"duration"}, "dir": {"asc"}, "status": {"ok"}})
	require.Greater(t, len(all.Traces), 2)
	lo, hi := all.Traces[0].Duration(), all.Traces[len(all.Traces)-1].Duration()
	require.Less(t, lo, hi)
	ns := func(d int64) string { return strconv.FormatInt(d, 10) + "ns" }
	require.Len(t, list(url.Values{"status": {"ok"}, "min_duration": {ns(lo)}, "max_duration": {ns(hi)}}).Traces, len(all.Traces))
	longer := list(url.Values{"status": {"ok"}, "min_duration": {ns(lo + 1)}}).Traces
	require.NotEmpty(t, longer)
	for _, tr := range longer {
		require.Greater(t, tr.Duration(), lo)
	}
	for _, tr := range list(url.Values{"status": {"ok"}, "max_duration": {ns(hi - 1)}}).Traces {
		require.Less(t, tr.Duration(), hi)
	}
	// The traces page has the same bounds, and keeps them in its form.
	resp, html := get(t, b.url+"/traces?status=ok&min_duration="+ns(lo+1))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, len(longer), strings.Count(html, "<tr data-trace="))
	require.Contains(t, html, `name="min_duration" value="`+ns(lo+1)+`"`)
	resp, _ = get(t, b.url+"/traces?min_duration=soon")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	var bad struct{}
	require.Equal(t, http.StatusBadRequest, getJSON(t, b.url+"/api/v1/traces?sort=name", &bad))
}
