package trace_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

func TestMillisRoundTripsExactly(t *testing.T) {
	t.Parallel()
	for in, nanos := range map[string]int64{
		"0":                  0,
		"1796002421789.917":  1796002421789917000,
		"1796002421810.0015": 1796002421810001500,
		"1796002421789":      1796002421789000000,
		"1.5e3":              1500000000,
		"12.0000004":         12000000, // beyond nanoseconds: rounded
	} {
		var m trace.Millis
		require.NoError(t, json.Unmarshal([]byte(in), &m), in)
		require.Equal(t, nanos, int64(m), in)
	}
	out, err := json.Marshal(trace.Millis(1796002421810001500))
	require.NoError(t, err)
	require.Equal(t, "1796002421810.0015", string(out))
	var m trace.Millis
	require.Error(t, json.Unmarshal([]byte(`"soon"`), &m))
}

func TestDecodeGenkitNormalizesStatus(t *testing.T) {
	t.Parallel()
	body := func(code int, msg, state string) []byte {
		attrs := `{}`
		if state != "" {
			attrs = `{"genkit:state":"` + state + `"}`
		}
		b, _ := json.Marshal(map[string]any{"traceId": "4C74A721B00E2BEFD7101E2794D8C4B0", "spans": map[string]any{
			"6be520f337a0d748": map[string]any{"spanId": "6be520f337a0d748", "startTime": 1, "endTime": 2,
				"attributes": json.RawMessage(attrs), "displayName": "x", "instrumentationLibrary": map[string]any{"name": "g"},
				"spanKind": "CLIENT", "status": map[string]any{"code": code, "message": msg}}}})
		return b
	}
	for _, tc := range []struct {
		code       int
		msg, state string
		want       int16
	}{
		{1, "boom", "error", store.StatusError}, // Go: 1 is an error
		{2, "boom", "error", store.StatusError}, // JS: 2 is an error
		{0, "", "success", store.StatusOK},      // both SDKs send 0 for success
		{1, "", "success", store.StatusOK},      // JS ok
		{1, "boom", "", store.StatusError},
		{2, "", "", store.StatusError},
		{1, "", "", store.StatusOK},
	} {
		spans, err := trace.DecodeGenkit(body(tc.code, tc.msg, tc.state))
		require.NoError(t, err)
		require.Equal(t, tc.want, spans[0].StatusCode, "%+v", tc)
		require.Equal(t, "4c74a721b00e2befd7101e2794d8c4b0", spans[0].TraceID, "ids are lowercased")
		require.EqualValues(t, 3, spans[0].Kind)
	}
}

