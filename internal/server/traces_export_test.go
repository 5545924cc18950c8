package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// exportTraceID is the OTLP trace the export tests send.
const exportTraceID = "5b8efff798038103d269b633813fc60c"

// exportFixture is a trace with what an export must keep: two resources and scopes, every
// attribute type (ints stay ints, doubles doubles, arrays and maps nested), an error status with
// its message, events with attributes, a link, a kind, and a span still running.
func exportFixture() ptrace.Traces {
	td := ptrace.NewTraces()
	tid := pcommon.TraceID([16]byte{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c})
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "shop")
	rs.Resource().Attributes().PutInt("process.pid", 4242)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("shop-tracer")
	ss.Scope().SetVersion("1.2.3")
	root := ss.Spans().AppendEmpty()
	root.SetTraceID(tid)
	root.SetSpanID(pcommon.SpanID([8]byte{1, 1, 1, 1, 1, 1, 1, 1}))
	root.SetName("checkout")
	root.SetKind(ptrace.SpanKindServer)
	root.SetStartTimestamp(1_700_000_000_000_000_123)
	root.SetEndTimestamp(1_700_000_002_000_000_456)
	a := root.Attributes()
	a.PutStr("user", "judy")
	a.PutInt("items", 3)
	a.PutDouble("amount", 10.5)
	a.PutBool("express", true)
	sl := a.PutEmptySlice("tags")
	sl.AppendEmpty().SetStr("gift")
	sl.AppendEmpty().SetInt(7)
	m := a.PutEmptyMap("address")
	m.PutStr("city", "Lyon")
	m.PutEmptyMap("geo").PutDouble("lat", 45.75)
	child := ss.Spans().AppendEmpty()
	child.SetTraceID(tid)
	child.SetSpanID(pcommon.SpanID([8]byte{2, 2, 2, 2, 2, 2, 2, 2}))
	child.SetParentSpanID(root.SpanID())
	child.SetName("charge card")
	child.SetKind(ptrace.SpanKindClient)
	child.SetStartTimestamp(1_700_000_000_500_000_000)
	child.SetEndTimestamp(1_700_000_001_500_000_000)
	child.Status().SetCode(ptrace.StatusCodeError)
	child.Status().SetMessage("card declined")
	ev := child.Events().AppendEmpty()
	ev.SetName("exception")
	ev.SetTimestamp(1_700_000_001_400_000_000)
	ev.Attributes().PutStr("exception.type", "Declined")
	ev.Attributes().PutStr("exception.message", "card declined")
	lk := child.Links().AppendEmpty()
	lk.SetTraceID(pcommon.TraceID([16]byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}))
	lk.SetSpanID(pcommon.SpanID([8]byte{8, 8, 8, 8, 8, 8, 8, 8}))
	lk.Attributes().PutStr("why", "retry of")
	rs2 := td.ResourceSpans().AppendEmpty()
	rs2.Resource().Attributes().PutStr("service.name", "mailer")
	ss2 := rs2.ScopeSpans().AppendEmpty()
	ss2.Scope().SetName("mail")
	mail := ss2.Spans().AppendEmpty()
	mail.SetTraceID(tid)
	mail.SetSpanID(pcommon.SpanID([8]byte{3, 3, 3, 3, 3, 3, 3, 3}))
	mail.SetParentSpanID(root.SpanID())
	mail.SetName("send receipt")
	mail.SetStartTimestamp(1_700_000_001_600_000_000)
	mail.SetEndTimestamp(1_700_000_001_900_000_000)
	mail.Status().SetCode(ptrace.StatusCodeOk)
	return td
}

// storedSpans is a trace's spans as stored, sorted by span id, without their source (an export
// sent back is OTLP, whatever sent it first).
func storedSpans(t *testing.T, st *store.Store, traceID string) []store.Span {
	t.Helper()
	spans, err := st.SpansByTrace(context.Background(), traceID, 0)
	require.NoError(t, err)
	sort.Slice(spans, func(i, j int) bool { return spans[i].SpanID < spans[j].SpanID })
	for i := range spans {
		spans[i].Source = ""
	}
	return spans
}

