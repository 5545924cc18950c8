package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// A client's text that PostgreSQL cannot store (U+0000, a lone surrogate escape, invalid UTF-8) is
// refused with a 4xx naming the field, before anything is written; the same text in spans that
// other programs send is stored replaced by U+FFFD. These tests go through a real server on
// loopback and a real database, one surface each.

// syncBuffer is a log destination that the server's goroutines and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// textSetup is a server with runs (the demo agents), trace ingest and reads, and a log the test
// reads back, which must show whatever was refused escaped.
func textSetup(t *testing.T, dev bool) *bundle {
	t.Helper()
	b := setup(t, opts{dev: dev, runs: true, ingest: true, log: &syncBuffer{}})
	t.Cleanup(func() {
		// Whatever was refused, the log shows it escaped: never a raw NUL or a byte that is not UTF-8.
		out := b.log.String()
		require.NotContains(t, out, "\x00")
		require.True(t, utf8.ValidString(out), "the log holds invalid UTF-8")
		require.NotContains(t, out, "level=ERROR", "a client's bad text is not a server error")
	})
	return b
}

// send sends a request with a raw body and returns the status and the body.
func send(t *testing.T, method, u, contentType, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

// count is the number of rows in table.
func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

// apiErrorOf decodes an API error body.
func apiErrorOf(t *testing.T, body string) apiError {
	t.Helper()
	var e apiError
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e
}

func TestRunInputWithTextPostgreSQLCannotStoreIsRefused(t *testing.T) {
	t.Parallel()
	b := textSetup(t, true)
	for _, c := range []struct{ body, field, problem string }{
		{`{"action":"/flow/travelAgent","input":{"destination":"a\u0000b"}}`, "input/destination", "contains U+0000"},
		{`{"action":"/flow/travelAgent","input":{"destination":"\ud800"}}`, "input/destination", `contains a lone UTF-16 surrogate (\ud800)`},
		{"{\"action\":\"/flow/travelAgent\",\"input\":{\"destination\":\"a\xffb\"}}", "input/destination", "contains invalid UTF-8 (byte 0xff)"},
		{`{"action":"/flow/travel\u0000Agent","input":{"destination":"Lisbon"}}`, "action", "contains U+0000"},
		{`{"action":"/flow/travelAgent","input":{"destination":"Lisbon","nights":1e131072}}`, "input/nights", "holds a number beyond the range of numeric (1e131072)"},
	} {
		status, body := send(t, http.MethodPost, b.url+"/api/v1/runs", "application/json", c.body)
		require.Equal(t, http.StatusUnprocessableEntity, status, body)
		e := apiErrorOf(t, body)
		require.Equal(t, "invalid", e.Error.Code)
		require.Equal(t, c.field, e.Error.Details["field"])
		require.Equal(t, c.field+" "+c.problem+", which PostgreSQL cannot store", e.Error.Message)
	}
	require.Zero(t, b.count(t, "runs"), "no run was created")
	require.Zero(t, b.count(t, "river_job"), "no job was enqueued")
	require.Contains(t, b.log.String(), `"input/destination contains U+0000, which PostgreSQL cannot store"`, "logged as a warning, escaped")
}

// TestListFiltersWithTextPostgreSQLCannotStoreAreRefused sends U+0000 and invalid UTF-8 in every
// text filter of the runs, interrupts and traces lists, API and pages.
func TestListFiltersWithTextPostgreSQLCannotStoreAreRefused(t *testing.T) {
	t.Parallel()
	b := textSetup(t, true)
	for _, path := range []string{
		"/api/v1/runs?q=%s", "/api/v1/runs?action=%s", "/api/v1/interrupts?tool=%s", "/api/v1/interrupts?action=%s",
		"/api/v1/traces?q=%s", "/api/v1/traces?name=%s", "/api/v1/traces?attr.env=%s",
		"/runs?q=%s", "/runs?action=%s", "/inbox?tool=%s", "/inbox?action=%s", "/traces?q=%s",
	} {
		for bad, problem := range map[string]string{"a%00b": "contains U+0000", "a%FFb": "contains invalid UTF-8 (byte 0xff)"} {
			u := b.url + fmt.Sprintf(path, bad)
			_, query, _ := strings.Cut(path, "?")
			param, _, _ := strings.Cut(query, "=")
			status, body := send(t, http.MethodGet, u, "", "", "Accept", "application/json")
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", u, body)
			e := apiErrorOf(t, body)
			require.Equal(t, fmt.Sprintf("query parameter %q %s, which PostgreSQL cannot store", param, problem), e.Error.Message, u)
			require.Equal(t, param, e.Error.Details["field"], u)
		}
	}
	// A page answers a browser with its error page, naming the parameter.
	status, body := send(t, http.MethodGet, b.url+"/runs?q=a%00b", "", "", "Accept", "text/html")
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "query parameter &#34;q&#34; contains U+0000, which PostgreSQL cannot store")
	// A name is checked as well as a value, and a path.
	status, body = send(t, http.MethodGet, b.url+"/api/v1/traces?attr.a%00=1", "", "")
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Equal(t, `a query parameter's name ("attr.a\x00") contains U+0000, which PostgreSQL cannot store`, apiErrorOf(t, body).Error.Message)
	status, body = send(t, http.MethodGet, b.url+"/traces/a%00b", "", "", "Accept", "application/json")
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Equal(t, "the path contains U+0000, which PostgreSQL cannot store", apiErrorOf(t, body).Error.Message)
}