func TestDecodeGenkitSanitizesNUL(t *testing.T) {
	t.Parallel()
	spans, err := trace.DecodeGenkit([]byte(`{"traceId":"4c74a721b00e2befd7101e2794d8c4b0","spans":{"6be520f337a0d748":{
		"spanId":"6be520f337a0d748","startTime":1,"endTime":2,"attributes":{"a":"x\u0000y","b":"\\u0000"},
		"displayName":"x","instrumentationLibrary":{"name":"g"},"spanKind":"INTERNAL"}}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"x\ufffdy","b":"\\u0000"}`, string(spans[0].Attributes))
}

// TestDecodersReturnStorableSpans checks that both decoders, not only Ingest, replace what
// PostgreSQL cannot store in every text and JSON field of a span, so what they return can be
// written as it is.
func TestDecodersReturnStorableSpans(t *testing.T) {
	t.Parallel()
	genkit, err := trace.DecodeGenkit([]byte(`{"traceId":"4c74a721b00e2befd7101e2794d8c4b0","spans":{"6be520f337a0d748":{
		"spanId":"6be520f337a0d748","startTime":1,"endTime":2,"attributes":{"a\u0000":"\ud800"},
		"displayName":"n\u0000","instrumentationLibrary":{"name":"g\u0000","version":"` + "\xff" + `"},"spanKind":"INTERNAL",
		"status":{"code":2,"message":"m\u0000"},
		"timeEvents":{"timeEvent":[{"time":1,"annotation":{"description":"e\u0000","attributes":{"k":"\udc00"}}}]},
		"links":[{"context":{"traceId":"4c74a721b00e2befd7101e2794d8c4b1","spanId":"6be520f337a0d749","traceFlags":1},"attributes":{"l":"\u0000"}}]}}}`))
	require.NoError(t, err)
	otlp, rejected, _, err := trace.DecodeOTLP([]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"s\u0000"}}]},
		"scopeSpans":[{"scope":{"name":"g\u0000","version":"v\u0000"},"spans":[{"traceId":"4c74a721b00e2befd7101e2794d8c4b0","spanId":"6be520f337a0d748",
		"name":"n\u0000","startTimeUnixNano":"1","endTimeUnixNano":"2","status":{"code":2,"message":"m\u0000"},
		"attributes":[{"key":"a\u0000","value":{"stringValue":"\ud800"}}],
		"events":[{"timeUnixNano":"1","name":"e\u0000","attributes":[{"key":"k","value":{"stringValue":"\u0000"}}]}],
		"links":[{"traceId":"4c74a721b00e2befd7101e2794d8c4b1","spanId":"6be520f337a0d749","traceState":"t\u0000"}]}]}]}]}`), trace.ContentTypeJSON)
	require.NoError(t, err)
	require.Zero(t, rejected)
	for _, sp := range append(genkit, otlp...) {
		require.Equal(t, "n\uFFFD", sp.Name)
		require.Equal(t, "m\uFFFD", sp.StatusMessage)
		require.Equal(t, "g\uFFFD", sp.Scope)
		require.NoError(t, store.CheckText("scope_version", sp.ScopeVersion))
		for name, doc := range map[string]json.RawMessage{"attributes": sp.Attributes, "events": sp.Events, "links": sp.Links, "resource": sp.Resource} {
			require.NoError(t, store.CheckJSON(name, doc), "%s: %s", name, doc)
		}
		require.Contains(t, string(sp.Events), "e\\ufffd")
	}
}

func TestParseGenkitFilterRefusesTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	_, err := trace.ParseGenkitFilter(`{"eq":{"name":"a\u0000b"}}`)
	require.True(t, trace.IsInputError(err), "%v", err)
	require.EqualError(t, err, "filter/eq/name contains U+0000, which PostgreSQL cannot store")
	_, err = trace.ParseGenkitFilter(`{"contains":{"genkit:input":["ok","\udfff"]}}`)
	require.EqualError(t, err, `filter/contains/genkit:input/1 contains a lone UTF-16 surrogate (\udfff), which PostgreSQL cannot store`)
	fs, err := trace.ParseGenkitFilter(`{"eq":{"name":"\\u0000"}}`)
	require.NoError(t, err, "an escaped backslash is text")
	require.Equal(t, `\u0000`, fs[0].Value)
}

func TestDecodeGenkitPicksStateAndRunIDOutOfAttributes(t *testing.T) {
	t.Parallel()
	decode := func(attrs string) store.Span {
		t.Helper()
		spans, err := trace.DecodeGenkit([]byte(`{"traceId":"4c74a721b00e2befd7101e2794d8c4b0","spans":{"6be520f337a0d748":{
			"spanId":"6be520f337a0d748","startTime":1,"endTime":2,"attributes":` + attrs + `,
			"displayName":"x","instrumentationLibrary":{"name":"g"},"spanKind":"INTERNAL"}}}`))
		require.NoError(t, err, attrs)
		return spans[0]
	}
	const runID = "8f8c8b8a-1d2e-4f5a-9b6c-7d8e9f0a1b2c"
	sp := decode(`{ "n" : -1.5e3 , "nested":{"genkit:state":"success","a":[1,{"b":"}"}]},"s":"q\"}",
		"genkit:state" : "error", "loupe.run.id":"` + runID + `", "t":true }`)
	require.Equal(t, store.StatusError, sp.StatusCode, "the top-level member counts, not a nested one")
	require.Equal(t, runID, sp.RunID.String())

	sp = decode(`{"genkit:state":"error","genkit:state":"success"}`)
	require.Equal(t, store.StatusOK, sp.StatusCode, "a repeated name: the last one wins, as in a map")

	sp = decode(`{"genkit\u003astate":"error"}`)
	require.Equal(t, store.StatusError, sp.StatusCode, "an escaped name is unescaped")

	sp = decode(`{"x":null,"genkit:state":null,"loupe.run.id":42}`)
	require.Equal(t, store.StatusUnset, sp.StatusCode)
	require.Nil(t, sp.RunID)
}

// TestIngestStoresTextPostgreSQLWouldRefuse proves that NUL characters, invalid UTF-8 and lone
// surrogate escapes (Genkit JS sends those when it truncates a string mid-pair), which Go's JSON accepts and PostgreSQL refuses as text, are stored replaced
// by U+FFFD rather than failing the request, and that the trace reads back and summarises.
func TestIngestStoresTextPostgreSQLWouldRefuse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	svc, err := trace.NewService(trace.Config{Store: st})
	require.NoError(t, err)
	const traceID = "5c74a721b00e2befd7101e2794d8c4b0"
	body := []byte(`{"traceId":"` + traceID + `","displayName":"a\u0000b","startTime":1,"endTime":2,"spans":{
		"6be520f337a0d748":{"spanId":"6be520f337a0d748","startTime":1,"endTime":2,"displayName":"a\u0000b",
			"attributes":{"genkit:state":"\ud800","genkit:name":"x\u0000y","genkit:metadata:subtype":"model","genkit:output":"\udc00","bytes":"` + "\xff" + `"},
			"instrumentationLibrary":{"name":"g\u0000"},"spanKind":"INTERNAL","status":{"code":0,"message":"m\u0000"}}}}`)
	res, err := svc.IngestGenkit(ctx, body)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Inserted)

	tree, err := svc.Tree(ctx, traceID)
	require.NoError(t, err)
	require.Equal(t, 1, tree.SpanCount)
	got, err := st.SpansByTrace(ctx, traceID, 1)
	require.NoError(t, err)
	require.Equal(t, "a\uFFFDb", got[0].Name)
	require.Equal(t, "m\uFFFD", got[0].StatusMessage)
	require.Equal(t, "g\uFFFD", got[0].Scope)
	var attrs map[string]string
	require.NoError(t, json.Unmarshal(got[0].Attributes, &attrs))
	require.Equal(t, map[string]string{"genkit:state": "\uFFFD", "genkit:name": "x\uFFFDy",
		"genkit:metadata:subtype": "model", "genkit:output": "\uFFFD", "bytes": "\uFFFD"}, attrs)
	_, err = svc.Turns(ctx, traceID)
	require.NoError(t, err, "the summary reads the sanitised attributes")
}

// TestDecodeReadsGenkitInterruptsAsInterrupts: the interrupted tool spans of the real captures
// (dev and realtime JS, and Go), which Genkit sends as errors, decode as interrupted with no error status; their
// exception event is kept and marked, Go's metadata becomes an "interrupt" event, and the failing
// tool of the OTLP capture stays an error.
func TestDecodeReadsGenkitInterruptsAsInterrupts(t *testing.T) {
	t.Parallel()
	interrupted := map[string]store.Span{}
	for _, pattern := range []string{"genkit-js-1.42-dev.jsonl", "genkit-js-1.42-realtime.jsonl", "genkit-go-1.4.0-interrupt.jsonl"} {
		for _, body := range fixtureBodies(t, pattern) {
			spans, err := trace.DecodeGenkit(body)
			require.NoError(t, err)
			for _, sp := range spans {
				var attrs map[string]any
				require.NoError(t, json.Unmarshal(sp.Attributes, &attrs))
				require.NotEqual(t, store.StatusError, sp.StatusCode, "%s %s: nothing in these captures failed", pattern, sp.Name)
				switch attrs["genkit:state"] {
				case "interrupted":
					require.Equal(t, "error", attrs[trace.AttrOriginalState], "what Genkit sent is kept")
					interrupted[sp.Name] = sp
				case "success":
					require.Equal(t, store.StatusOK, sp.StatusCode, "%s %s", pattern, sp.Name)
				}
			}
		}
	}
	require.Contains(t, interrupted, "confirmTransfer")
	require.Contains(t, interrupted, "add")

	js := interrupted["confirmTransfer"]
	require.Equal(t, store.StatusUnset, js.StatusCode)
	require.Contains(t, string(js.Events), `"exception.type":"ToolInterruptError"`)
	require.Contains(t, string(js.Events), `"loupe.interrupt":true`)
	require.Contains(t, string(js.Events), "exception.stacktrace", "the original event is kept")

	goSpan := interrupted["add"]
	require.Equal(t, store.StatusUnset, goSpan.StatusCode)
	require.Contains(t, goSpan.StatusMessage, "tool execution interrupted")
	var events []struct {
		Name       string
		Attributes map[string]any
	}
	require.NoError(t, json.Unmarshal(goSpan.Events, &events))
	require.Len(t, events, 2)
	require.Equal(t, "exception", events[0].Name)
	require.Equal(t, true, events[0].Attributes["loupe.interrupt"])
	require.Equal(t, "interrupt", events[1].Name)
	require.Equal(t, `{"reason":"negative"}`, events[1].Attributes["interrupt.metadata"])

	failed := 0
	for _, body := range fixtureBodies(t, "otel-js-genai-otlp.jsonl") {
		spans, _, _, err := trace.DecodeOTLP(body, "application/json")
		require.NoError(t, err)
		for _, sp := range spans {
			if sp.StatusCode == store.StatusError {
				failed++
				require.Equal(t, "card declined", sp.StatusMessage)
				require.NotContains(t, string(sp.Attributes), "interrupted")
			}
		}
	}
	require.Positive(t, failed, "a real error stays an error")
}

// TestDecodeGenkitReadsAParentFailedByAnInterruptAsInterrupted: a root span whose error is the
// interrupt that went through it (JS's exception type, or Go's message under another type) is
// interrupted too, so its trace is not an error trace; an ordinary error is untouched.
func TestDecodeGenkitReadsAParentFailedByAnInterruptAsInterrupted(t *testing.T) {
	t.Parallel()
	decode := func(code int, msg, exceptionAttrs string) store.Span {
		t.Helper()
		spans, err := trace.DecodeGenkit([]byte(`{"traceId":"4c74a721b00e2befd7101e2794d8c4b0","spans":{"6be520f337a0d748":{
			"spanId":"6be520f337a0d748","startTime":1,"endTime":2,"displayName":"bookAgent",
			"attributes":{"genkit:type":"action","genkit:metadata:subtype":"flow","genkit:state":"error","genkit:isRoot":true},
			"instrumentationLibrary":{"name":"genkit-tracer"},"spanKind":"INTERNAL",
			"status":{"code":` + strconv.Itoa(code) + `,"message":` + strconv.Quote(msg) + `},
			"timeEvents":{"timeEvent":[{"time":2,"annotation":{"description":"exception","attributes":` + exceptionAttrs + `}}]}}}}`))
		require.NoError(t, err)
		return spans[0]
	}
	js := decode(2, "", `{"exception.type":"ToolInterruptError","exception.stacktrace":"ToolInterruptError\n    at tool.mjs:204:11"}`)
	require.Equal(t, store.StatusUnset, js.StatusCode)
	require.Contains(t, string(js.Attributes), `"genkit:state":"interrupted"`)

	const goMsg = "tool execution interrupted: \n\n{\n  \"reason\": \"negative\"\n}"
	goSpan := decode(1, goMsg, `{"exception.type":"*fmt.wrapError","exception.message":`+strconv.Quote(goMsg)+`}`)
	require.Equal(t, store.StatusUnset, goSpan.StatusCode)
	require.Contains(t, string(goSpan.Events), `"interrupt.metadata":"{\"reason\":\"negative\"}"`)

	failed := decode(2, "card declined", `{"exception.type":"Error","exception.message":"card declined"}`)
	require.Equal(t, store.StatusError, failed.StatusCode)
	require.Contains(t, string(failed.Attributes), `"genkit:state":"error"`)
	require.NotContains(t, string(failed.Events), "loupe.interrupt")
}

// TestDecodeGenkitFastPathMatchesUnmarshal runs FuzzDecodeGenkitFastPath's seeds in every test run,
// and checks that the fast path does take what Genkit sends.
func TestDecodeGenkitFastPathMatchesUnmarshal(t *testing.T) {
	t.Parallel()
	for _, body := range genkitFastPathSeeds(t) {
		requireSameAsUnmarshal(t, body)
	}
	// Most of what Genkit sends takes it; what it declines (an exception's event, a message with
	// an escape) goes through Unmarshal.
	bodies, taken := fixtureBodies(t, "genkit-*.jsonl"), 0
	for _, body := range bodies {
		if trace.DecodeTraceDataFast(body) {
			taken++
		}
	}
	require.Greater(t, taken, len(bodies)*3/4, "%d of %d captured bodies", taken, len(bodies))
}
