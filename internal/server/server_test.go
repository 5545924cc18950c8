package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/static"
)

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func TestHealthzAndReadyz(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	resp, body := get(t, b.url+"/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"status":"ok","version":"test"}`, body)
	resp, body = get(t, b.url+"/readyz")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

func TestReadyzReportsUnmigratedSchema(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	require.NoError(t, store.MigrateDown(context.Background(), b.store.Pool()))
	resp, body := get(t, b.url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, body, "devui migrate")
}

// TestReadyzSurvivesDatabaseOutage cuts an external database off (no new connections, existing
// ones killed), checks that readiness reports it with a reason while the process keeps serving and
// that requests needing it are 503s, then lets the database back and checks that readiness and
// requests return without a restart.
func TestReadyzSurvivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, strings.Replace(b.dbURL, dbName(b.dbURL), "postgres", 1))
	require.NoError(t, err)
	defer admin.Close()
	name := dbName(b.dbURL)
	_, err = admin.Exec(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS false`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		resp, body := get(t, b.url+"/readyz")
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, "database unreachable")
	}, 10*time.Second, 50*time.Millisecond)
	resp, _ := get(t, b.url+"/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the process stays alive while the database is down")
	resp, _ = get(t, b.url+"/", "Accept", "text/html")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "pages say the database is down, and are no 500")
	resp, body := get(t, b.url+"/api/v1/dashboard")
	requireDatabaseUnavailable(t, resp, body, "unreachable since ")

	_, err = admin.Exec(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS true`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		resp, _ := get(t, b.url+"/readyz")
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 100*time.Millisecond, "readiness must come back without a restart")
	resp, _ = get(t, b.url+"/api/v1/dashboard")
	require.Equal(t, http.StatusOK, resp.StatusCode, "and so do requests")
}

func dbName(url string) string {
	m := regexp.MustCompile(`/([a-z0-9_]+)\?`).FindStringSubmatch(url)
	return m[1]
}

func TestMetricsExposeHTTPPoolAndRuntime(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	get(t, b.url+"/")
	_, body := get(t, b.url+"/metrics")
	for _, name := range []string{`loupe_http_requests_total{code="200",method="GET",route="/"}`, "loupe_http_request_duration_seconds_bucket",
		"loupe_pgxpool_total_conns", "loupe_pgxpool_acquires_total", "go_goroutines", "process_resident_memory_bytes"} {
		require.Contains(t, body, name)
	}
}

func TestDashboardShowsRealCounts(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	_, err := b.store.RunCreate(context.Background(), store.RunCreateParams{Action: "/flow/travelAgent"})
	require.NoError(t, err)
	resp, body := get(t, b.url+"/", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "/flow/travelAgent")
	require.Regexp(t, `data-count="queued" href="/runs\?status=queued"><div class="label">queued</div><div class="value">1<`, body)
	require.Contains(t, body, "local mode", "the header says sign-in is skipped")

	_, body = get(t, b.url+"/api/v1/dashboard")
	var d struct {
		RunsByStatus map[string]int64 `json:"runs_by_status"`
		Pending      int64            `json:"pending_interrupts"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.EqualValues(t, 1, d.RunsByStatus["queued"])
	require.Zero(t, d.Pending)
}

func TestCSPNonceMatchesScriptTag(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	resp, body := get(t, b.url+"/")
	csp := resp.Header.Get("Content-Security-Policy")
	m := regexp.MustCompile(`script-src 'self' 'nonce-([^']+)'`).FindStringSubmatch(csp)
	require.NotNil(t, m, csp)
	require.Contains(t, body, `nonce="`+m[1]+`"`)
	require.NotContains(t, csp, "unsafe-inline")
	_, body2 := get(t, b.url+"/")
	require.NotContains(t, body2, m[1], "every request gets a fresh nonce")
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
}