func TestGenkitTraceFilterWithTextPostgreSQLCannotStoreIsRefused(t *testing.T) {
	t.Parallel()
	b := textSetup(t, true)
	for filter, want := range map[string]string{
		`{"eq":{"name":"a\u0000b"}}`:                 "filter/eq/name contains U+0000, which PostgreSQL cannot store",
		`{"contains":{"genkit:input":"\udc00"}}`:     `filter/contains/genkit:input contains a lone UTF-16 surrogate (\udc00), which PostgreSQL cannot store`,
		`{"eq":{"genkit:name":["ok","\ud800 bad"]}}`: `filter/eq/genkit:name/1 contains a lone UTF-16 surrogate (\ud800), which PostgreSQL cannot store`,
		"{\"eq\":{\"name\":\"a\x00b\"}}":             `query parameter "filter" contains U+0000, which PostgreSQL cannot store`,
	} {
		for _, path := range []string{"/api/traces?filter=", "/api/v1/traces?filter="} {
			status, body := send(t, http.MethodGet, b.url+path+url.QueryEscape(filter), "", "")
			require.Equal(t, http.StatusBadRequest, status, "%s%s: %s", path, filter, body)
			require.Equal(t, want, apiErrorOf(t, body).Error.Message, path)
		}
	}
}

// pendingInterrupt starts a travelAgent run and returns its pending flight-booking interrupt.
func (b *bundle) pendingInterrupt(t *testing.T) store.Interrupt {
	t.Helper()
	var run store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs", `{"action":"/flow/travelAgent","input":{"destination":"Lisbon"}}`, &run))
	var list struct {
		Interrupts []store.Interrupt `json:"interrupts"`
	}
	require.Eventually(t, func() bool {
		call(t, "GET", b.url+"/api/v1/interrupts?status=pending", "", &list)
		return len(list.Interrupts) == 1
	}, 30*time.Second, 20*time.Millisecond)
	return list.Interrupts[0]
}

// requireUnresolved checks that an interrupt is still pending at its version, with no audit entry.
func (b *bundle) requireUnresolved(t *testing.T, it store.Interrupt) {
	t.Helper()
	now, err := b.store.InterruptGet(context.Background(), it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, now.Status)
	require.Equal(t, it.Version, now.Version)
	require.Nil(t, now.Comment)
	audit, err := b.store.AuditList(context.Background(), "interrupt", it.ID.String())
	require.NoError(t, err)
	require.Empty(t, audit, "nothing was recorded")
}

