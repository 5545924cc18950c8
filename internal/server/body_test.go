package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/store"
)

// tcpClient is one request over its own TCP connection, written by hand, so that a test can send
// less of the body than Content-Length announces, slowly, or close its side early.
type tcpClient struct {
	t    *testing.T
	conn *net.TCPConn
}

// rawRequest connects to the server and sends a request's head, announcing a body of length
// bytes of contentType, and the first part of that body.
func rawRequest(t *testing.T, b *bundle, path, contentType string, length int, part string, header ...string) *tcpClient {
	t.Helper()
	conn, err := net.Dial("tcp", b.srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", path, b.srv.Addr(), contentType, length)
	for i := 0; i+1 < len(header); i += 2 {
		head += header[i] + ": " + header[i+1] + "\r\n"
	}
	_, err = io.WriteString(conn, head+"\r\n"+part)
	require.NoError(t, err)
	return &tcpClient{t: t, conn: conn.(*net.TCPConn)}
}

// response reads the server's answer. The read deadline only keeps a server that never answers
// from hanging the test: it is far beyond any deadline of the server's.
func (c *tcpClient) response() (*http.Response, string) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(time.Minute)))
	resp, err := http.ReadResponse(bufio.NewReader(c.conn), nil)
	require.NoError(c.t, err, "the server answers")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp, string(body)
}

// requestCounts is loupe_http_requests_total by "code route" for method.
func requestCounts(t *testing.T, b *bundle, method string) map[string]int {
	t.Helper()
	_, body := get(t, b.url+"/metrics")
	re := regexp.MustCompile(`(?m)^loupe_http_requests_total\{code="(\d+)",method="` + method + `",route="([^"]+)"\} (\d+)$`)
	out := map[string]int{}
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		var n int
		_, err := fmt.Sscan(m[3], &n)
		require.NoError(t, err)
		out[m[1]+" "+m[2]] = n
	}
	return out
}

// TestRequestBodyCutShortIs400: a client that announces 100 bytes, sends 10 and closes its side
// went away or broke; it is answered 400 on every kind of body (API JSON, a page's form, Genkit
// and OTLP ingest), logged as a warning and counted as a 400, never a 500, and nothing is written.
// Fifty such clients at once leave no ERROR line.
func TestRequestBodyCutShortIs400(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true, ingest: true, log: &syncBuffer{}})
	cut := func(path, contentType string, header ...string) (*http.Response, string) {
		c := rawRequest(t, b, path, contentType, 100, `{"action":`, header...)
		require.NoError(t, c.conn.CloseWrite())
		return c.response()
	}
	for _, tc := range []struct{ path, contentType string }{
		{"/api/v1/runs", "application/json"},
		{"/api/v1/interrupts/" + strings.Repeat("ab", 16) + "/resolve", "application/json"},
		{"/api/runAction", "application/json"},
		{"/api/traces", "application/json"},
		{"/actions/run", "application/x-www-form-urlencoded"},
	} {
		resp, body := cut(tc.path, tc.contentType, "Accept", "application/json")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", tc.path, body)
		e := apiErrorOf(t, body)
		require.Equal(t, "incomplete_body", e.Error.Code, tc.path)
		require.Contains(t, e.Error.Message, "the client stopped sending it", tc.path)
	}
	resp, body := cut("/v1/traces", "application/x-protobuf")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	var st status.Status
	require.NoError(t, proto.Unmarshal([]byte(body), &st), "OTLP is answered in OTLP's shape")
	require.Contains(t, st.GetMessage(), "the client stopped sending it")

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			resp, _ := cut("/api/v1/runs", "application/json")
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("a cut body got %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()

	counts := requestCounts(t, b, "POST")
	require.Equal(t, 51, counts["400 /api/v1/runs"], "%v", counts)
	for key := range counts {
		require.False(t, strings.HasPrefix(key, "5"), "a cut body is no server error: %v", counts)
	}
	require.Zero(t, b.count(t, "runs"), "nothing was started")
	require.Zero(t, b.count(t, "spans"), "nothing was stored")
	log := b.log.String()
	require.NotContains(t, log, "level=ERROR")
	require.Contains(t, log, `level=WARN msg=request method=POST path=/api/v1/runs status=400`)
}