// TestTelemetryResponsesAllowNothing: ingest and Genkit's trace reads answer data to programs,
// with a CSP that allows nothing (and so needs no nonce) and the same hardening headers as pages.
func TestTelemetryResponsesAllowNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	for _, check := range []func() *http.Response{
		func() *http.Response { resp, _ := get(t, b.url+"/api/traces"); return resp },
		func() *http.Response {
			resp, out := post(t, b.url+"/v1/traces", "application/json", []byte(`{"resourceSpans":[]}`))
			require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
			return resp
		},
	} {
		resp := check()
		require.Equal(t, "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
			resp.Header.Get("Content-Security-Policy"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	}
	resp, _ := get(t, b.url+"/api/v1/dashboard")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self' 'nonce-",
		"Loupe's own API keeps the pages' policy")
}

func TestErrorsAreJSONForAPIAndHTMLForBrowsers(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	resp, body := get(t, b.url+"/api/v1/nope")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.JSONEq(t, `{"error":{"code":"not_found","message":"Not Found"}}`, body)

	resp, body = get(t, b.url+"/nope", "Accept", "text/html")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body, "Back to the dashboard")
}

func TestPanicBecomesA500WithoutLeakingDetails(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	b.srv.echo.GET("/api/v1/test-panic", func(echo.Context) error { panic("secret detail") })
	resp, body := get(t, b.url+"/api/v1/test-panic")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.NotContains(t, body, "secret detail")
	require.Contains(t, body, `"code":"internal"`)
}

func TestCSRFBlocksCrossSiteButNotBearerClients(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false})
	b.srv.echo.POST("/api/v1/test-write", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	post := func(header ...string) int {
		req, err := http.NewRequest(http.MethodPost, b.url+"/api/v1/test-write", strings.NewReader(`{}`))
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post("Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example", "Cookie", "loupe_session=abc"),
		"a cross-site request carrying the session cookie is refused")
	require.Equal(t, http.StatusForbidden, post("Cookie", "loupe_session=abc"), "and so is one without a CSRF token")
	require.Equal(t, http.StatusUnauthorized, post(), "a request with no credentials at all is told to sign in")
	require.Equal(t, http.StatusUnauthorized, post("Sec-Fetch-Site", "cross-site"), "it has nothing to forge")
	require.Equal(t, http.StatusUnauthorized, post("Sec-Fetch-Site", "same-origin"), "same-origin passes CSRF, then needs sign-in")
	req, err := http.NewRequest(http.MethodPost, b.url+"/login", strings.NewReader("username=x&password=y"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "sign-in stays guarded against login CSRF")
	token := b.userToken(t, "carol", store.RoleReviewer)
	require.Equal(t, http.StatusNoContent, post("Authorization", "Bearer "+token, "Sec-Fetch-Site", "cross-site"))
}

func TestCSRFLetsNonBrowserClientsThroughInLocalMode(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	b.srv.echo.POST("/api/v1/test-write", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	resp, err := http.Post(b.url+"/api/v1/test-write", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
}

func TestDevModeOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"127.0.0.1:4000", "[::1]:4000", "localhost:4000", "127.0.0.2:1"} {
		require.NoError(t, CheckLoopback(ok), ok)
	}
	for _, bad := range []string{"0.0.0.0:4000", ":4000", "192.168.1.10:4000", "[::]:4000", "example.com:80"} {
		require.Error(t, CheckLoopback(bad), bad)
	}
	_, err := New(Config{Addr: "0.0.0.0:4000", Dev: true}, Deps{})
	require.ErrorContains(t, err, "loopback")
}

func TestStaticAssetsAreHashedAndImmutable(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	resp, body := get(t, b.url+static.URL("app.css"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Cache-Control"), "immutable")
	require.Contains(t, resp.Header.Get("Content-Type"), "text/css")
	require.Contains(t, body, "prefers-color-scheme: dark")
	resp, _ = get(t, b.url+"/static/app.css")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "only hashed URLs are served")
}

func TestStopDrainsInFlightRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	entered := make(chan struct{})
	b.srv.echo.GET("/api/v1/test-slow", func(c echo.Context) error {
		close(entered)
		time.Sleep(300 * time.Millisecond)
		return c.String(http.StatusOK, "finished")
	})
	done := make(chan string, 1)
	go func() {
		resp, err := http.Get(b.url + "/api/v1/test-slow")
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		done <- string(body)
	}()
	<-entered
	b.srv.Stop()
	require.Equal(t, "finished", <-done, "a request in flight at shutdown completes")
	_, err := http.Get(b.url + "/healthz")
	require.Error(t, err, "no new connections after Stop")
}

// TestLoopbackServerRefusesOtherHosts: DNS rebinding lets a web page reach a loopback server as
// same-origin under the attacker's domain; a loopback server answers only the names the README
// gives (localhost, 127.0.0.1, ::1) and the address it listens on, not every loopback address.
func TestLoopbackServerRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	status := func(url, host string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url+"/api/v1/dashboard", nil)
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	b := setup(t, opts{dev: true})
	code, body := status(b.url, "attacker.example:4000")
	require.Equal(t, http.StatusMisdirectedRequest, code, body)
	require.Contains(t, body, `localhost, 127.0.0.1 or ::1, not \"attacker.example:4000\"`)
	for _, host := range []string{"127.0.0.2", "127.0.0.2:4000", "127.1.2.3:4000", "[::2]:4000", "localhost.example:4000", "0.0.0.0:4000"} {
		code, body := status(b.url, host)
		require.Equal(t, http.StatusMisdirectedRequest, code, "%s: %s", host, body)
	}
	for _, host := range []string{"localhost:4000", "LOCALHOST", "127.0.0.1:4000", "127.0.0.1", "[::1]:4000", "[::1]", "[0:0:0:0:0:0:0:1]:4000"} {
		code, body := status(b.url, host)
		require.Equal(t, http.StatusOK, code, "%s: %s", host, body)
	}

	// A server that listens on another loopback address answers requests addressed to it.
	other := setup(t, opts{dev: true, addr: "127.0.0.2:0"})
	code, body = status(other.url, other.srv.Addr())
	require.Equal(t, http.StatusOK, code, body)
	code, body = status(other.url, "127.0.0.3:4000")
	require.Equal(t, http.StatusMisdirectedRequest, code, body)
	require.Contains(t, body, `localhost, 127.0.0.1, ::1 or 127.0.0.2, not`)
}