// requireSameSpans checks that two stores hold the same spans, JSON compared as JSON.
func requireSameSpans(t *testing.T, want, got []store.Span) {
	t.Helper()
	require.Len(t, got, len(want))
	norm := func(raw json.RawMessage) any {
		if len(raw) == 0 {
			return nil
		}
		var v any
		require.NoError(t, json.Unmarshal(raw, &v))
		if m, ok := v.(map[string]any); ok && len(m) == 0 {
			return nil // {} and no value are the same
		}
		if s, ok := v.([]any); ok && len(s) == 0 {
			return nil
		}
		return v
	}
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, norm(w.Attributes), norm(g.Attributes), "attributes of %s", w.Name)
		require.Equal(t, norm(w.Events), norm(g.Events), "events of %s", w.Name)
		require.Equal(t, norm(w.Links), norm(g.Links), "links of %s", w.Name)
		require.Equal(t, norm(w.Resource), norm(g.Resource), "resource of %s", w.Name)
		w.Attributes, w.Events, w.Links, w.Resource = nil, nil, nil, nil
		g.Attributes, g.Events, g.Links, g.Resource = nil, nil, nil, nil
		require.Equal(t, w, g)
	}
}

// TestTraceDownloadsRoundTripThroughOTLPIngest downloads a trace in OTLP's JSON shape, sends it to
// another Loupe's POST /v1/traces and finds the same spans stored there: ids, parents, names,
// kinds, times to the nanosecond, statuses, attributes with their types, events, links, resources
// and scopes. It does so for a trace an OTLP exporter sent and for one a Genkit app sent. The
// download in Loupe's shape is the span tree of GET /api/v1/traces/{id}, as a file.
func TestTraceDownloadsRoundTripThroughOTLPIngest(t *testing.T) {
	t.Parallel()
	from := setup(t, opts{ingest: true, dev: true})
	to := setup(t, opts{ingest: true, dev: true})

	body, err := ptraceotlp.NewExportRequestFromTraces(exportFixture()).MarshalProto()
	require.NoError(t, err)
	resp, out := post(t, from.url+"/v1/traces", trace.ContentTypeProtobuf, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	files, err := filepath.Glob("../trace/testdata/genkit-go-1.4.0/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		resp, out := post(t, from.url+"/api/traces", "application/json", body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	}

	for _, id := range []string{exportTraceID, fixtureTraceID} {
		resp, otlp := get(t, from.url+"/api/v1/traces/"+id+"/otlp?download")
		require.Equal(t, http.StatusOK, resp.StatusCode, otlp)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Equal(t, `attachment; filename=trace-`+id+`.otlp.json`, resp.Header.Get("Content-Disposition"))
		req := ptraceotlp.NewExportRequest()
		require.NoError(t, req.UnmarshalJSON([]byte(otlp)), "the download is OTLP/JSON")
		require.Positive(t, req.Traces().SpanCount())

		resp, out := post(t, to.url+"/v1/traces", trace.ContentTypeJSON, []byte(otlp))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
		require.NotContains(t, string(out), "rejected", "no span of the export is refused")
		requireSameSpans(t, storedSpans(t, from.store, id), storedSpans(t, to.store, id))
	}
	// The fixture's two resources come back as two ResourceSpans, each with its scope.
	_, otlp := get(t, from.url+"/api/v1/traces/"+exportTraceID+"/otlp")
	req := ptraceotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalJSON([]byte(otlp)))
	require.Equal(t, 2, req.Traces().ResourceSpans().Len())
	require.Equal(t, "shop-tracer", req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Scope().Name())
	require.Equal(t, "1.2.3", req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Scope().Version())
	require.Contains(t, otlp, `"intValue":"3"`, "an int attribute stays an int")
	require.Contains(t, otlp, `"doubleValue":10.5`)

	// Loupe's shape, as a file: the span tree.
	resp, tree := get(t, from.url+"/api/v1/traces/"+exportTraceID+"?download")
	require.Equal(t, http.StatusOK, resp.StatusCode, tree)
	require.Equal(t, `attachment; filename=trace-`+exportTraceID+`.json`, resp.Header.Get("Content-Disposition"))
	var tr trace.Tree
	require.NoError(t, json.Unmarshal([]byte(tree), &tr))
	require.Equal(t, 3, tr.SpanCount)
	require.Equal(t, "checkout", tr.Roots[0].Name)

	// Without ?download it is an answer, not a file; an unknown trace is a 404, a bad id a 400.
	resp, _ = get(t, from.url+"/api/v1/traces/"+exportTraceID+"/otlp")
	require.Empty(t, resp.Header.Get("Content-Disposition"))
	resp, _ = get(t, from.url+"/api/v1/traces/"+strings.Repeat("ab", 16)+"/otlp")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get(t, from.url+"/api/v1/traces/nope/otlp")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// The trace page links both downloads.
	_, page := get(t, from.url+"/traces/"+exportTraceID)
	require.Contains(t, page, `href="/api/v1/traces/`+exportTraceID+`?download"`)
	require.Contains(t, page, `href="/api/v1/traces/`+exportTraceID+`/otlp?download"`)
}
