package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// TestOTLPLogsAreStoredAndListed proves that OTLP logs, protobuf (gzipped) and JSON, are stored
// with their time, severity, body, attributes, resource, trace and span ids, and come back through
// Genkit's log lists: all, by trace, by span.
func TestOTLPLogsAreStoredAndListed(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	const traceID, spanID = "0102030405060708090a0b0c0d0e0f10", "0102030405060708"
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "genkit-app")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("genkit")
	in := sl.LogRecords().AppendEmpty()
	in.SetTimestamp(1_700_000_000_000_000_000)
	in.SetSeverityNumber(plog.SeverityNumberInfo)
	in.SetSeverityText("INFO")
	in.Body().SetStr("calling the model")
	in.Attributes().PutStr("genkit.flow", "agentFlow")
	in.SetTraceID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	in.SetSpanID([8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	out := sl.LogRecords().AppendEmpty() // outside any span
	out.SetObservedTimestamp(1_700_000_001_000_000_000)
	out.SetSeverityNumber(plog.SeverityNumberWarn)
	out.Body().SetStr("no span")

	req := plogotlp.NewExportRequestFromLogs(ld)
	pb, err := req.MarshalProto()
	require.NoError(t, err)
	resp, body := post(t, b.url+"/v1/logs", "application/x-protobuf", gzipBytes(t, pb), "Content-Encoding", "gzip")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "application/x-protobuf", resp.Header.Get("Content-Type"))
	er := plogotlp.NewExportResponse()
	require.NoError(t, er.UnmarshalProto(body))
	require.Zero(t, er.PartialSuccess().RejectedLogRecords())

	js, err := req.MarshalJSON()
	require.NoError(t, err)
	resp, body = post(t, b.url+"/v1/logs", "application/json", js)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))

	type entry struct {
		Timestamp      float64        `json:"timestamp"`
		SeverityNumber int            `json:"severityNumber"`
		SeverityText   string         `json:"severityText"`
		Body           any            `json:"body"`
		Attributes     map[string]any `json:"attributes"`
		Resource       map[string]any `json:"resource"`
		TraceID        string         `json:"traceId"`
		SpanID         string         `json:"spanId"`
	}
	var all struct{ Logs []entry }
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/logs", &all))
	require.Len(t, all.Logs, 4)
	require.Equal(t, "no span", all.Logs[0].Body, "newest first")
	require.Empty(t, all.Logs[0].TraceID)

	for _, path := range []string{"/api/traces/" + traceID + "/logs", "/api/traces/" + traceID + "/spans/" + spanID + "/logs"} {
		var got struct{ Logs []entry }
		require.Equal(t, http.StatusOK, getJSON(t, b.url+path, &got), path)
		require.Len(t, got.Logs, 2, path)
		e := got.Logs[0]
		require.Equal(t, entry{Timestamp: float64(time.Unix(1_700_000_000, 0).UnixMilli()), SeverityNumber: 9, SeverityText: "INFO",
			Body: "calling the model", Attributes: map[string]any{"genkit.flow": "agentFlow"},
			Resource: map[string]any{"service.name": "genkit-app"}, TraceID: traceID, SpanID: spanID}, e, path)
	}
	// The span panel shows the span's logs.
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("agentFlow")
	sp.SetTraceID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	sp.SetSpanID([8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	sp.SetStartTimestamp(1_700_000_000_000_000_000)
	sp.SetEndTimestamp(1_700_000_002_000_000_000)
	tpb, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	resp, body = post(t, b.url+"/v1/traces", "application/x-protobuf", tpb)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	resp, page := get(t, b.url+"/traces/"+traceID+"/spans/"+spanID)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, `data-testid="logs"`)
	require.Equal(t, 2, strings.Count(page, `data-testid="log-line"`))
	require.Contains(t, page, "calling the model")

	var none struct{ Logs []entry }
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/traces/"+traceID+"/spans/ffffffffffffffff/logs", &none))
	require.Empty(t, none.Logs)
}