func TestResolveWithTextPostgreSQLCannotStoreIsRefused(t *testing.T) {
	t.Parallel()
	b := textSetup(t, true)
	it := b.pendingInterrupt(t)
	resolve := b.url + "/api/v1/interrupts/" + it.ID.String() + "/resolve"
	for _, c := range []struct{ body, field string }{
		{`{"action":"approve","comment":"ok\u0000"}`, "comment"},
		{"{\"action\":\"deny\",\"comment\":\"no \xc3\"}", "comment"},
		{`{"action":"edit","input":{"destination":"a\u0000b"}}`, "input/destination"},
		{`{"action":"respond","output":{"booked":["\ud800"]}}`, "output/booked/0"},
	} {
		status, body := send(t, http.MethodPost, resolve, "application/json", c.body)
		require.Equal(t, http.StatusUnprocessableEntity, status, body)
		e := apiErrorOf(t, body)
		require.Equal(t, c.field, e.Error.Details["field"], c.body)
		require.Contains(t, e.Error.Message, c.field+" contains ", c.body)
	}
	b.requireUnresolved(t, it)

	// The inbox's form: the edited arguments are JSON typed by a reviewer; a comment is text.
	form := b.url + "/inbox/" + it.ID.String() + "/resolve"
	status, body := send(t, http.MethodPost, form, "application/x-www-form-urlencoded",
		url.Values{"action": {"edit"}, "input": {`{"destination":"a\u0000b"}`}}.Encode())
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "The edited arguments cannot be stored: input/destination contains U+0000, which PostgreSQL cannot store.")
	status, body = send(t, http.MethodPost, form, "application/x-www-form-urlencoded",
		url.Values{"action": {"deny"}, "comment": {"a\x00b"}}.Encode(), "Accept", "application/json")
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, `form field "comment" contains U+0000, which PostgreSQL cannot store`, apiErrorOf(t, body).Error.Message)
	b.requireUnresolved(t, it)
}

func TestReplayWithTextPostgreSQLCannotStoreIsRefused(t *testing.T) {
	t.Parallel()
	b := textSetup(t, true)
	it := b.pendingInterrupt(t)
	before := b.count(t, "runs")
	for _, c := range []struct{ body, field string }{
		{`{"mode":"rerun","overrides":{"system":"be \u0000 brief"}}`, "overrides/system"},
		{`{"mode":"rerun","overrides":{"config":{"stop":["\udc00"]}}}`, "overrides/config/stop/0"},
		{`{"mode":"fork","turn":1,"edits":[{"seq":0,"message":{"role":"user","content":[{"text":"a\u0000"}]}}]}`, "edits/0/message/content/0/text"},
	} {
		status, body := send(t, http.MethodPost, b.url+"/api/v1/runs/"+it.RunID.String()+"/replay", "application/json", c.body)
		require.Equal(t, http.StatusUnprocessableEntity, status, body)
		require.Equal(t, c.field, apiErrorOf(t, body).Error.Details["field"], c.body)
	}
	require.Equal(t, before, b.count(t, "runs"), "no replay run was created")
}

func TestActionsRunFormWithTextPostgreSQLCannotStoreIsRefused(t *testing.T) {
	t.Parallel()
	b := textSetup(t, true)
	status, body := send(t, http.MethodPost, b.url+"/actions/run", "application/x-www-form-urlencoded",
		url.Values{"action": {"/flow/travelAgent"}, "input": {`{"destination":"a\u0000b"}`}}.Encode())
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "Invalid input: input/destination contains U+0000, which PostgreSQL cannot store.")
	require.Contains(t, body, `{&#34;destination&#34;:&#34;a\u0000b&#34;}`, "the form comes back with what was typed")

	status, body = send(t, http.MethodPost, b.url+"/actions/run", "application/x-www-form-urlencoded",
		url.Values{"action": {"/flow/travelAgent"}, "input": {"{\"destination\":\"a\x00b\"}"}}.Encode())
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "form field &#34;input&#34; contains U+0000, which PostgreSQL cannot store")
	require.Zero(t, b.count(t, "runs"), "no run was created")
}

