package server

import (
	"context"
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// cmpSpan is a span of a compare fixture: its id's last byte, its parent's (0 for the root), its
// name, and its start and duration in ms from the trace's start.
type cmpSpan struct {
	id, parent byte
	name       string
	at, ms     int64
	failed     bool
}

// sendCompareTrace sends a trace of spans with the trace id whose every byte is tid, and returns
// that id.
func sendCompareTrace(t *testing.T, url string, tid byte, spans []cmpSpan) string {
	t.Helper()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	var traceID [16]byte
	for i := range traceID {
		traceID[i] = tid
	}
	t0 := time.Now().Add(-time.Minute).UnixNano()
	for _, s := range spans {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(traceID))
		sp.SetSpanID(pcommon.SpanID([8]byte{tid, 0, 0, 0, 0, 0, 0, s.id}))
		if s.parent != 0 {
			sp.SetParentSpanID(pcommon.SpanID([8]byte{tid, 0, 0, 0, 0, 0, 0, s.parent}))
		}
		sp.SetName(s.name)
		sp.SetStartTimestamp(pcommon.Timestamp(t0 + s.at*int64(time.Millisecond)))
		sp.SetEndTimestamp(pcommon.Timestamp(t0 + (s.at+s.ms)*int64(time.Millisecond)))
		if s.failed {
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage("boom")
		}
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	resp, out := post(t, url+"/v1/traces", trace.ContentTypeProtobuf, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	return hex.EncodeToString(traceID[:])
}

// compareA and compareB are two runs of one agent: B took a third turn, its second search failed,
// its first search took 4 times as long (its first turn only an eighth longer, not marked), and A
// fetched a page that B did not.
var (
	compareA = []cmpSpan{
		{1, 0, "agent", 0, 1000, false},
		{2, 1, "generate", 10, 400, false},
		{3, 2, "search", 20, 100, false},
		{4, 2, "fetch", 130, 100, false},
		{5, 1, "generate", 500, 400, false},
		{6, 5, "search", 510, 100, false},
	}
	compareB = []cmpSpan{
		{1, 0, "agent", 0, 1500, false},
		{2, 1, "generate", 10, 450, false},
		{3, 2, "search", 20, 400, false},
		{5, 1, "generate", 600, 400, false},
		{6, 5, "search", 610, 100, true},
		{7, 1, "generate", 1100, 300, false},
		{8, 7, "answer", 1110, 50, false},
	}
)

// compareRows reads the compare table's rows: name, only, status changed, slower.
func compareRows(t *testing.T, page string) [][4]string {
	t.Helper()
	re := regexp.MustCompile(`<tr class="[^"]*cmp-row[^"]*" data-name="([^"]*)" data-only="([^"]*)"( data-status-changed)? data-slower="([^"]*)"`)
	var rows [][4]string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		rows = append(rows, [4]string{m[1], m[2], strings.TrimSpace(m[3]), m[4]})
	}
	return rows
}

// TestTraceComparePageAlignsSpansByNamePath compares two traces of one agent: spans line up by
// their name path (the 2nd generate with the 2nd), a span only one trace has shows at its place
// marked with its side, a status that changed and a duration that changed by much are marked, and
// "only what differs" keeps the changed rows with their ancestors. Not exactly two traces, or an
// unknown one, is refused.
func TestTraceComparePageAlignsSpansByNamePath(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	a := sendCompareTrace(t, b.url, 0xa1, compareA)
	bb := sendCompareTrace(t, b.url, 0xb2, compareB)

	resp, page := get(t, b.url+"/traces/compare?trace="+a+"&trace="+bb)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Equal(t, [][4]string{
		{"agent", "", "", "1"},                     // 1 s → 1.5 s: slower
		{"generate", "", "", "0"},                  // 400 → 450 ms: not enough to mark
		{"search", "", "", "1"},                    // 100 → 400 ms
		{"fetch", "A", "", "0"},                    // only in A, in its place
		{"generate #2", "", "", "0"},               // the same duration
		{"search", "", "data-status-changed", "0"}, // failed in B
		{"generate #3", "B", "", "0"},              // B's third turn
		{"answer", "B", "", "0"},                   // under it
	}, compareRows(t, page))
	require.Contains(t, page, "2 only in B")
	require.Contains(t, page, "1 only in A")
	require.Contains(t, page, "1 with another status")
	require.Contains(t, page, `+300ms (+300%)`)
	require.Contains(t, page, `href="/traces/`+a+`"`)
	require.Contains(t, page, `href="/traces/`+bb+`?span=`)

	// Only what differs: the unchanged turns stay, as the parents of the changed spans in them.
	_, page = get(t, b.url+"/traces/compare?trace="+a+"&trace="+bb+"&changes=only")
	var names []string
	for _, r := range compareRows(t, page) {
		names = append(names, r[0])
	}
	require.Equal(t, []string{"agent", "generate", "search", "fetch", "generate #2", "search", "generate #3", "answer"}, names)

	// A trace compared with itself has nothing to show under "only what differs".
	_, page = get(t, b.url+"/traces/compare?trace="+a+"&trace="+a+"&changes=only")
	require.Empty(t, compareRows(t, page))
	require.Contains(t, page, `data-testid="compare-same"`)

	resp, _ = get(t, b.url+"/traces/compare?trace="+a)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = get(t, b.url+"/traces/compare?trace="+a+"&trace=nope")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = get(t, b.url+"/traces/compare?trace="+a+"&trace="+strings.Repeat("cd", 16))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestBrowserTraceCompareFromTheTracesList ticks two traces on the traces list, compares them, and
// narrows the page to what differs.
func TestBrowserTraceCompareFromTheTracesList(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	a := sendCompareTrace(t, b.url, 0xa1, compareA)
	bb := sendCompareTrace(t, b.url, 0xb2, compareB)
	br := browsertest.New(t)
	var path, summary string
	var rows, changedRows int
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/traces"),
		browsertest.Click(`tr[data-trace="`+a+`"] input[name="trace"]`),
		browsertest.Click(`tr[data-trace="`+bb+`"] input[name="trace"]`),
		browsertest.Click(`[data-testid="compare-selected"]`),
		chromedp.WaitVisible(`[data-testid="trace-compare"]`, chromedp.ByQuery),
		chromedp.Evaluate(`location.pathname`, &path),
		chromedp.Text(`[data-testid="compare-summary"]`, &summary, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('tr.cmp-row').length`, &rows),
		browsertest.Click(`[data-testid="compare-changes"]`),
		chromedp.WaitVisible(`[data-testid="compare-all"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('tr.cmp-row.cmp-changed').length`, &changedRows),
	))
	require.Equal(t, "/traces/compare", path)
	require.Contains(t, summary, "only in B")
	require.Equal(t, 8, rows)
	require.Equal(t, 6, changedRows, "agent, search, fetch, search, generate #3, answer")
	require.Empty(t, br.Problems())
}

// TestTraceCompareOfTwo10000SpanTraces compares two 10,000-span traces: the page answers, draws
// its first 2,000 rows and says so, and "only what differs" of two traces alike draws none.
func TestTraceCompareOfTwo10000SpanTraces(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	var ids []string
	for range 2 {
		run := seedTrace(t, b.store, 10000)
		var id string
		require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT trace_id FROM spans WHERE run_id = $1 LIMIT 1`, run).Scan(&id))
		ids = append(ids, id)
	}
	began := time.Now()
	resp, page := get(t, b.url+"/traces/compare?trace="+ids[0]+"&trace="+ids[1])
	t.Logf("compare of two 10,000-span traces: %s, %d bytes", time.Since(began).Round(time.Millisecond), len(page))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `data-testid="compare-capped"`)
	require.Len(t, compareRows(t, page), compareRowCap)
	require.Contains(t, page, "10000 spans in both")
	_, page = get(t, b.url+"/traces/compare?trace="+ids[0]+"&trace="+ids[1]+"&changes=only")
	require.Empty(t, compareRows(t, page))
}
