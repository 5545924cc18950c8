package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// genkitBundle is a local-mode Loupe that traces into PostgreSQL and serves Genkit's reflection
// and telemetry APIs, with the demo agents and two test flows: gate, which waits for the test to
// open it (or for cancellation), and fail, which fails.
// genkitBundle is setup's server with two more flows: gate, which waits until open is closed, and
// fail, which fails.
type genkitBundle struct {
	*bundle
	open chan struct{}
}

func genkitSetup(t *testing.T) *genkitBundle {
	t.Helper()
	open := make(chan struct{})
	define := func(reg *engine.Registry) {
		engine.DefineFlow(reg, "gate", func(ctx context.Context, in string) (string, error) {
			select {
			case <-open:
				return "opened " + in, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		engine.DefineFlow(reg, "fail", func(ctx context.Context, in string) (string, error) {
			return "", errors.New("the flow broke on " + in)
		})
	}
	b := setup(t, opts{dev: true, stack: true, ingest: true, workers: 2, define: []func(*engine.Registry){define}})
	return &genkitBundle{bundle: b, open: open}
}

// post sends a JSON body and returns the response, its body not yet read.
func (b *genkitBundle) post(t *testing.T, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}

// rootSpan waits until the trace's root span has ended in the database, and returns it as
// Genkit's GET /api/traces/{id} gives it.
func (b *genkitBundle) rootSpan(t *testing.T, traceID string) *trace.SpanData {
	t.Helper()
	require.NoError(t, b.prov.ForceFlush(context.Background()))
	var root *trace.SpanData
	require.Eventually(t, func() bool {
		resp, err := http.Get(b.url + "/api/traces/" + traceID)
		require.NoError(t, err)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		var td trace.TraceData
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&td))
		for _, sp := range td.Spans {
			if sp.ParentSpanID == "" && sp.EndTime > 0 {
				root = sp
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "trace %s has no ended root span", traceID)
	return root
}

func attrsOf(t *testing.T, sp *trace.SpanData) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(sp.Attributes, &m))
	return m
}

var (
	hexTraceID = regexp.MustCompile(`^[0-9a-f]{32}$`)
	hexSpanID  = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// TestGenkitRunActionAnswersInGenkitsShape: runAction answers as Genkit's reflection server does:
// the trace and span ids in X-Genkit-Trace-Id / X-Genkit-Span-Id, and a body of
// {"result","telemetry":{"traceId"}} that names the same trace, whose root span stores the input
// and output JSON-encoded (a string output as "\"liftoff\"").
func TestGenkitRunActionAnswersInGenkitsShape(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	resp := b.post(t, "/api/runAction", `{"key":"/flow/countdown","input":{"from":1},"runtimeId":"loupe"}`)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	traceID, spanID := resp.Header.Get("X-Genkit-Trace-Id"), resp.Header.Get("X-Genkit-Span-Id")
	require.Regexp(t, hexTraceID, traceID)
	require.Regexp(t, hexSpanID, spanID)
	require.Equal(t, "loupe/test", resp.Header.Get("X-Genkit-Version"))
	require.JSONEq(t, `{"result":"liftoff","telemetry":{"traceId":"`+traceID+`"}}`, body)

	root := b.rootSpan(t, traceID)
	require.Equal(t, spanID, root.SpanID)
	attrs := attrsOf(t, root)
	require.Equal(t, `"liftoff"`, attrs["genkit:output"])
	require.JSONEq(t, `{"from":1}`, attrs["genkit:input"].(string))
	require.Equal(t, "flow", attrs["genkit:metadata:subtype"])
	require.Equal(t, "countdown", attrs["genkit:name"])
}

// TestGenkitStreamingRunActionFraming: with ?stream=true the headers, trace id included, are sent
// as the action starts, before its first chunk; each chunk is a JSON line ending in "\n", and the
// final {"result","telemetry"} follows the last newline with none after it, which is what the
// genkit CLI's manager parses as the final object (a trailing newline made it parse "" and fail
// with "Unexpected end of JSON input").
func TestGenkitStreamingRunActionFraming(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	resp := b.post(t, "/api/runAction?stream=true", `{"key":"/flow/countdown","input":{"from":2}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
	traceID := resp.Header.Get("X-Genkit-Trace-Id")
	require.Regexp(t, hexTraceID, traceID)
	require.Regexp(t, hexSpanID, resp.Header.Get("X-Genkit-Span-Id"))
	body := readAll(t, resp.Body)
	require.Equal(t, `{"n":2}`+"\n"+`{"n":1}`+"\n"+`{"result":"liftoff","telemetry":{"traceId":"`+traceID+`"}}`, body)

	// The headers come before the action ends: gate holds its flow open until the test opens it.
	resp = b.post(t, "/api/runAction?stream=true", `{"key":"/flow/gate","input":"up"}`)
	require.Regexp(t, hexTraceID, resp.Header.Get("X-Genkit-Trace-Id"), "the trace id is sent while the flow still runs")
	close(b.open)
	require.JSONEq(t, `{"result":"opened up","telemetry":{"traceId":"`+resp.Header.Get("X-Genkit-Trace-Id")+`"}}`, readAll(t, resp.Body))
}

// genkitError is Genkit's {"error": Status}.
type genkitError struct {
	Error struct {
		Code    *int           `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func decodeGenkitError(t *testing.T, body string) genkitError {
	t.Helper()
	var e genkitError
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.NotNil(t, e.Error.Code, "the error has a numeric code: %s", body)
	require.NotNil(t, e.Error.Details, "details is always an object (the CLI reads details.stack): %s", body)
	return e
}

// TestGenkitRunActionErrorsInGenkitsShape: a failed action answers 200 with
// {"error":{"code","message","details":{"traceId"}}}, in both modes, the stream's error being its
// last line with no newline after it; an input the schema refuses fails before any span, with
// INVALID_ARGUMENT; an unknown action is a 404 whose body is the Status itself, as Genkit Go
// answers, so that the CLI prints its code and message instead of "undefined".
func TestGenkitRunActionErrorsInGenkitsShape(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	for _, path := range []string{"/api/runAction", "/api/runAction?stream=true"} {
		resp := b.post(t, path, `{"key":"/flow/fail","input":"purpose"}`)
		body := readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.False(t, strings.HasSuffix(body, "\n"), path)
		e := decodeGenkitError(t, body)
		require.Equal(t, 2, *e.Error.Code, "UNKNOWN: %s", body)
		require.Contains(t, e.Error.Message, "the flow broke on purpose")
		require.Equal(t, resp.Header.Get("X-Genkit-Trace-Id"), e.Error.Details["traceId"])
		require.Regexp(t, hexTraceID, e.Error.Details["traceId"])
	}

	resp := b.post(t, "/api/runAction", `{"key":"/flow/countdown","input":{"from":"ten"}}`)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	e := decodeGenkitError(t, body)
	require.Equal(t, 3, *e.Error.Code, "INVALID_ARGUMENT: %s", body)
	require.Contains(t, e.Error.Message, "from")

	resp = b.post(t, "/api/runAction", `{"key":"/flow/nope","input":1}`)
	body = readAll(t, resp.Body)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var st struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &st), body)
	require.Equal(t, 5, st.Code)
	require.Contains(t, st.Message, `"/flow/nope" not found`)
	require.NotNil(t, st.Details)
}

// TestGenkitRunActionTelemetryLabels: flow:batchRun --label b1 sends telemetryLabels
// {"batchRun":"b1"}; Genkit puts them on the root span's attributes, where eval:extractData --label
// looks for them, and so does Loupe.
func TestGenkitRunActionTelemetryLabels(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	resp := b.post(t, "/api/runAction", `{"key":"/flow/countdown","input":{"from":1},"telemetryLabels":{"batchRun":"b1"}}`)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"result":"liftoff"`)
	root := b.rootSpan(t, resp.Header.Get("X-Genkit-Trace-Id"))
	require.Equal(t, "b1", attrsOf(t, root)["batchRun"])
}

// TestGenkitRunActionInterrupts: a flow run through the reflection API is a durable run, so one
// whose generate stops at an interrupt waits in Loupe's inbox: the CLI gets FAILED_PRECONDITION
// naming the question and where it waits (the inbox item, the run), with the trace id and the
// interrupted tool requests, instead of an empty result; the reviewer's decision then finishes the
// run. A tool run on its own that interrupts answers the same code with its interrupt's metadata.
func TestGenkitRunActionInterrupts(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	resp := b.post(t, "/api/runAction", `{"key":"/flow/travelAgent","input":{"destination":"Lisbon"}}`)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	e := decodeGenkitError(t, body)
	require.Equal(t, 9, *e.Error.Code, body)
	require.Contains(t, e.Error.Message, `bookFlight: Approve booking a economy flight to Lisbon`)
	require.Contains(t, e.Error.Message, "waits in Loupe's inbox")
	require.Equal(t, resp.Header.Get("X-Genkit-Trace-Id"), e.Error.Details["traceId"])
	interrupts := e.Error.Details["interrupts"].([]any)
	require.Len(t, interrupts, 1)
	require.Equal(t, "bookFlight", interrupts[0].(map[string]any)["name"])
	require.NotNil(t, interrupts[0].(map[string]any)["interrupt"])
	require.Contains(t, e.Error.Details["inbox"], "/inbox?sel="+interrupts[0].(map[string]any)["id"].(string))

	runID, err := uuid.Parse(e.Error.Details["runId"].(string))
	require.NoError(t, err)
	require.Equal(t, runID.String(), resp.Header.Get("X-Loupe-Run-Id"))
	itID, err := uuid.Parse(interrupts[0].(map[string]any)["id"].(string))
	require.NoError(t, err)
	it, err := b.store.InterruptGet(context.Background(), itID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, it.Status, "the interrupt waits in the inbox")
	_, err = b.runs.Resolve(context.Background(), runs.ResolveParams{InterruptID: itID, Action: runs.ActionApprove, Actor: "rita", Version: it.Version})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err := b.store.RunGet(context.Background(), runID)
		require.NoError(t, err)
		return r.Status == store.RunSucceeded
	}, 30*time.Second, 20*time.Millisecond, "the approval finishes the run")

	resp = b.post(t, "/api/runAction", `{"key":"/tool/transfer","input":{"to":"bob","amount":5,"currency":"EUR"}}`)
	body = readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	e = decodeGenkitError(t, body)
	require.Equal(t, 9, *e.Error.Code, body)
	require.Contains(t, e.Error.Message, "interrupted to ask a person")
	require.NotNil(t, e.Error.Details["interrupt"])
	require.Regexp(t, hexTraceID, e.Error.Details["traceId"])
}

// TestGenkitCancelAction: POST /api/cancelAction {traceId} stops an action that runAction runs,
// which then ends with Genkit's CANCELLED error; a trace id that runs nothing (any more) is a 404
// {"message"}, and a body without one a 400, as Genkit's reflection server answers.
func TestGenkitCancelAction(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	resp := b.post(t, "/api/runAction?stream=true", `{"key":"/flow/gate","input":"never"}`)
	traceID := resp.Header.Get("X-Genkit-Trace-Id")
	require.Regexp(t, hexTraceID, traceID)

	cancel := b.post(t, "/api/cancelAction", `{"traceId":"`+traceID+`"}`)
	require.Equal(t, http.StatusOK, cancel.StatusCode)
	require.JSONEq(t, `{"message":"Action cancelled"}`, readAll(t, cancel.Body))
	require.JSONEq(t, `{"error":{"code":1,"message":"Action was cancelled","details":{"traceId":"`+traceID+`","runId":"`+resp.Header.Get("X-Loupe-Run-Id")+`"}}}`, readAll(t, resp.Body))

	again := b.post(t, "/api/cancelAction", `{"traceId":"`+traceID+`"}`)
	require.Equal(t, http.StatusNotFound, again.StatusCode)
	require.JSONEq(t, `{"message":"Action not found or already completed"}`, readAll(t, again.Body))
	missing := b.post(t, "/api/cancelAction", `{}`)
	require.Equal(t, http.StatusBadRequest, missing.StatusCode)
	require.JSONEq(t, `{"error":"traceId is required"}`, readAll(t, missing.Body))
}

// TestGenkitNotifyAndLogs: the CLI's POST /api/notify is answered OK (no more "Failed to notify
// runtime: 404"), and the log lists answer Genkit's {"logs":[]}.
func TestGenkitNotifyAndLogs(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	resp := b.post(t, "/api/notify", `{"telemetryServerUrl":"http://localhost:4033","reflectionApiSpecVersion":1}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "OK", readAll(t, resp.Body))
	for _, path := range []string{"/api/logs?limit=15", "/api/traces/0af7651916cd43dd8448eb211c80319c/logs",
		"/api/traces/0af7651916cd43dd8448eb211c80319c/spans/b7ad6b7169203331/logs"} {
		var out map[string]any
		require.Equal(t, http.StatusOK, call(t, "GET", b.url+path, "", &out), path)
		require.Equal(t, map[string]any{"logs": []any{}}, out, path)
	}
}

// streamEvents reads an event stream's messages as they come, until it ends.
func streamEvents(r io.Reader) <-chan map[string]any {
	ch := make(chan map[string]any, 64)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		var msg strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line != "\n" {
				msg.WriteString(strings.TrimPrefix(line, "data: "))
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(msg.String()), &m) == nil {
				ch <- m
			}
			msg.Reset()
		}
	}()
	return ch
}