// TestSlowRequestBodyIs408: a body that arrives too slowly, a byte at a time or not at all after
// its first bytes, is cut at the body read deadline with a 408 rather than held for as long as
// the client likes; a client that sends its body in time is served as before.
func TestSlowRequestBodyIs408(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true, ingest: true, bodyTimeout: 300 * time.Millisecond, log: &syncBuffer{}})
	body := `{"action":"/flow/countdown","input":{"from":1}}`

	stalled := rawRequest(t, b, "/api/v1/runs", "application/json", len(body), body[:10])
	resp, out := stalled.response()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, out)
	e := apiErrorOf(t, out)
	require.Equal(t, "body_timeout", e.Error.Code)
	require.Contains(t, e.Error.Message, "did not arrive within 300ms")

	// A trickle keeps the connection busy but still has to end in time.
	trickle := rawRequest(t, b, "/v1/traces", "application/x-protobuf", 1000, "")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for range 1000 {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if _, err := trickle.conn.Write([]byte{0x0a}); err != nil {
				return // the server gave up on the body and closed the connection
			}
		}
	}()
	resp, out = trickle.response()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, out)
	var st status.Status
	require.NoError(t, proto.Unmarshal([]byte(out), &st), "OTLP is answered in OTLP's shape")
	require.Contains(t, st.GetMessage(), "did not arrive within")

	whole := rawRequest(t, b, "/api/v1/runs", "application/json", len(body), body)
	resp, out = whole.response()
	require.Equal(t, http.StatusCreated, resp.StatusCode, out)
	var run store.Run
	require.NoError(t, json.Unmarshal([]byte(out), &run))
	b.waitStatus(t, run.ID, store.RunSucceeded)

	counts := requestCounts(t, b, "POST")
	require.Equal(t, 1, counts["408 /api/v1/runs"], "%v", counts)
	require.Equal(t, 1, counts["408 /v1/traces"], "%v", counts)
	require.NotContains(t, b.log.String(), "level=ERROR")
}

// TestBodyDeadlineLeavesStreamsAndWebSocketsAlone: the body read deadline ends with the body. A
// streamed answer, a trace's event stream and a WebSocket that last many times the deadline
// deliver everything (http.Server's ReadTimeout, which bounds the whole request, cut the trace
// stream short).
func TestBodyDeadlineLeavesStreamsAndWebSocketsAlone(t *testing.T) {
	t.Parallel()
	const deadline = 100 * time.Millisecond
	b := setup(t, opts{dev: true, stack: true, ingest: true, bodyTimeout: deadline})

	// countdown streams a tick every 200 ms: 5 ticks outlast the deadline tenfold.
	req, err := http.NewRequest(http.MethodPost, b.url+"/api/runAction?stream=true", strings.NewReader(`{"key":"/flow/countdown","input":{"from":5}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	traceID := resp.Header.Get("X-Genkit-Trace-Id")
	streamCtx, leave := context.WithCancel(context.Background())
	defer leave()
	sreq, err := http.NewRequestWithContext(streamCtx, http.MethodGet, b.url+"/api/traces/"+traceID+"/stream", nil)
	require.NoError(t, err)
	stream, err := http.DefaultClient.Do(sreq)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	events := streamEvents(stream.Body)

	streamed := readAll(t, resp.Body)
	require.True(t, strings.HasPrefix(streamed, `{"n":5}`+"\n"+`{"n":4}`+"\n"+`{"n":3}`+"\n"+`{"n":2}`+"\n"+`{"n":1}`+"\n"+`{"result":"liftoff"`), streamed)
	require.NoError(t, b.prov.ForceFlush(context.Background()))
	timeout := time.After(30 * time.Second)
	for rootEnded := false; !rootEnded; {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the trace stream ended before the root span did")
			if sp, _ := ev["span"].(map[string]any); ev["type"] == "span_end" && sp != nil && sp["parentSpanId"] == nil {
				rootEnded = true
			}
		case <-timeout:
			t.Fatal("the trace stream did not run to the root span's end")
		}
	}
	leave()

	// A run of 10 ticks (2 s) followed over the socket, from just after it was started.
	var run store.Run
	require.Equal(t, http.StatusCreated, call(t, http.MethodPost, b.url+"/api/v1/runs", `{"action":"/flow/countdown","input":{"from":10}}`, &run))
	conn, wsResp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(b.url, "http")+"/ws", nil)
	require.NoError(t, err)
	wsResp.Body.Close()
	defer conn.Close()
	require.NoError(t, conn.WriteJSON(live.Request{Type: "subscribe", Topic: "run:" + run.ID.String()}))
	ticks, succeeded := 0, false
	for ticks < 10 || !succeeded {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
		var m struct {
			Kind event.Kind      `json:"kind"`
			Data json.RawMessage `json:"data"`
		}
		require.NoError(t, conn.ReadJSON(&m), "the socket stays open past the body deadline (%d ticks so far)", ticks)
		switch m.Kind {
		case event.RunChunks:
			var d struct {
				Chunks []live.ChunkData `json:"chunks"`
			}
			require.NoError(t, json.Unmarshal(m.Data, &d))
			ticks += len(d.Chunks)
		case event.RunStatus, event.Snapshot:
			succeeded = succeeded || strings.Contains(string(m.Data), `"status":"`+store.RunSucceeded+`"`)
		}
	}
	require.Equal(t, 10, ticks, "every chunk came over the socket")
}