func TestSafeNextKeepsRedirectsOnThisSite(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "https://evil.example", "//evil.example", `/\evil.example`, "/\t/evil.example", "/\n/evil.example", "/\x00x"} {
		require.Equal(t, "/", safeNext(bad), "%q", bad)
	}
	require.Equal(t, "/runs?status=failed", safeNext("/runs?status=failed"))
}

// TestDashboardAsksTheInterruptsQuestion proves the dashboard's waiting list shows what an
// interrupt asks (its metadata's message), as the inbox does, not the metadata's raw JSON; and
// that metadata without a question is cut at whole characters.
func TestDashboardAsksTheInterruptsQuestion(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	for i, md := range []string{`{"price": 299, "message": "Book the flight to Lisbon?"}`, `{"note": "` + strings.Repeat("é", 200) + `"}`} {
		run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/travelAgent"})
		require.NoError(t, err)
		_, err = b.store.InterruptCreate(ctx, []store.InterruptCreateParams{{RunID: run.ID, Turn: 0, Tool: "bookFlight",
			Ref: fmt.Sprintf("b%d", i), Input: json.RawMessage(`{}`), Metadata: json.RawMessage(md)}})
		require.NoError(t, err)
	}
	_, body := get(t, b.url+"/", "Accept", "text/html")
	require.Contains(t, body, "Book the flight to Lisbon?")
	require.NotContains(t, body, "&#34;price&#34;", "raw metadata JSON on the dashboard")
	require.Contains(t, body, strings.Repeat("é", 140), "a long question is cut at whole characters")
	require.True(t, utf8.ValidString(body))
}
