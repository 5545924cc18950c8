package trace_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// genkitBody is a TraceData body of one span keyed key, whose members (spanId, startTime,
// endTime, parentSpanId...) are given as JSON text; top is the trace-level members, "" for none.
func genkitBody(traceID, top, key, members string) []byte {
	if top != "" {
		top += ","
	}
	return []byte(`{"traceId":"` + traceID + `",` + top + `"spans":{"` + key + `":{` + members + `,
		"attributes":{},"displayName":"x","instrumentationLibrary":{"name":"g"},"spanKind":"INTERNAL"}}}`)
}

const validTraceID = "4c74a721b00e2befd7101e2794d8c4b0"

// TestDecodeGenkitRefusesInvalidSpanTimes checks that a span's negative, zero or missing start,
// negative end, or end before its start refuses the body with a message naming the span and the
// field, while a running span (endTime 0) and a non-root body's zero trace-level times pass.
func TestDecodeGenkitRefusesInvalidSpanTimes(t *testing.T) {
	t.Parallel()
	const key = "6be520f337a0d748"
	for _, tc := range []struct{ times, want string }{
		{`"startTime":-1,"endTime":2`, `spans["6be520f337a0d748"].startTime -1 is negative`},
		{`"startTime":-1796002421789.917,"endTime":0`, `spans["6be520f337a0d748"].startTime -1796002421789.917 is negative`},
		{`"startTime":1,"endTime":-5`, `spans["6be520f337a0d748"].endTime -5 is negative`},
		{`"startTime":0,"endTime":2`, `spans["6be520f337a0d748"].startTime is 0 or missing`},
		{`"startTime":null,"endTime":2`, `spans["6be520f337a0d748"].startTime is 0 or missing`},
		{`"endTime":2`, `spans["6be520f337a0d748"].startTime is 0 or missing`},
		{`"startTime":0,"endTime":0`, `spans["6be520f337a0d748"].startTime is 0 or missing`},
		{`"startTime":9,"endTime":5`, `spans["6be520f337a0d748"].endTime 5 is before its startTime 9`},
		{`"startTime":1796002421789.917,"endTime":1796002421789.9169`, `spans["6be520f337a0d748"].endTime 1796002421789.9169 is before its startTime 1796002421789.917`},
	} {
		_, err := trace.DecodeGenkit(genkitBody(validTraceID, "", key, `"spanId":"`+key+`",`+tc.times))
		require.Error(t, err, tc.times)
		require.True(t, trace.IsInputError(err), tc.times)
		require.Equal(t, tc.want, err.Error(), tc.times)
	}

	for _, tc := range []struct{ top, times string }{
		{``, `"startTime":1,"endTime":0`}, // running: Genkit JS's realtime start
		{``, `"startTime":1,"endTime":null`},
		{``, `"startTime":1`},
		{``, `"startTime":5,"endTime":5`},
		{`"displayName":"","startTime":0,"endTime":0`, `"startTime":1796002421789.917,"endTime":1796002421791.4258`}, // a non-root body
		{`"displayName":"f","startTime":1,"endTime":2`, `"startTime":1,"endTime":2`},
	} {
		spans, err := trace.DecodeGenkit(genkitBody(validTraceID, tc.top, key, `"spanId":"`+key+`",`+tc.times))
		require.NoError(t, err, tc.times)
		require.Len(t, spans, 1)
		require.Positive(t, spans[0].StartTime)
	}
}

// TestDecodeGenkitDecodesCapturedPayloads decodes every body a real Genkit Go program sent: the
// non-root ones have trace-level displayName "" and times 0.
func TestDecodeGenkitDecodesCapturedPayloads(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		spans, err := trace.DecodeGenkit(body)
		require.NoError(t, err, f)
		require.NotEmpty(t, spans, f)
		for _, sp := range spans {
			require.Positive(t, sp.StartTime, f)
			require.GreaterOrEqual(t, sp.EndTime, sp.StartTime, f)
		}
	}
}