// TestBadOTLPLogsAre4xx proves that malformed or refused log exports are client errors, never
// 500, and store nothing.
func TestBadOTLPLogsAre4xx(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true, maxBody: 4 << 10})
	cases := []struct {
		name, ct string
		body     []byte
		header   []string
		want     int
	}{
		{"bad protobuf", "application/x-protobuf", []byte{0xff, 0xff, 0xff}, nil, http.StatusBadRequest},
		{"bad JSON", "application/json", []byte(`{"resourceLogs":[{`), nil, http.StatusBadRequest},
		{"wrong JSON types", "application/json", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"x"}]}]}]}`), nil, http.StatusBadRequest},
		{"text", "text/plain", []byte("hi"), nil, http.StatusUnsupportedMediaType},
		{"bad gzip", "application/json", []byte("not gzip"), []string{"Content-Encoding", "gzip"}, http.StatusBadRequest},
		{"too large", "application/json", make([]byte, 8<<10), nil, http.StatusRequestEntityTooLarge},
		{"cross-site", "application/json", []byte(`{}`), []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
	}
	for _, tc := range cases {
		resp, body := post(t, b.url+"/v1/logs", tc.ct, tc.body, tc.header...)
		require.Equal(t, tc.want, resp.StatusCode, "%s: %s", tc.name, body)
	}
	for _, path := range []string{"/api/logs?limit=0", "/api/logs?limit=x", "/api/traces/nothex/logs", "/api/traces/0102030405060708090a0b0c0d0e0f10/spans/zz/logs"} {
		resp, body := get(t, b.url+path)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, body)
	}
	var all struct{ Logs []any }
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/logs", &all))
	require.Empty(t, all.Logs)
}

// TestGenkitJSLogsArriveAtGenkitsOTLPRoute proves that the log records Genkit JS sends to its
// telemetry server's POST /api/otlp (the body its LogServerExporter builds, 1.42: OTLP/JSON with an
// empty resource, times as strings, numbers as numbers) are stored with their trace and span and
// listed by Genkit's log APIs; that spans sent there are stored too; and that an empty payload is
// acknowledged with {} as Genkit's server does.
func TestGenkitJSLogsArriveAtGenkitsOTLPRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	const traceID, spanID = "1112131415161718191a1b1c1d1e1f20", "1112131415161718"
	genkitJS := `{"resourceLogs":[{"resource":{"attributes":[],"droppedAttributesCount":0},"scopeLogs":[{
		"scope":{"name":"genkit-logger","version":""},
		"logRecords":[{"timeUnixNano":"1700000000000000000","severityNumber":9,"severityText":"INFO",
			"body":{"stringValue":"getWeather looked up Oslo"},
			"attributes":[{"key":"city","value":{"stringValue":"Oslo"}},{"key":"tempC","value":{"intValue":21}}],
			"traceId":"` + traceID + `","spanId":"` + spanID + `"}]}]}]}`
	resp, body := post(t, b.url+"/api/otlp", "application/json", []byte(genkitJS))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.JSONEq(t, `{}`, string(body))

	var got struct {
		Logs []struct {
			LogID string `json:"logId"`
			Scope struct {
				Name string `json:"name"`
			} `json:"instrumentationLibrary"`
			SeverityText string         `json:"severityText"`
			Body         any            `json:"body"`
			Attributes   map[string]any `json:"attributes"`
			TraceID      string         `json:"traceId"`
			SpanID       string         `json:"spanId"`
		}
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/traces/"+traceID+"/spans/"+spanID+"/logs", &got))
	require.Len(t, got.Logs, 1)
	l := got.Logs[0]
	require.Equal(t, []any{"INFO", "getWeather looked up Oslo", "Oslo", float64(21), traceID, spanID, "genkit-logger"},
		[]any{l.SeverityText, l.Body, l.Attributes["city"], l.Attributes["tempC"], l.TraceID, l.SpanID, l.Scope.Name})
	require.NotEmpty(t, l.LogID, "Genkit's LogRecordData requires a logId (genkit log:list refuses a list without one)")

	// Spans and logs in one payload, on the /v1/ variants too.
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("weatherFlow")
	sp.SetTraceID([16]byte{0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20})
	sp.SetSpanID([8]byte{0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18})
	sp.SetStartTimestamp(1_700_000_000_000_000_000)
	sp.SetEndTimestamp(1_700_000_001_000_000_000)
	spans, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	require.NoError(t, err)
	both := strings.TrimSuffix(string(spans), "}") + `,"resourceLogs":` + genkitJS[len(`{"resourceLogs":`):]
	for _, path := range []string{"/api/otlp/v1/traces", "/api/otlp/v1/logs"} {
		resp, body = post(t, b.url+path, "application/json", []byte(both))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	}
	var tr struct {
		Trace struct {
			SpanCount int `json:"span_count"`
		}
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+traceID, &tr))
	require.Equal(t, 1, tr.Trace.SpanCount)
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/traces/"+traceID+"/logs", &got))
	require.Len(t, got.Logs, 3)

	resp, body = post(t, b.url+"/api/otlp", "application/json", []byte(`{}`))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.JSONEq(t, `{}`, string(body))
	resp, body = post(t, b.url+"/api/otlp", "application/json", []byte(`{"resourceLogs":[{`))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
}

// TestGenkitLogListsFilterAndPageAsGenkitsDo proves that Genkit's log lists answer the query
// genkit log:list sends as Genkit's telemetry server does: newest first, a trace's too;
// severityNumber keeps that severity and above, severityText that text in any case; traceId and
// spanId in the query; limit and continuationToken page.
func TestGenkitLogListsFilterAndPageAsGenkitsDo(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	const traceID, spanID = "2122232425262728292a2b2c2d2e2f30", "2122232425262728"
	rec := func(sec int, sev int, text, body string) string {
		return `{"timeUnixNano":"` + strconv.Itoa(1_700_000_000+sec) + `000000000","severityNumber":` + strconv.Itoa(sev) +
			`,"severityText":"` + text + `","body":{"stringValue":"` + body + `"},"traceId":"` + traceID + `","spanId":"` + spanID + `"}`
	}
	payload := `{"resourceLogs":[{"resource":{},"scopeLogs":[{"scope":{"name":"genkit-logger"},"logRecords":[` +
		rec(1, 9, "INFO", "first") + `,` + rec(2, 13, "WARN", "second") + `,` + rec(3, 17, "ERROR", "third") + `]}]}]}`
	resp, body := post(t, b.url+"/api/otlp", "application/json", []byte(payload))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))

	type page struct {
		Logs              []struct{ Body string }
		ContinuationToken string
	}
	bodies := func(p page) []string {
		out := []string{}
		for _, l := range p.Logs {
			out = append(out, l.Body)
		}
		return out
	}
	for path, want := range map[string][]string{
		"/api/traces/" + traceID + "/logs":                             {"third", "second", "first"},
		"/api/traces/" + traceID + "/spans/" + spanID + "/logs":        {"third", "second", "first"},
		"/api/logs?traceId=" + traceID + "&spanId=" + spanID:           {"third", "second", "first"},
		"/api/traces/" + traceID + "/logs?severityNumber=13":           {"third", "second"},
		"/api/traces/" + traceID + "/logs?severityText=warn":           {"second"},
		"/api/logs?severityNumber=17":                                  {"third"},
		"/api/traces/" + traceID + "/logs?limit=2&continuationToken=2": {"first"},
	} {
		var p page
		require.Equal(t, http.StatusOK, getJSON(t, b.url+path, &p), path)
		require.Equal(t, want, bodies(p), path)
		require.Empty(t, p.ContinuationToken, path)
	}
	var first page
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/traces/"+traceID+"/logs?limit=2", &first))
	require.Equal(t, []string{"third", "second"}, bodies(first))
	require.Equal(t, "2", first.ContinuationToken, "a next page")
	for _, path := range []string{"/api/logs?spanId=" + spanID, "/api/logs?severityNumber=x", "/api/logs?continuationToken=-1", "/api/logs?traceId=zz"} {
		resp, body := get(t, b.url+path)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, body)
	}
}