func TestSignInWithTextPostgreSQLCannotStoreIsRefused(t *testing.T) {
	t.Parallel()
	b := textSetup(t, false)
	for name, problem := range map[string]string{"\x00": "contains U+0000", "ann\xff": "contains invalid UTF-8 (byte 0xff)"} {
		status, body := send(t, http.MethodPost, b.url+"/login", "application/x-www-form-urlencoded",
			url.Values{"username": {name}, "password": {"x"}}.Encode(), "Sec-Fetch-Site", "same-origin", "Accept", "text/html")
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, body, "form field &#34;username&#34; "+problem+", which PostgreSQL cannot store")
	}
	require.Zero(t, b.count(t, "sessions"))
	require.Contains(t, b.log.String(), `form field \"username\" contains U+0000`, "logged as a warning, escaped")
}

// TestIngestStoresSpansWithTextPostgreSQLCannotStore sends a span with U+0000 in an attribute,
// its name and its status message through Genkit's telemetry API and OTLP (JSON and protobuf):
// each is stored, the characters replaced by U+FFFD, rather than refused.
func TestIngestStoresSpansWithTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	b := textSetup(t, true)
	check := func(traceID string) {
		t.Helper()
		var tree trace.Tree
		require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+traceID, &tree))
		require.Equal(t, 1, tree.SpanCount)
		spans, err := b.store.SpansByTrace(context.Background(), traceID, 10)
		require.NoError(t, err)
		require.Len(t, spans, 1)
		sp := spans[0]
		require.Equal(t, "tool \uFFFD call", sp.Name)
		require.Equal(t, "failed: \uFFFD", sp.StatusMessage)
		var attrs map[string]any
		require.NoError(t, json.Unmarshal(sp.Attributes, &attrs))
		require.Equal(t, "x\uFFFDy", attrs["genkit:output"])
		require.Equal(t, "\uFFFD", attrs["lone"])
	}

	genkitID := strings.ReplaceAll(uuid.NewString(), "-", "")
	body := `{"traceId":"` + genkitID + `","spans":{"6be520f337a0d748":{"spanId":"6be520f337a0d748","traceId":"` + genkitID + `",
		"startTime":1700000000000,"endTime":1700000000005,"displayName":"tool \u0000 call","spanKind":"INTERNAL",
		"attributes":{"genkit:output":"x\u0000y","lone":"\ud800","big":1e131072},"instrumentationLibrary":{"name":"genkit-tracer"},
		"status":{"code":2,"message":"failed: \u0000"}}}}`
	status, out := send(t, http.MethodPost, b.url+"/api/traces", "application/json", body)
	require.Equal(t, http.StatusOK, status, out)
	check(genkitID)
	spans, err := b.store.SpansByTrace(context.Background(), genkitID, 10)
	require.NoError(t, err)
	var attrs map[string]any
	require.NoError(t, json.Unmarshal(spans[0].Attributes, &attrs))
	require.Equal(t, "1e131072", attrs["big"], "a number numeric cannot hold is kept as its characters")

	otlp := func() (ptraceotlp.ExportRequest, string) {
		id := uuid.New()
		td := ptrace.NewTraces()
		sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID([16]byte(id))
		sp.SetSpanID([8]byte{1, 2, 3, 4, 5, 6, 7, 8})
		sp.SetName("tool \x00 call")
		sp.SetStartTimestamp(1700000000000000000)
		sp.SetEndTimestamp(1700000000005000000)
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("failed: \x00")
		sp.Attributes().PutStr("genkit:output", "x\x00y")
		sp.Attributes().PutStr("lone", "\xff")
		return ptraceotlp.NewExportRequestFromTraces(td), strings.ReplaceAll(id.String(), "-", "")
	}
	req, id := otlp()
	raw, err := req.MarshalJSON()
	require.NoError(t, err)
	status, out = send(t, http.MethodPost, b.url+"/v1/traces", "application/json", string(raw))
	require.Equal(t, http.StatusOK, status, out)
	require.NotContains(t, out, "rejected")
	check(id)

	req, id = otlp()
	raw, err = req.MarshalProto()
	require.NoError(t, err)
	status, out = send(t, http.MethodPost, b.url+"/v1/traces", "application/x-protobuf", string(raw))
	require.Equal(t, http.StatusOK, status, out)
	check(id)
}