// TestDecodeGenkitNamesAllZeroIDs checks that an all-zero trace, span or parent span id is
// refused as all zeros rather than as not being hex, and that other bad ids keep their message.
func TestDecodeGenkitNamesAllZeroIDs(t *testing.T) {
	t.Parallel()
	const key = "6be520f337a0d748"
	zeroTrace, zeroSpan := strings.Repeat("0", 32), strings.Repeat("0", 16)
	times := `"startTime":1,"endTime":2`
	for _, tc := range []struct {
		body []byte
		want string
	}{
		{genkitBody(zeroTrace, "", key, `"spanId":"`+key+`",`+times),
			`traceId "00000000000000000000000000000000" is all zeros, an invalid trace id`},
		{genkitBody(validTraceID, "", key, `"spanId":"`+zeroSpan+`",`+times),
			`spans["6be520f337a0d748"].spanId "0000000000000000" is all zeros, an invalid span id`},
		{genkitBody(validTraceID, "", zeroSpan, times),
			`spans["0000000000000000"] has no spanId and its key is all zeros, an invalid span id`},
		{genkitBody(validTraceID, "", key, `"spanId":"`+key+`","parentSpanId":"`+zeroSpan+`",`+times),
			`spans["6be520f337a0d748"].parentSpanId "0000000000000000" is all zeros, an invalid span id`},
		// Other bad ids are still named for their shape.
		{genkitBody("000", "", key, `"spanId":"`+key+`",`+times), `traceId "000" is not 32 hex digits`},
		{genkitBody(validTraceID, "", key, `"spanId":"zzzz",`+times), `spans["6be520f337a0d748"].spanId "zzzz" is not 16 hex digits`},
		{genkitBody(validTraceID, "", "zzzz", times), `spans["zzzz"] has no spanId and its key is not 16 hex digits`},
		{genkitBody(validTraceID, "", key, `"spanId":"`+key+`","parentSpanId":"00",`+times),
			`spans["6be520f337a0d748"].parentSpanId "00" is not 16 hex digits`},
	} {
		_, err := trace.DecodeGenkit(tc.body)
		require.Error(t, err, tc.want)
		require.True(t, trace.IsInputError(err), tc.want)
		require.Equal(t, tc.want, err.Error())
	}
}

// otlpSpan appends a span named name to ss with the given ids and times.
func otlpSpan(ss ptrace.ScopeSpans, name string, tid pcommon.TraceID, sid pcommon.SpanID, start, end uint64) {
	s := ss.Spans().AppendEmpty()
	s.SetName(name)
	s.SetTraceID(tid)
	s.SetSpanID(sid)
	s.SetStartTimestamp(pcommon.Timestamp(start))
	s.SetEndTimestamp(pcommon.Timestamp(end))
}

var (
	otlpTraceID = pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	otlpSpanID  = func(b byte) pcommon.SpanID { return pcommon.SpanID{0, 0, 0, 0, 0, 0, 0, b} }
)

// TestFromOTLPRejectsInvalidTimes checks that a span without a start, or ending before it
// starts, is rejected alone, with a reason naming it, and that a running span (end 0) is kept.
func TestFromOTLPRejectsInvalidTimes(t *testing.T) {
	t.Parallel()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	otlpSpan(ss, "good", otlpTraceID, otlpSpanID(1), 1000, 2000)
	otlpSpan(ss, "nostart", otlpTraceID, otlpSpanID(2), 0, 2000)
	otlpSpan(ss, "backwards", otlpTraceID, otlpSpanID(3), 2000, 1000)
	otlpSpan(ss, "running", otlpTraceID, otlpSpanID(4), 1000, 0)
	otlpSpan(ss, "instant", otlpTraceID, otlpSpanID(5), 1000, 1000)
	otlpSpan(ss, "far", otlpTraceID, otlpSpanID(6), 1000, 1<<63)
	spans, rejected, reason := trace.FromOTLP(td)
	require.EqualValues(t, 3, rejected)
	require.Len(t, spans, 3)
	for i, name := range []string{"good", "running", "instant"} {
		require.Equal(t, name, spans[i].Name)
	}
	require.Equal(t, `3 spans rejected: span "nostart" (0000000000000002): start_time_unix_nano is 0 or missing; `+
		`span "backwards" (0000000000000003): end_time_unix_nano 1000 is before its start_time_unix_nano 2000; `+
		`span "far" (0000000000000006): time out of range`, reason)
}

