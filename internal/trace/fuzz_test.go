package trace_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// The decoders take bytes from programs nobody here wrote. The fuzz targets check that they never
// panic, that what they refuse is the client's mistake (a 400, never a 500), and that what they
// return is spans the database takes as they are. They need no database; `make fuzz` runs each
// for FUZZTIME.

// fixtureBodies returns the request bodies of the captures in testdata/fixtures whose name
// matches pattern, in file and line order.
func fixtureBodies(f testing.TB, pattern string) [][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "fixtures", pattern))
	require.NoError(f, err)
	require.NotEmpty(f, files, pattern)
	var bodies [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		for line := range bytes.Lines(b) {
			var req struct{ Body string }
			require.NoError(f, json.Unmarshal(line, &req))
			bodies = append(bodies, []byte(req.Body))
		}
	}
	return bodies
}

// requireStorable checks what the database and the trace reads rely on in a decoded span.
func requireStorable(t *testing.T, sp store.Span, source string) {
	t.Helper()
	require.True(t, trace.ValidTraceID(sp.TraceID), sp.TraceID)
	require.True(t, trace.ValidSpanID(sp.SpanID), sp.SpanID)
	if sp.ParentSpanID != nil {
		require.True(t, trace.ValidSpanID(*sp.ParentSpanID), *sp.ParentSpanID)
	}
	require.Positive(t, sp.StartTime)
	require.True(t, sp.EndTime == 0 || sp.EndTime >= sp.StartTime, "end %d before start %d", sp.EndTime, sp.StartTime)
	if source == store.SpanSourceGenkit {
		// DecodeGenkit refuses other codes; OTLP's are stored as sent (see FromOTLP).
		require.Contains(t, []int16{store.StatusUnset, store.StatusOK, store.StatusError}, sp.StatusCode)
	}
	require.Equal(t, source, sp.Source)
	for name, text := range map[string]string{"name": sp.Name, "status_message": sp.StatusMessage, "scope": sp.Scope, "scope_version": sp.ScopeVersion} {
		require.NoError(t, store.CheckText(name, text))
	}
	for name, doc := range map[string]json.RawMessage{"attributes": sp.Attributes, "events": sp.Events, "links": sp.Links, "resource": sp.Resource} {
		if doc == nil && name != "attributes" {
			continue // the column's default
		}
		require.True(t, json.Valid(doc), "%s: %q", name, doc)
		require.NoError(t, store.CheckJSON(name, doc))
	}
	require.Equal(t, byte('{'), bytes.TrimSpace(sp.Attributes)[0], "attributes are an object")
	// Ingest scans every ended span's attributes for the trace list's totals; that never panics.
	f := trace.FactsOf(&sp)
	_ = trace.SpanKind(&f)
}

