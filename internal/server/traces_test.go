package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

func post(t *testing.T, url, contentType string, body []byte, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, out
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, body := get(t, url)
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal([]byte(body), v), body)
	}
	return resp.StatusCode
}

func (b *bundle) spanCount(t *testing.T) (spans, traces int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM spans`).Scan(&spans))
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM traces`).Scan(&traces))
	return spans, traces
}

const fixtureTraceID = "4c74a721b00e2befd7101e2794d8c4b0"

// TestGenkitGoFixturesReplayInOrder replays the nine bodies a real Genkit Go v1.4.0 program sent,
// in order (one span per POST, root last, displayName "" and times 0 on non-root bodies), and checks
// the stored trace through every read API.
func TestGenkitGoFixturesReplayInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	files, err := filepath.Glob("../trace/testdata/genkit-go-1.4.0/*.json")
	require.NoError(t, err)
	require.Len(t, files, 9)
	sort.Strings(files)
	for i, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		resp, out := post(t, b.url+"/api/traces", "application/json", body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
		require.Equal(t, "OK", string(out))
		if i < 8 {
			var list trace.GenkitListResponse
			require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/traces", &list))
			require.Len(t, list.Traces, 1)
			require.Equal(t, "", *list.Traces[0].DisplayName, "no name until the root arrives")
		}
	}

	// Genkit's GET /api/traces/{id}.
	var td trace.TraceData
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/traces/"+fixtureTraceID, &td))
	require.Equal(t, fixtureTraceID, td.TraceID)
	require.Equal(t, "agentFlow", *td.DisplayName)
	require.Len(t, td.Spans, 9)
	root := td.Spans["324ed2a586a09a4b"]
	require.Empty(t, root.ParentSpanID)
	require.Equal(t, "agentFlow", root.DisplayName)
	require.EqualValues(t, int64(1796002421789479700), root.StartTime)
	require.EqualValues(t, int64(1796002421789479700), *td.StartTime)
	require.EqualValues(t, int64(1796002421810819000), *td.EndTime)
	require.Equal(t, "genkit-tracer", root.InstrumentationLibrary.Name)
	require.Equal(t, "v1", root.InstrumentationLibrary.Version)
	require.Equal(t, "INTERNAL", root.SpanKind)
	parents := map[string]string{
		"6be520f337a0d748": "8415022591b0bee9", "ef68c2868be015e1": "8415022591b0bee9",
		"94dfd79acb599a72": "d3bdaf16adc94fda", "f9589fef1fb6a79b": "d3bdaf16adc94fda",
		"c539f9a844050257": "ac37f5ef3364d28c", "ac37f5ef3364d28c": "d3bdaf16adc94fda",
		"d3bdaf16adc94fda": "8415022591b0bee9", "8415022591b0bee9": "324ed2a586a09a4b",
	}
	for id, parent := range parents {
		require.Equal(t, parent, td.Spans[id].ParentSpanID, id)
		require.Equal(t, 0, td.Spans[id].Status.Code, "success spans read as Genkit sent them (code 0), as Genkit's own server returns them")
	}
	var attrs map[string]any
	require.NoError(t, json.Unmarshal(td.Spans["ef68c2868be015e1"].Attributes, &attrs))
	require.Equal(t, `{"A":1,"B":10}`, attrs["genkit:input"])
	require.Equal(t, "success", attrs["genkit:state"])

	// Times survive exactly, sub-microsecond digits included, in the raw JSON.
	_, raw := get(t, b.url+"/api/traces/"+fixtureTraceID)
	require.Contains(t, raw, `"startTime":1796002421789.917`)
	require.Contains(t, raw, `"endTime":1796002421810.0015`)

	// Genkit's list: the trace, with only its root span.
	var list trace.GenkitListResponse
	require.Equal(t, http.StatusOK, getJSON(t, b.url+`/api/traces?limit=5&filter={"eq":{"type":"flow"}}`, &list))
	require.Len(t, list.Traces, 1)
	require.Len(t, list.Traces[0].Spans, 1)
	require.Contains(t, list.Traces[0].Spans, "324ed2a586a09a4b")
	require.Empty(t, list.ContinuationToken)
	require.Equal(t, http.StatusOK, getJSON(t, b.url+`/api/traces?filter={"neq":{"name":"agentFlow"}}`, &list))
	require.Empty(t, list.Traces)

	// Loupe's tree.
	var tree trace.Tree
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+fixtureTraceID, &tree))
	require.Equal(t, 9, tree.SpanCount)
	require.Len(t, tree.Roots, 1)
	require.Equal(t, "agentFlow", tree.Roots[0].Name)
	require.Len(t, tree.Roots[0].Children, 1)
	gen := tree.Roots[0].Children[0]
	require.Equal(t, "generate", gen.Name)
	require.Equal(t, []string{"fake/scripted", "add", "generate"}, childNames(gen))
	require.Equal(t, []string{"fake/scripted", "add", "generate"}, childNames(gen.Children[2]))
	require.Equal(t, 9, countNodes(tree.Roots))

	// Turns: three generate spans; a tool call in each of the first two.
	var turns struct {
		Turns []trace.Turn `json:"turns"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+fixtureTraceID+"/turns", &turns))
	require.Len(t, turns.Turns, 3)
	for i, turn := range turns.Turns {
		require.Equal(t, i, turn.Index)
		require.Equal(t, "fake/scripted", turn.Model)
	}
	require.Len(t, turns.Turns[0].ToolCalls, 1)
	require.Equal(t, "add", turns.Turns[0].ToolCalls[0].Name)
	require.Len(t, turns.Turns[1].ToolCalls, 1)
	require.Empty(t, turns.Turns[2].ToolCalls)

	// Replaying the same bodies again duplicates nothing.
	for _, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		resp, _ := post(t, b.url+"/api/traces", "application/json", body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	spans, traces := b.spanCount(t)
	require.Equal(t, 9, spans)
	require.Equal(t, 1, traces)
	tr, err := b.store.TraceGet(context.Background(), fixtureTraceID)
	require.NoError(t, err)
	require.Equal(t, 9, tr.SpanCount)
}

func childNames(n *trace.Node) []string {
	var names []string
	for _, c := range n.Children {
		names = append(names, c.Name)
	}
	return names
}

func countNodes(nodes []*trace.Node) int {
	n := 0
	for _, c := range nodes {
		n += 1 + countNodes(c.Children)
	}
	return n
}

// jsSpanBody builds a body as Genkit JS's TraceServerExporter sends it (js/core/src/tracing/
// exporter.ts): trace-level displayName and times only when the batch holds the root, endTime 0 on
// a realtime start, OTel JS status numbering (2 is an error).
func jsSpanBody(traceID, spanID, parent, name string, start, end float64, attrs map[string]any, statusCode int) []byte {
	span := map[string]any{
		"spanId": spanID, "traceId": traceID, "startTime": start, "endTime": end,
		"attributes": attrs, "displayName": name, "links": []any{},
		"instrumentationLibrary":  map[string]any{"name": "genkit-tracer", "version": "v1"},
		"spanKind":                "INTERNAL",
		"sameProcessAsParentSpan": map[string]any{"value": true},
		"status":                  map[string]any{"code": statusCode},
		"timeEvents":              map[string]any{"timeEvent": []any{}},
	}
	body := map[string]any{"traceId": traceID, "spans": map[string]any{spanID: span}}
	if parent != "" {
		span["parentSpanId"] = parent
	} else {
		body["displayName"], body["startTime"], body["endTime"] = name, start, end
	}
	b, _ := json.Marshal(body)
	return b
}

// TestGenkitJSRealtimeDoubleSendMerges sends every span twice, at start (endTime 0) and at end,
// as Genkit JS's realtime mode does, including an end that overtakes its start, and checks that
// each span is stored once, ended.
func TestGenkitJSRealtimeDoubleSendMerges(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	const traceID = "5d2f9c6e0b8a4f1e9c3d7a2b1e0f4c8d"
	const root, model, tool = "a1b2c3d4e5f60718", "1a2b3c4d5e6f7081", "0f1e2d3c4b5a6978"
	t0 := 1796002500000.125
	send := func(body []byte) {
		resp, out := post(t, b.url+"/api/traces", "application/json", body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	}
	startAttrs := func(name, typ string) map[string]any {
		return map[string]any{"genkit:name": name, "genkit:type": typ, "genkit:path": "/{" + name + "}"}
	}
	endAttrs := func(name, typ, state string) map[string]any {
		a := startAttrs(name, typ)
		a["genkit:state"] = state
		a["genkit:output"] = `"done"`
		return a
	}
	send(jsSpanBody(traceID, root, "", "jsFlow", t0, 0, startAttrs("jsFlow", "flow"), 0))
	send(jsSpanBody(traceID, model, root, "googleai/gemini", t0+1, 0, startAttrs("googleai/gemini", "model"), 0))
	// The tool's end overtakes its start.
	send(jsSpanBody(traceID, tool, root, "lookup", t0+5, t0+6, endAttrs("lookup", "tool", "error"), 2))
	send(jsSpanBody(traceID, tool, root, "lookup", t0+5, 0, startAttrs("lookup", "tool"), 0))

	var tree trace.Tree
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+traceID, &tree))
	require.True(t, tree.Roots[0].Running, "the root is shown running before its end arrives")
	require.True(t, tree.Roots[0].Children[0].Running)
	require.False(t, tree.Roots[0].Children[1].Running, "a late start must not un-end a span")

	send(jsSpanBody(traceID, model, root, "googleai/gemini", t0+1, t0+4, endAttrs("googleai/gemini", "model", "success"), 0))
	send(jsSpanBody(traceID, root, "", "jsFlow", t0, t0+10, endAttrs("jsFlow", "flow", "success"), 0))

	spans, traces := b.spanCount(t)
	require.Equal(t, 3, spans, "each span stored once")
	require.Equal(t, 1, traces)
	var td trace.TraceData
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/traces/"+traceID, &td))
	require.Len(t, td.Spans, 3)
	for id, sp := range td.Spans {
		require.NotZero(t, sp.EndTime, id)
	}
	require.Equal(t, 2, td.Spans[tool].Status.Code, "JS's error code stays an error")
	require.Equal(t, "jsFlow", *td.DisplayName)
	require.EqualValues(t, int64(1796002500000125000), *td.StartTime)
	require.EqualValues(t, int64(1796002500010125000), *td.EndTime)
	tr, err := b.store.TraceGet(context.Background(), traceID)
	require.NoError(t, err)
	require.Equal(t, 3, tr.SpanCount)
}

// TestGenkitGoErrorStatusIsNormalized checks Go's numbering (1 is an error) against genkit:state.
func TestGenkitGoErrorStatusIsNormalized(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	body := []byte(`{"traceId":"6e0a1b2c3d4e5f60718293a4b5c6d7e8","displayName":"f","startTime":1,"endTime":2,
		"spans":{"1234567890abcdef":{"spanId":"1234567890abcdef","traceId":"6e0a1b2c3d4e5f60718293a4b5c6d7e8",
		"startTime":1,"endTime":2,"attributes":{"genkit:state":"error","genkit:name":"f"},"displayName":"f",
		"instrumentationLibrary":{"name":"genkit-tracer","version":"v1"},"spanKind":"INTERNAL",
		"status":{"code":1,"message":"boom"},"timeEvents":{}}}}`)
	resp, out := post(t, b.url+"/api/traces", "application/json", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	var td trace.TraceData
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/traces/6e0a1b2c3d4e5f60718293a4b5c6d7e8", &td))
	require.Equal(t, 2, td.Spans["1234567890abcdef"].Status.Code)
	require.Equal(t, "boom", td.Spans["1234567890abcdef"].Status.Message)
	var list struct {
		Traces []store.Trace `json:"traces"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?status=error", &list))
	require.Len(t, list.Traces, 1)
}