// TestFromOTLPNamesAllZeroIDs checks that a span whose trace or span id is all zeros (as a
// missing one decodes) is rejected with a reason saying which.
func TestFromOTLPNamesAllZeroIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tid  pcommon.TraceID
		sid  pcommon.SpanID
		want string
	}{
		{pcommon.NewTraceIDEmpty(), otlpSpanID(1), `1 span rejected: span "s": trace id is all zeros or missing`},
		{otlpTraceID, pcommon.NewSpanIDEmpty(), `1 span rejected: span "s": span id is all zeros or missing`},
	} {
		td := ptrace.NewTraces()
		otlpSpan(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty(), "s", tc.tid, tc.sid, 1000, 2000)
		spans, rejected, reason := trace.FromOTLP(td)
		require.Empty(t, spans)
		require.EqualValues(t, 1, rejected)
		require.Equal(t, tc.want, reason)
	}

	// A missing id in OTLP JSON decodes as all zeros too.
	spans, rejected, reason, err := trace.DecodeOTLP([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[
		{"traceId":"","spanId":"0000000000000001","name":"j","startTimeUnixNano":"1000"}]}]}]}`), trace.ContentTypeJSON)
	require.NoError(t, err)
	require.Empty(t, spans)
	require.EqualValues(t, 1, rejected)
	require.Equal(t, `1 span rejected: span "j": trace id is all zeros or missing`, reason)
}

// TestFromOTLPReasonCountsAndListsFirstRejections checks that the partial-success reason gives
// the number rejected and the first three reasons, then how many more there were.
func TestFromOTLPReasonCountsAndListsFirstRejections(t *testing.T) {
	t.Parallel()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i, name := range []string{"a", "b", "c", "d", "e"} {
		otlpSpan(ss, name, otlpTraceID, otlpSpanID(byte(i+1)), 0, 0)
	}
	otlpSpan(ss, "good", otlpTraceID, otlpSpanID(9), 1000, 2000)
	spans, rejected, reason := trace.FromOTLP(td)
	require.Len(t, spans, 1)
	require.EqualValues(t, 5, rejected)
	require.Equal(t, `5 spans rejected: span "a" (0000000000000001): start_time_unix_nano is 0 or missing; `+
		`span "b" (0000000000000002): start_time_unix_nano is 0 or missing; `+
		`span "c" (0000000000000003): start_time_unix_nano is 0 or missing; and 2 more`, reason)

	// Exactly three: no "more".
	td = ptrace.NewTraces()
	ss = td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i, name := range []string{"a", "b", "c"} {
		otlpSpan(ss, name, otlpTraceID, otlpSpanID(byte(i+1)), 0, 0)
	}
	_, rejected, reason = trace.FromOTLP(td)
	require.EqualValues(t, 3, rejected)
	require.True(t, strings.HasPrefix(reason, `3 spans rejected: span "a"`), reason)
	require.NotContains(t, reason, "more")

	_, rejected, reason = trace.FromOTLP(ptrace.NewTraces())
	require.Zero(t, rejected)
	require.Empty(t, reason)
}

// TestIngestOTLPStoresTheValidSpansOfARequest sends a request with spans of invalid times among
// valid ones: the valid ones are stored and the answer is a partial success counting the others.
func TestIngestOTLPStoresTheValidSpansOfARequest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	svc, err := trace.NewService(trace.Config{Store: st})
	require.NoError(t, err)
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	otlpSpan(ss, "good", otlpTraceID, otlpSpanID(1), 1000, 2000)
	otlpSpan(ss, "nostart", otlpTraceID, otlpSpanID(2), 0, 2000)
	otlpSpan(ss, "backwards", otlpTraceID, otlpSpanID(3), 2000, 1000)
	otlpSpan(ss, "running", otlpTraceID, otlpSpanID(4), 1500, 0)
	for _, ct := range []string{trace.ContentTypeProtobuf, trace.ContentTypeJSON} {
		req := ptraceotlp.NewExportRequestFromTraces(td)
		var body []byte
		if ct == trace.ContentTypeJSON {
			body, err = req.MarshalJSON()
		} else {
			body, err = req.MarshalProto()
		}
		require.NoError(t, err)
		out, err := svc.IngestOTLP(ctx, body, ct)
		require.NoError(t, err, ct)
		resp := ptraceotlp.NewExportResponse()
		if ct == trace.ContentTypeJSON {
			require.NoError(t, resp.UnmarshalJSON(out))
		} else {
			require.NoError(t, resp.UnmarshalProto(out))
		}
		require.EqualValues(t, 2, resp.PartialSuccess().RejectedSpans(), ct)
		msg := resp.PartialSuccess().ErrorMessage()
		require.True(t, strings.HasPrefix(msg, "2 spans rejected: "), msg)
		require.Contains(t, msg, `"nostart"`)
		require.Contains(t, msg, `"backwards"`)
	}
	got, err := st.SpansByTrace(ctx, "0102030405060708090a0b0c0d0e0f10", 4)
	require.NoError(t, err)
	names := make([]string, len(got))
	for i, sp := range got {
		names[i] = sp.Name
	}
	require.ElementsMatch(t, []string{"good", "running"}, names)
}

// TestDecodeGenkitRefusesUnknownStatusCodes: OpenTelemetry has three status codes; anything else
// is refused with a message naming the span, rather than stored as unset.
func TestDecodeGenkitRefusesUnknownStatusCodes(t *testing.T) {
	t.Parallel()
	const key = "6be520f337a0d748"
	for _, code := range []string{"99", "-1", "10000000000"} {
		_, err := trace.DecodeGenkit(genkitBody(validTraceID, "", key, `"spanId":"`+key+`","startTime":1,"endTime":2,"status":{"code":`+code+`}`))
		require.Error(t, err, code)
		require.True(t, trace.IsInputError(err), code)
		require.Contains(t, err.Error(), `spans["6be520f337a0d748"].status.code `+code+` is not 0, 1 or 2`)
	}
	for _, code := range []string{"0", "1", "2"} {
		_, err := trace.DecodeGenkit(genkitBody(validTraceID, "", key, `"spanId":"`+key+`","startTime":1,"endTime":2,"status":{"code":`+code+`}`))
		require.NoError(t, err, code)
	}
}

// TestDecodeErrorsQuoteTheClientsBytes checks that a decoder's message, which can quote the
// body it failed on (OTLP/JSON's decoder shows the bytes around the error), holds no raw NUL or
// invalid UTF-8: the message is logged and sent back. Found by FuzzDecodeOTLPJSON.
func TestDecodeErrorsQuoteTheClientsBytes(t *testing.T) {
	t.Parallel()
	_, _, _, err := trace.DecodeOTLP([]byte("{\"resourceSpans\":[{\"x\":\"\xff\x00\"}"), trace.ContentTypeJSON)
	require.True(t, trace.IsInputError(err))
	require.NotContains(t, err.Error(), "\x00")
	require.True(t, utf8.ValidString(err.Error()), err.Error())
	require.Contains(t, err.Error(), `malformed OTLP JSON: "`)
	require.Contains(t, err.Error(), `\xff\x00`)

	_, err = trace.DecodeGenkit([]byte("{\"traceId\":\"\xff\x00\"}"))
	require.True(t, trace.IsInputError(err))
	require.NotContains(t, err.Error(), "\x00")
	require.True(t, utf8.ValidString(err.Error()), err.Error())
}
