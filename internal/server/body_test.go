package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
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