// TestOTLPFromARealExporter points otel-go's own otlptracehttp exporter, gzip on, at the server.
func TestOTLPFromARealExporter(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(b.url+"/v1/traces"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	require.NoError(t, err)
	res := resource.NewSchemaless(attribute.String("service.name", "otlp-test"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	tracer := tp.Tracer("test-scope")
	rctx, root := tracer.Start(ctx, "checkout")
	_, child := tracer.Start(rctx, "charge-card")
	child.SetAttributes(attribute.Int("amount", 42), attribute.StringSlice("tags", []string{"a", "b"}))
	child.AddEvent("retry", oteltrace.WithAttributes(attribute.Int("attempt", 2)))
	child.End()
	root.End()
	require.NoError(t, tp.Shutdown(ctx))

	traceID := root.SpanContext().TraceID().String()
	var tree trace.Tree
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+traceID, &tree))
	require.Len(t, tree.Roots, 1)
	require.Equal(t, "checkout", tree.Roots[0].Name)
	require.Equal(t, "otlp", tree.Roots[0].Source)
	require.Equal(t, "test-scope", tree.Roots[0].Scope)
	require.JSONEq(t, `{"service.name":"otlp-test"}`, string(tree.Roots[0].Resource))
	c := tree.Roots[0].Children[0]
	require.Equal(t, "charge-card", c.Name)
	require.JSONEq(t, `{"amount":42,"tags":["a","b"]}`, string(c.Attributes))
	require.Contains(t, string(c.Events), `"name":"retry"`)
	require.Equal(t, child.SpanContext().SpanID().String(), c.SpanID)
}

// TestOTLPJSONAndPartialSuccess sends OTLP JSON, and a protobuf request with one span lacking a
// trace id, which is answered with a partial success naming the rejected span.
func TestOTLPJSONAndPartialSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	good := ss.Spans().AppendEmpty()
	good.SetName("good")
	good.SetTraceID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	good.SetSpanID([8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	good.SetStartTimestamp(1000)
	good.SetEndTimestamp(2000)
	bad := ss.Spans().AppendEmpty()
	bad.SetName("bad")
	bad.SetSpanID([8]byte{8, 7, 6, 5, 4, 3, 2, 1})

	req := ptraceotlp.NewExportRequestFromTraces(td)
	pb, err := req.MarshalProto()
	require.NoError(t, err)
	resp, out := post(t, b.url+"/v1/traces", "application/x-protobuf", gzipBytes(t, pb), "Content-Encoding", "gzip")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	require.Equal(t, "application/x-protobuf", resp.Header.Get("Content-Type"))
	er := ptraceotlp.NewExportResponse()
	require.NoError(t, er.UnmarshalProto(out))
	require.EqualValues(t, 1, er.PartialSuccess().RejectedSpans())
	require.Contains(t, er.PartialSuccess().ErrorMessage(), `"bad"`)

	// The same request as JSON: the good span merges, the answer is JSON.
	js, err := req.MarshalJSON()
	require.NoError(t, err)
	resp, out = post(t, b.url+"/v1/traces", "application/json", js)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Contains(t, string(out), `"rejectedSpans"`)
	spans, _ := b.spanCount(t)
	require.Equal(t, 1, spans)

	// A clean request answers an empty response.
	td2 := ptrace.NewTraces()
	td.ResourceSpans().At(0).CopyTo(td2.ResourceSpans().AppendEmpty())
	td2.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(s ptrace.Span) bool { return s.Name() == "bad" })
	pb2, err := ptraceotlp.NewExportRequestFromTraces(td2).MarshalProto()
	require.NoError(t, err)
	resp, out = post(t, b.url+"/v1/traces", "application/x-protobuf", pb2)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	er = ptraceotlp.NewExportResponse()
	require.NoError(t, er.UnmarshalProto(out))
	require.Zero(t, er.PartialSuccess().RejectedSpans())
}

// errMessage reads the message of a JSON error: Loupe's {"error":{…}} or OTLP's Status.
func errMessage(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error   struct{ Message string } `json:"error"`
		Message string                   `json:"message"`
	}
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	return e.Error.Message + e.Message
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestBadIngestIsRefusedAndWritesNothing covers the limits: too large (plain and decompressed)
// is 413; malformed JSON, protobuf or gzip and invalid ids are 400 naming the problem; and a
// refused request, even one whose later span is the bad one, stores nothing.
func TestBadIngestIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true, maxBody: 64 << 10})
	fixture, err := os.ReadFile("../trace/testdata/genkit-go-1.4.0/0001.json")
	require.NoError(t, err)

	big := bytes.Repeat([]byte("x"), 65<<10)
	resp, out := post(t, b.url+"/api/traces", "application/json", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(out))
	require.Contains(t, string(out), "ingest limit")

	// OTLP/HTTP: an unsupported Content-Type is 415, answered as an OTLP Status; protobuf sent
	// as JSON is a 400 in OTLP's JSON Status shape.
	resp, out = post(t, b.url+"/v1/traces", "text/plain", []byte("hello"))
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, string(out))
	var st status.Status
	require.NoError(t, proto.Unmarshal(out, &st))
	require.Contains(t, st.GetMessage(), `Content-Type "text/plain"`)
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("proto-as-json")
	sp.SetTraceID([16]byte{1: 1})
	sp.SetSpanID([8]byte{1: 1})
	pb, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	resp, out = post(t, b.url+"/v1/traces", "application/json", pb)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(out))
	var jst struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(out, &jst), string(out))
	require.Equal(t, 3, jst.Code, string(out))
	require.Contains(t, jst.Message, "malformed OTLP JSON")

	bomb := gzipBytes(t, bytes.Repeat([]byte(" "), 1<<20)) // small compressed, 1 MiB inflated
	resp, out = post(t, b.url+"/v1/traces", "application/json", bomb, "Content-Encoding", "gzip")
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(out))
	require.Contains(t, string(out), "decompressed body exceeds")

	cases := []struct {
		name, path, ct string
		body           []byte
		header         []string
		want           string
	}{
		{"truncated json", "/api/traces", "application/json", fixture[:len(fixture)/2], nil, "malformed TraceData JSON"},
		{"bad trace id", "/api/traces", "application/json", bytes.Replace(fixture, []byte(`"traceId":"4c74a721b00e2befd7101e2794d8c4b0","displayName"`), []byte(`"traceId":"xyz","displayName"`), 1), nil, `traceId "xyz" is not 32 hex digits`},
		{"bad parent id", "/api/traces", "application/json", bytes.Replace(fixture, []byte(`"parentSpanId":"8415022591b0bee9"`), []byte(`"parentSpanId":"nothex"`), 1), nil, `parentSpanId "nothex"`},
		{"second span bad", "/api/traces", "application/json", []byte(`{"traceId":"4c74a721b00e2befd7101e2794d8c4b0","spans":{
			"aaaaaaaaaaaaaaaa":{"spanId":"aaaaaaaaaaaaaaaa","startTime":1,"endTime":2,"attributes":{},"displayName":"ok","instrumentationLibrary":{"name":"x"},"spanKind":"INTERNAL"},
			"zzzz":{"spanId":"zzzz","startTime":1,"endTime":2,"attributes":{},"displayName":"bad","instrumentationLibrary":{"name":"x"},"spanKind":"INTERNAL"}}}`), nil, `spanId "zzzz"`},
		{"attributes not an object", "/api/traces", "application/json", bytes.Replace(fixture, []byte(`"attributes":{`), []byte(`"attributes":[{`), 1), nil, "malformed TraceData JSON"},
		{"malformed protobuf", "/v1/traces", "application/x-protobuf", []byte{0x0a, 0xff, 0xff, 0xff}, nil, "malformed OTLP protobuf"},
		{"malformed otlp json", "/v1/traces", "application/json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"nothex"}]}]}]}`), nil, "malformed OTLP JSON"},
		{"malformed gzip", "/v1/traces", "application/x-protobuf", []byte("not gzip"), []string{"Content-Encoding", "gzip"}, "malformed gzip"},
	}
	for _, tc := range cases {
		resp, out := post(t, b.url+tc.path, tc.ct, tc.body, tc.header...)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", tc.name, out)
		if tc.path == "/v1/traces" && tc.ct == "application/x-protobuf" {
			var st status.Status
			require.NoError(t, proto.Unmarshal(out, &st), tc.name)
			require.Contains(t, st.GetMessage(), tc.want, tc.name)
			continue
		}
		require.Contains(t, errMessage(t, out), tc.want, tc.name)
	}

	for _, path := range []string{"/api/traces/xyz", "/api/v1/traces/xyz", "/api/v1/traces/xyz/turns"} {
		resp, body := get(t, b.url+path)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, path)
		require.Contains(t, errMessage(t, []byte(body)), `trace id "xyz"`, path)
	}
	// An unknown trace is Genkit's own answer: 200 with no body, which its CLI reads as not found.
	resp2, body := get(t, b.url+"/api/traces/"+strings.Repeat("ab", 16))
	require.Equal(t, http.StatusOK, resp2.StatusCode, body)
	require.Empty(t, body)
	for _, q := range []string{`filter={"like":{"name":"x"}}`, `filter=nope`, `limit=0`, `continuationToken=abc`} {
		resp, body := get(t, b.url+"/api/traces?"+q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", q, body)
	}
	for _, q := range []string{`status=weird`, `since=yesterday`, `cursor=zzz`, `run_id=12`, `source=zzz`, `attr.=x`, `limit=1001`, `limit=0`, `min_duration=soon`, `max_duration=-1s`} {
		resp, body := get(t, b.url+"/api/v1/traces?"+q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", q, body)
	}

	spans, traces := b.spanCount(t)
	require.Zero(t, spans, "a refused request writes nothing")
	require.Zero(t, traces)
}

// TestIngestNeedsTokenOffLoopback binds the server to every interface: ingest then needs the
// configured token, and with no token configured it is refused outright.
func TestIngestNeedsTokenOffLoopback(t *testing.T) {
	t.Parallel()
	fixture, err := os.ReadFile("../trace/testdata/genkit-go-1.4.0/0009.json")
	require.NoError(t, err)

	b := setup(t, opts{ingest: true, addr: "0.0.0.0:0", token: "s3cret", baseHost: "127.0.0.1"})
	resp, out := post(t, b.url+"/api/traces", "application/json", fixture)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(out))
	resp, out = post(t, b.url+"/api/traces", "application/json", fixture, "Authorization", "Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(out))
	resp, out = post(t, b.url+"/v1/traces", "application/x-protobuf", []byte{}, "Authorization", "Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(out))
	spans, _ := b.spanCount(t)
	require.Zero(t, spans)
	resp, out = post(t, b.url+"/api/traces", "application/json", fixture, "Authorization", "Bearer s3cret")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	resp, out = post(t, b.url+"/v1/traces", "application/x-protobuf", []byte{}, "Authorization", "bearer s3cret")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the scheme is case-insensitive: %s", out)

	// Genkit's reads give traces away, so off loopback they need the token (or a signed-in user)
	// too.
	const traceID = "4c74a721b00e2befd7101e2794d8c4b0"
	for _, path := range []string{"/api/traces", "/api/traces/" + traceID} {
		resp, body := get(t, b.url+path)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", path, body)
		require.Contains(t, body, "LOUPE_INGEST_TOKEN")
		require.NotContains(t, body, traceID)
		resp, body = get(t, b.url+path, "Authorization", "Bearer wrong")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", path, body)
		resp, body = get(t, b.url+path, "Authorization", "Bearer s3cret")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		require.Contains(t, body, traceID)
	}

	open := setup(t, opts{ingest: true, addr: "0.0.0.0:0", baseHost: "127.0.0.1"})
	resp, out = post(t, open.url+"/api/traces", "application/json", fixture, "Authorization", "Bearer anything")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, string(out), "LOUPE_INGEST_TOKEN is not set")
	resp, body := get(t, open.url+"/api/traces")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
	require.Contains(t, body, "LOUPE_INGEST_TOKEN is not set")

	local := setup(t, opts{ingest: true})
	resp, out = post(t, local.url+"/api/traces", "application/json", fixture)
	require.Equal(t, http.StatusOK, resp.StatusCode, "loopback ingest needs no token, like Genkit's server: %s", out)
	dev := setup(t, opts{ingest: true, dev: true})
	resp, out = post(t, dev.url+"/api/traces", "application/json", fixture)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	for _, path := range []string{"/api/traces/", "/api/v1/traces/", "/api/v1/traces/turns/", "/traces/"} {
		if path == "/api/v1/traces/turns/" {
			path = "/api/v1/traces/" + strings.ToUpper(traceID) + "/turns"
		} else {
			path += strings.ToUpper(traceID)
		}
		resp, body := get(t, dev.url+path)
		require.Equal(t, http.StatusOK, resp.StatusCode, "ids are read in either case: %s: %s", path, body)
	}
	resp, body = get(t, dev.url+"/api/v1/traces/"+strings.Repeat("0", 32))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "all zeros")
	resp, _ = post(t, local.url+"/api/traces", "application/json", fixture, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a cross-site browser request is refused")
}

// TestTreeKeepsOrphansAndShowsRunningSpans stores a trace whose root is running, with a span whose
// parent never arrived, and a parent loop.
func TestTreeKeepsOrphansAndShowsRunningSpans(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	const traceID = "7a1b2c3d4e5f60718293a4b5c6d7e8f9"
	sp := func(id, parent string, start, end int64) store.Span {
		s := store.Span{TraceID: traceID, SpanID: id, Name: "n" + id[:2], StartTime: start, EndTime: end, Source: store.SpanSourceOTLP}
		if parent != "" {
			s.ParentSpanID = &parent
		}
		return s
	}
	_, err := b.traces.Ingest(context.Background(), "otlp", []store.Span{
		sp("1000000000000000", "", 10, 0),                  // running root
		sp("2000000000000000", "1000000000000000", 20, 30), // child
		sp("3000000000000000", "9999999999999999", 15, 25), // orphan: parent never arrived
		sp("4000000000000000", "5000000000000000", 40, 50), // loop 4 -> 5 -> 4
		sp("5000000000000000", "4000000000000000", 41, 0),  // running, in the loop
		sp("6000000000000000", "2000000000000000", 21, 22), // grandchild
	})
	require.NoError(t, err)
	var tree trace.Tree
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+traceID, &tree))
	require.Equal(t, 6, tree.SpanCount)
	require.Len(t, tree.Roots, 1)
	root := tree.Roots[0]
	require.True(t, root.Running)
	require.Zero(t, root.DurationNS)
	require.Equal(t, 6, countNodes(tree.Roots), "no span is lost")
	var orphans []string
	for _, c := range root.Children {
		if c.Orphan {
			orphans = append(orphans, c.SpanID)
		}
	}
	require.Contains(t, orphans, "3000000000000000")
	require.Len(t, orphans, 2, "the orphan, and one member of the loop")
	ids := make([]string, len(root.Children))
	for i, c := range root.Children {
		ids[i] = c.SpanID
	}
	require.Equal(t, []string{"3000000000000000", "2000000000000000", "5000000000000000"}, ids, "orphans join the root's children in start order")
	loop := root.Children[2]
	require.True(t, loop.Orphan)
	require.True(t, loop.Running)
	require.Equal(t, "4000000000000000", loop.Children[0].SpanID)
	require.EqualValues(t, 10, root.Children[1].DurationNS)
	require.Equal(t, "6000000000000000", root.Children[1].Children[0].SpanID)
	var trs struct {
		Traces []store.Trace `json:"traces"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?status=running", &trs))
	require.Len(t, trs.Traces, 1)
}

// TestAPITraceListPagesAndFilters checks Loupe's own list: keyset paging and filters.
func TestAPITraceListPagesAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	var spans []store.Span
	for i := range 7 {
		name := "alpha"
		if i >= 4 {
			name = "beta"
		}
		spans = append(spans, store.Span{TraceID: fmt.Sprintf("%032x", i+1), SpanID: fmt.Sprintf("%016x", i+1),
			Name: name, StartTime: int64(i+1) * int64(time.Second), EndTime: int64(i+1)*int64(time.Second) + 5,
			Attributes: json.RawMessage(fmt.Sprintf(`{"env":"e%d"}`, i%2)), Source: store.SpanSourceOTLP})
	}
	_, err := b.traces.Ingest(context.Background(), "otlp", spans)
	require.NoError(t, err)
	type page struct {
		Traces     []store.Trace `json:"traces"`
		NextCursor *string       `json:"next_cursor"`
	}
	var all []string
	url := b.url + "/api/v1/traces?limit=3"
	for {
		var p page
		require.Equal(t, http.StatusOK, getJSON(t, url, &p))
		for _, tr := range p.Traces {
			all = append(all, tr.TraceID)
		}
		if p.NextCursor == nil {
			break
		}
		url = b.url + "/api/v1/traces?limit=3&cursor=" + *p.NextCursor
	}
	require.Len(t, all, 7)
	require.Equal(t, fmt.Sprintf("%032x", 7), all[0])

	var p page
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?name=beta", &p))
	require.Len(t, p.Traces, 3)
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?q=LPH&attr.env=e0", &p))
	require.Len(t, p.Traces, 2)
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?since="+time.Unix(3, 0).UTC().Format(time.RFC3339)+"&until=5000000000", &p))
	require.Len(t, p.Traces, 2)
	require.Equal(t, http.StatusOK, getJSON(t, b.url+`/api/v1/traces?filter={"gte":{"start":6000}}`, &p))
	require.Len(t, p.Traces, 2)

	_, body := get(t, b.url+"/metrics")
	require.Contains(t, body, `loupe_trace_ingest_spans_total{result="inserted",source="otlp"} 7`)
	require.Contains(t, body, "loupe_trace_ingest_group_spans_sum 7")
}

// TestBodyLimitsAreBinaryAndIngestHasItsOwn: the general limit (--body-limit, 16 MiB by default)
// refuses a larger body with a 413 that names the limit, and does not apply to ingest, whose own
// limit (LOUPE_INGEST_MAX_BODY) rules there.
func TestBodyLimitsAreBinaryAndIngestHasItsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true, maxBody: 32 << 20})
	between := bytes.Repeat([]byte("x"), 16_500_000) // over 16 MB, under 16 MiB
	resp, out := post(t, b.url+"/login", "application/x-www-form-urlencoded", between)
	require.NotEqual(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "16M means 16 MiB: %s", out)

	over := bytes.Repeat([]byte("x"), 17<<20)
	resp, out = post(t, b.url+"/login", "application/x-www-form-urlencoded", over, "Accept", "application/json")
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(out))
	require.Contains(t, errMessage(t, out), "exceeds the limit of 16777216 bytes")

	resp, out = post(t, b.url+"/api/traces", "application/json", over)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "ingest's own 32 MiB limit applies: %s", out)
	require.Contains(t, errMessage(t, out), "malformed TraceData JSON")
}