// TestGenkitStreamTrace: GET /api/traces/{id}/stream is Genkit's telemetry server's stream: an
// event stream that starts with the trace so far, then sends span_start / span_end events with
// the span as its spans come in; as Genkit's, it stays open after the root span has ended, until
// the client leaves. A trace that ended before the stream opened is its snapshot first.
func TestGenkitStreamTrace(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	resp := b.post(t, "/api/runAction?stream=true", `{"key":"/flow/gate","input":"later"}`)
	traceID := resp.Header.Get("X-Genkit-Trace-Id")
	require.Regexp(t, hexTraceID, traceID)

	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/api/traces/"+traceID+"/stream", nil)
	require.NoError(t, err)
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	require.Equal(t, "text/event-stream", stream.Header.Get("Content-Type"))
	events := streamEvents(stream.Body)
	close(b.open)
	require.Contains(t, readAll(t, resp.Body), `"result":"opened later"`)
	require.NoError(t, b.prov.ForceFlush(context.Background()))
	rootEnded := func(ev map[string]any) bool {
		spans := []any{ev["span"]}
		if all, ok := ev["spans"].(map[string]any); ok {
			spans = spans[:0]
			for _, sp := range all {
				spans = append(spans, sp)
			}
		}
		for _, sp := range spans {
			m, _ := sp.(map[string]any)
			if m != nil && m["displayName"] == "gate" && m["parentSpanId"] == nil && m["endTime"].(float64) > 0 {
				return true
			}
		}
		return false
	}
	deadline := time.After(20 * time.Second)
	for ended := false; !ended; {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the stream ended before the root span did")
			require.Equal(t, traceID, ev["traceId"])
			if _, isSnapshot := ev["spans"]; !isSnapshot {
				require.Contains(t, []any{"span_start", "span_end"}, ev["type"])
			}
			ended = rootEnded(ev)
		case <-deadline:
			t.Fatal("the root span's end did not come")
		}
	}
	select {
	case _, ok := <-events:
		require.True(t, ok, "the stream stays open after the root span has ended, as Genkit's does")
	case <-time.After(3 * traceStreamPoll):
	}
	leave()
	for range events { // the client left: the stream's reader ends
	}

	// Afterwards: the snapshot first.
	b.rootSpan(t, traceID)
	ctx2, leave2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer leave2()
	req, err = http.NewRequestWithContext(ctx2, http.MethodGet, b.url+"/api/traces/"+traceID+"/stream", nil)
	require.NoError(t, err)
	stream2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream2.Body.Close()
	first := <-streamEvents(stream2.Body)
	require.Equal(t, traceID, first["traceId"])
	require.NotEmpty(t, first["spans"])
	leave2()
}

// TestGenkitRunActionGenerateInterruptedIsItsResult: /util/generate run on its own answers its
// interrupted response as its result, interrupts included, as Genkit's does; only a flow, whose
// output is not final while it waits, answers FAILED_PRECONDITION.
func TestGenkitRunActionGenerateInterruptedIsItsResult(t *testing.T) {
	t.Parallel()
	b := genkitSetup(t)
	resp := b.post(t, "/api/runAction", `{"key":"/util/generate","input":{"model":"demo/travel",
		"messages":[{"role":"user","content":[{"text":"Plan a trip to Lisbon next Friday."}]}],"tools":["getWeather","bookFlight"]}}`)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var res struct {
		Result struct {
			FinishReason string `json:"finishReason"`
			Message      struct {
				Content []map[string]any `json:"content"`
			} `json:"message"`
		} `json:"result"`
		Telemetry struct {
			TraceID string `json:"traceId"`
		} `json:"telemetry"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &res), body)
	require.Equal(t, "interrupted", res.Result.FinishReason, body)
	require.Contains(t, body, `"interrupt"`)
	require.Equal(t, resp.Header.Get("X-Genkit-Trace-Id"), res.Telemetry.TraceID)
}