// FuzzDecodeGenkit decodes POST /api/traces bodies, then renders what it accepted as Genkit's
// TraceData (as GET /api/traces/{id} does) and decodes that again: the same spans come back.
func FuzzDecodeGenkit(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "genkit-go-1.4.0", "*.json"))
	require.NoError(f, err)
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
	}
	for _, b := range fixtureBodies(f, "genkit-*.jsonl") {
		f.Add(b)
	}
	f.Add(genkitBody(validTraceID, "", "6be520f337a0d748", `"spanId":"6be520f337a0d748","startTime":1,"endTime":0,"status":{"code":1,"message":"m\u0000"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		spans, err := trace.DecodeGenkit(body)
		if err != nil {
			require.True(t, trace.IsInputError(err), "%T %v", err, err)
			require.NoError(t, store.CheckText("message", err.Error()), "the 400's message is safe to log")
			return
		}
		if len(spans) == 0 {
			return // an empty spans object: nothing to store
		}
		ids := map[string]bool{}
		for _, sp := range spans {
			requireStorable(t, sp, store.SpanSourceGenkit)
			ids[sp.SpanID] = true
		}
		if len(ids) < len(spans) {
			return // two keys with one spanId: a rendering holds one of them
		}
		rendered, err := json.Marshal(trace.ToGenkit(&store.Trace{TraceID: spans[0].TraceID}, spans))
		require.NoError(t, err)
		again, err := trace.DecodeGenkit(rendered)
		require.NoError(t, err, "%s", rendered)
		require.Len(t, again, len(spans))
		byID := map[string]store.Span{}
		for _, sp := range again {
			byID[sp.SpanID] = sp
		}
		for _, want := range spans {
			got := byID[want.SpanID]
			for _, sp := range []*store.Span{&want, &got} {
				// Rendering compacts the JSON (and escapes <, > and & as encoding/json does).
				sp.Attributes, sp.Events, sp.Links = compact(t, sp.Attributes), compact(t, sp.Events), compact(t, sp.Links)
			}
			require.Equal(t, want, got, "%s", rendered)
		}
	})
}

// FuzzDecodeGenkitFastPath checks DecodeGenkit's fast path against jsonv2.Unmarshal, which it
// stands in for: every body decodes to the same spans, or is refused by both, whichever path
// takes it; the error's words may differ only where the fast path declined.
func FuzzDecodeGenkitFastPath(f *testing.F) {
	for _, b := range genkitFastPathSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		requireSameAsUnmarshal(t, body)
	})
}

// genkitFastPathSeeds are Genkit's captured bodies and variations on what the fast path declines.
func genkitFastPathSeeds(f testing.TB) [][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "genkit-go-1.4.0", "*.json"))
	require.NoError(f, err)
	var seeds [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		seeds = append(seeds, b)
	}
	seeds = append(seeds, fixtureBodies(f, "genkit-*.jsonl")...)
	span := `"spanId":"6be520f337a0d748","traceId":"` + validTraceID + `","startTime":1796002421789.917,"endTime":1796002421791,` +
		`"attributes":{"genkit:type":"action","genkit:state":"error"},"displayName":"d","links":[],"spanKind":"INTERNAL",` +
		`"sameProcessAsParentSpan":{"value":true},"status":{"code":2,"message":"m"},"timeEvents":{"timeEvent":[]},` +
		`"instrumentationLibrary":{"name":"genkit-tracer","version":"v1"}`
	for _, extra := range []string{"", `,"spanId":"6be520f337a0d749"`, `,"status":null`, `,"truncated":true`, `,"TraceId":"x"`,
		`,"links":null`, `,"attributes":null`, `,"attributes":[1]`, `,"startTime":null`, `,"status":{"code":1.0}`,
		`,"status":{"code":"1"}`, `,"displayName":"\u00e9"`, `,"timeEvents":{"timeEvent":[{"time":1}]}`, `,"x":{"y":[1,{}]}`,
		`,"instrumentationLibrary":{"name":"a","name":"b"}`, `,"sameProcessAsParentSpan":{"value":null}`} {
		seeds = append(seeds, genkitBody(validTraceID, "", "6be520f337a0d748", span+extra))
	}
	return append(seeds, []byte(`{"traceId":"`+validTraceID+`","spans":{}} x`), []byte(`{"traceId":"`+validTraceID+`","spans":null}`),
		[]byte(`{"traceId":"`+validTraceID+`","spans":{},"spans":{}}`), []byte(`{"trace\u0049d":"`+validTraceID+`","spans":{}}`),
		[]byte(`{"traceId":"`+validTraceID+`","displayName":null,"startTime":null,"spans":{"a":{"spanId":"\"}}}`))
}

// requireSameAsUnmarshal decodes body through DecodeGenkit and without its fast path.
func requireSameAsUnmarshal(t *testing.T, body []byte) {
	t.Helper()
	got, err := trace.DecodeGenkit(body)
	want, wantErr := trace.DecodeGenkitUnmarshal(body)
	if wantErr != nil {
		require.Error(t, err, "the fast path took a body Unmarshal refuses: %q", body)
		require.Equal(t, wantErr.Error(), err.Error())
		return
	}
	require.NoError(t, err, "%q", body)
	require.Equal(t, want, got, "%q", body)
}

func compact(t *testing.T, doc json.RawMessage) json.RawMessage {
	if doc == nil {
		return nil
	}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	return b
}

// otlpSeeds are the OTLP/JSON bodies of the captures, and a few made here.
func otlpSeeds(f *testing.F) [][]byte {
	seeds := fixtureBodies(f, "otel-*.jsonl")
	return append(seeds,
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"`+validTraceID+`","spanId":"0000000000000001","name":"n\u0000","startTimeUnixNano":"1","status":{"message":"\ud800"}}]}]}]}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"","spanId":"0000000000000001","name":"j","startTimeUnixNano":"1000"}]}]}]}`),
		[]byte(`{}`))
}

// checkOTLP checks one decoded OTLP request: every span accepted or counted as rejected, and each
// accepted one storable. It returns the spans, or nil when the request was refused.
func checkOTLP(t *testing.T, body []byte, contentType string) ([]store.Span, ptraceotlp.ExportRequest) {
	t.Helper()
	spans, rejected, reason, err := trace.DecodeOTLP(body, contentType)
	if err != nil {
		require.True(t, trace.IsInputError(err), "%T %v", err, err)
		require.NoError(t, store.CheckText("message", err.Error()))
		return nil, ptraceotlp.ExportRequest{}
	}
	req := ptraceotlp.NewExportRequest()
	if contentType == trace.ContentTypeJSON {
		require.NoError(t, req.UnmarshalJSON(body))
	} else {
		require.NoError(t, req.UnmarshalProto(body))
	}
	require.EqualValues(t, req.Traces().SpanCount(), int64(len(spans))+rejected, "every span is stored or counted as rejected")
	require.Equal(t, rejected == 0, reason == "", reason)
	for _, sp := range spans {
		requireStorable(t, sp, store.SpanSourceOTLP)
	}
	return spans, req
}

// FuzzDecodeOTLPJSON decodes OTLP/JSON requests, and checks that the same request in protobuf
// decodes to the same spans.
func FuzzDecodeOTLPJSON(f *testing.F) {
	for _, b := range otlpSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spans, req := checkOTLP(t, body, trace.ContentTypeJSON)
		if spans == nil {
			return
		}
		pb, err := req.MarshalProto()
		require.NoError(t, err)
		fromProto, _, _, err := trace.DecodeOTLP(pb, trace.ContentTypeProtobuf)
		require.NoError(t, err)
		require.Equal(t, spans, fromProto)
	})
}

// FuzzDecodeOTLPProto decodes OTLP protobuf requests, seeded with the captured JSON requests
// encoded in protobuf and requests made here to reach every field, and checks Loupe's own
// protobuf decoder against the collector's: a request pdata refuses is refused, and one it takes
// gives the spans, rejections and reason that converting pdata's traces gives. And decoding is
// stable: the request re-encoded decodes to the same spans.
func FuzzDecodeOTLPProto(f *testing.F) {
	for _, b := range otlpSeeds(f) {
		req := ptraceotlp.NewExportRequest()
		require.NoError(f, req.UnmarshalJSON(b))
		pb, err := req.MarshalProto()
		require.NoError(f, err)
		f.Add(pb)
	}
	for _, b := range otlpProtoSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		requireDecodesAsPdata(t, body)
		spans, req := checkOTLP(t, body, trace.ContentTypeProtobuf)
		if spans == nil {
			return
		}
		pb, err := req.MarshalProto()
		require.NoError(t, err)
		again, _, _, err := trace.DecodeOTLP(pb, trace.ContentTypeProtobuf)
		require.NoError(t, err)
		require.Equal(t, spans, again)
	})
}

// TestDecodeOTLPProtoMatchesPdata runs FuzzDecodeOTLPProto's comparison on its seeds, in every
// test run: each kind of field, value and repetition the decoder reads.
func TestDecodeOTLPProtoMatchesPdata(t *testing.T) {
	t.Parallel()
	seeds := otlpProtoSeeds(t)
	for _, body := range seeds {
		requireDecodesAsPdata(t, body)
	}
	spans, _, _, err := trace.DecodeOTLP(seeds[0], trace.ContentTypeProtobuf)
	require.NoError(t, err)
	require.Len(t, spans, 2, "the seed's spans are decoded, not only refused alike")
	require.Contains(t, string(spans[0].Attributes), `"nested":{"a":[1,2.5,"x",true,null,"AAE="],"b":{"c":"d"}}`)
	require.JSONEq(t, `{"loupe.encoding_error":"json: unsupported value: NaN"}`, string(spans[1].Attributes))
	spans, _, _, err = trace.DecodeOTLP(seeds[1], trace.ContentTypeProtobuf)
	require.NoError(t, err)
	require.Len(t, spans, 1)
	require.NotNil(t, spans[0].RunID)
	require.Equal(t, "0b9f7c2e-5d3a-4c1b-9e8f-7a6b5c4d3e2f", spans[0].RunID.String(), "the first of a repeated run id")
	require.Contains(t, string(spans[0].Attributes), `"k":"2"`)
	require.JSONEq(t, `{"host.name":"h","service.name":"late"}`, string(spans[0].Resource), "a resource after its scopes, sent twice, merged")
	require.Equal(t, []any{int16(2), "second"}, []any{spans[0].StatusCode, spans[0].StatusMessage}, "a status sent twice, merged")
}

// requireDecodesAsPdata checks DecodeOTLP against pdata's decoder and FromOTLP on one body.
func requireDecodesAsPdata(t *testing.T, body []byte) {
	t.Helper()
	spans, rejected, reason, err := trace.DecodeOTLP(body, trace.ContentTypeProtobuf)
	req := ptraceotlp.NewExportRequest()
	perr := req.UnmarshalProto(body)
	require.Equal(t, perr == nil, err == nil, "refused as pdata refuses: Loupe %v, pdata %v", err, perr)
	if err != nil {
		require.True(t, trace.IsInputError(err), "%T %v", err, err)
		return
	}
	want, wantRejected, wantReason := trace.FromOTLP(req.Traces())
	require.Equal(t, want, spans)
	require.Equal(t, wantRejected, rejected)
	require.Equal(t, wantReason, reason)
}

// otlpProtoSeeds are protobuf requests that reach what the captures do not: every attribute
// value type nested, NaN, events and links, a resource sent after its scopes and twice, a status
// twice, repeated keys and run ids, unknown fields, rejected spans, and an OTLP 0.x scope.
func otlpProtoSeeds(t testing.TB) [][]byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "seed")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("scope")
	ss.Scope().SetVersion("1")
	ss.Scope().Attributes().PutInt("scope.attr", 1)
	for i := range 3 {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, byte(i)})
		sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, byte(i + 1)})
		if i > 0 {
			sp.SetParentSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 1})
		}
		sp.SetName("span <&> \u2028")
		sp.SetKind(ptrace.SpanKindClient)
		sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + i))
		sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_100_000_000))
		if i == 2 {
			sp.SetEndTimestamp(1) // rejected: ends before it starts
		}
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("failed")
		a := sp.Attributes()
		a.PutStr(trace.AttrRunID, "0b9f7c2e-5d3a-4c1b-9e8f-7a6b5c4d3e2f")
		a.PutStr("z", "last")
		a.PutStr("quote\"", "\"\\\n\t\x00\xff é")
		nested := a.PutEmptyMap("nested")
		list := nested.PutEmptySlice("a")
		list.AppendEmpty().SetInt(1)
		list.AppendEmpty().SetDouble(2.5)
		list.AppendEmpty().SetStr("x")
		list.AppendEmpty().SetBool(true)
		list.AppendEmpty()
		list.AppendEmpty().SetEmptyBytes().FromRaw([]byte{0, 1})
		nested.PutEmptyMap("b").PutStr("c", "d")
		a.PutEmptyBytes("empty")
		a.PutDouble("small", 1e-9)
		if i == 1 {
			a.PutDouble("nan", math.NaN())
		}
		ev := sp.Events().AppendEmpty()
		ev.SetName("exception")
		ev.SetTimestamp(pcommon.Timestamp(math.MaxUint64))
		ev.Attributes().PutStr("exception.message", "boom")
		lk := sp.Links().AppendEmpty()
		lk.SetTraceID(pcommon.TraceID{9})
		lk.SetFlags(1)
		lk.TraceState().FromRaw("k=v")
		lk.Attributes().PutStr("loupe.link.type", "resume")
	}
	plain, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)

	// By hand: a ResourceSpans whose resource comes after its scope and again (merged), a span
	// with two statuses and an unknown field, and an OTLP 0.x instrumentation_library_spans.
	span := protowire.AppendTag(nil, 1, protowire.BytesType)
	span = protowire.AppendBytes(span, bytes.Repeat([]byte{7}, 16))
	span = protowire.AppendTag(span, 2, protowire.BytesType)
	span = protowire.AppendBytes(span, bytes.Repeat([]byte{8}, 8))
	span = protowire.AppendTag(span, 7, protowire.Fixed64Type)
	span = protowire.AppendFixed64(span, 1000)
	span = protowire.AppendTag(span, 15, protowire.BytesType)
	span = protowire.AppendBytes(span, protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 2))
	span = protowire.AppendTag(span, 15, protowire.BytesType)
	span = protowire.AppendBytes(span, protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "second"))
	span = protowire.AppendTag(span, 99, protowire.VarintType)
	span = protowire.AppendVarint(span, 5)
	kv := func(k, v string) []byte {
		val := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), v)
		b := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), k)
		return protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), val)
	}
	// Repeated keys: the JSON keeps the last, the run id is the first (pdata's Map.Get).
	for _, a := range [][2]string{{trace.AttrRunID, "0b9f7c2e-5d3a-4c1b-9e8f-7a6b5c4d3e2f"}, {trace.AttrRunID, "not the first"}, {"k", "1"}, {"k", "2"}} {
		span = protowire.AppendBytes(protowire.AppendTag(span, 9, protowire.BytesType), kv(a[0], a[1]))
	}
	scope := protowire.AppendTag(nil, 2, protowire.BytesType)
	scope = protowire.AppendBytes(scope, span)
	resource := func(k, v string) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), kv(k, v))
	}
	rsBytes := protowire.AppendTag(nil, 2, protowire.BytesType)
	rsBytes = protowire.AppendBytes(rsBytes, scope)
	rsBytes = protowire.AppendTag(rsBytes, 1, protowire.BytesType)
	rsBytes = protowire.AppendBytes(rsBytes, resource("service.name", "late"))
	rsBytes = protowire.AppendTag(rsBytes, 1, protowire.BytesType)
	rsBytes = protowire.AppendBytes(rsBytes, resource("host.name", "h"))
	byHand := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rsBytes)
	legacyRS := protowire.AppendBytes(protowire.AppendTag(nil, 1000, protowire.BytesType), scope)
	legacy := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), legacyRS)
	// The legacy scope beside a current one: read, and dropped.
	both := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), append(slices.Clone(legacyRS), rsBytes...))
	return [][]byte{plain, byHand, legacy, both, append(slices.Clone(plain), byHand...)}
}

// FuzzParseGenkitFilter parses GET /api/traces's filter: it is refused as the client's mistake,
// or every filter has a known operator and values the store can bind (numbers, storable strings,
// booleans, flat lists), times as integer nanoseconds.
func FuzzParseGenkitFilter(f *testing.F) {
	for _, s := range []string{
		`{"eq":{"genkitx:type":"flow"}}`,
		`{"eq":{"name":"agentFlow","status":2},"gte":{"start":1796002421789.917},"lt":{"end":1796002421810}}`,
		`{"neq":{"source":"genkit"},"contains":{"genkit:input":"Lisbon"}}`,
		`{"eq":{"genkit:name":["a","b"]},"gt":{"start":0}}`,
		`{"eq":{"name":"a\u0000b"}}`, `{"eq":{"start":"x"}}`, `{"between":{}}`, `[]`, `{"eq":{"x":[[1]]}}`, `{"eq":{"x":null}}`,
		`{"lte":{"end":1e400}}`, `{"eq":{"x":1.5e308,"y":-9223372036854775809}}`,
	} {
		f.Add(s)
	}
	ops := []string{store.FilterEq, store.FilterNeq, store.FilterGt, store.FilterGte, store.FilterLt, store.FilterLte, store.FilterContains}
	f.Fuzz(func(t *testing.T, s string) {
		filters, err := trace.ParseGenkitFilter(s)
		if err != nil {
			require.True(t, trace.IsInputError(err), "%T %v", err, err)
			require.NoError(t, store.CheckText("message", err.Error()))
			return
		}
		for _, fl := range filters {
			require.Contains(t, ops, fl.Op)
			require.NoError(t, store.CheckText("field", fl.Field))
			values := []any{fl.Value}
			if list, ok := fl.Value.([]any); ok {
				values = list
			}
			for _, v := range values {
				switch x := v.(type) {
				case int64, bool:
				case float64:
					require.NotEqual(t, store.TraceFieldStart, fl.Field, "times are integer nanoseconds")
					require.NotEqual(t, store.TraceFieldEnd, fl.Field, "times are integer nanoseconds")
				case string:
					require.NoError(t, store.CheckText(fl.Field, x))
				default:
					t.Fatalf("filter %s %s: value %#v of type %T", fl.Field, fl.Op, v, v)
				}
			}
		}
	})
}
