package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// closedPortURL is a DATABASE_URL whose server has gone away: nothing listens on its port.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "postgres://loupe:secret@" + addr + "/loupe?sslmode=disable&connect_timeout=2"
}

// downMonitor is a DatabaseMonitor that knows of an outage, as the embedded cluster's supervisor
// does while it restarts PostgreSQL.
type downMonitor struct{ reason string }

func (m downMonitor) Outage() (string, bool) { return m.reason, m.reason != "" }

// setupGone serves over a database that cannot be reached, with the runs API (insert-only: nothing
// to execute).
func setupGone(t *testing.T, dev bool, monitor DatabaseMonitor) string {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), closedPortURL(t))
	require.NoError(t, err, "a pool connects lazily")
	t.Cleanup(pool.Close)
	st := store.New(pool)
	reg := engine.NewRegistry()
	require.NoError(t, demo.Register(bridge.NewApp(reg).(*loupe.App), demo.Config{}))
	svc, err := runs.New(runs.Config{}, st, reg)
	require.NoError(t, err)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: dev, Version: "test"}, Deps{Store: st, Runs: svc, Database: monitor})
	require.NoError(t, err)
	require.NoError(t, srv.Start(context.Background()))
	t.Cleanup(srv.Stop)
	return "http://" + srv.Addr()
}

// requireDatabaseUnavailable checks a JSON API answer: 503 with Retry-After and the
// database_unavailable error, whose message contains want.
func requireDatabaseUnavailable(t *testing.T, resp *http.Response, body, want string) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	var e struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.Equal(t, codeDatabaseUnavailable, e.Error.Code)
	require.Contains(t, e.Error.Message, "the database is unavailable (")
	require.Contains(t, e.Error.Message, want)
	require.EqualValues(t, 5, e.Error.Details["retry_after_seconds"])
}

// TestExternalDatabaseGoneIs503: with a DATABASE_URL whose server is gone, every request that
// needs the database is a 503 with a reason and Retry-After, for the API and for pages alike, and
// never a 500; /readyz says since when and why.
func TestExternalDatabaseGoneIs503(t *testing.T) {
	t.Parallel()
	url := setupGone(t, true, nil)

	resp, body := get(t, url+"/api/v1/runs")
	requireDatabaseUnavailable(t, resp, body, "unreachable since ")
	status := call(t, http.MethodPost, url+"/api/v1/runs", `{"action":"/flow/countdown","input":{"from":3}}`, nil)
	require.Equal(t, http.StatusServiceUnavailable, status, "starting a run")
	resp, body = get(t, url+"/api/v1/dashboard")
	requireDatabaseUnavailable(t, resp, body, "unreachable since ")

	resp, body = get(t, url+"/runs", "Accept", "text/html")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a page")
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body, "the database is unavailable")

	resp, body = get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	var ready map[string]string
	require.NoError(t, json.Unmarshal([]byte(body), &ready))
	require.Equal(t, "unavailable", ready["status"])
	require.Contains(t, ready["database"], "unreachable since ")
	require.Contains(t, ready["database"], "connect", "readiness names the cause")
	require.Equal(t, "database "+ready["database"], ready["reason"])

	resp, _ = get(t, url+"/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the process itself is fine")
}

// TestSignedInRequestWhileDatabaseGoneIs503: outside local mode, looking up the caller's token
// needs the database too; that is a 503 as well, not a 500.
func TestSignedInRequestWhileDatabaseGoneIs503(t *testing.T) {
	t.Parallel()
	url := setupGone(t, false, nil)
	resp, body := get(t, url+"/api/v1/runs", "Authorization", "Bearer loupe_sometoken")
	requireDatabaseUnavailable(t, resp, body, "unreachable since ")
}

// TestOutageReasonComesFromTheMonitor: while the embedded cluster's supervisor knows the database
// is down, /readyz and the 503s give its account.
func TestOutageReasonComesFromTheMonitor(t *testing.T) {
	t.Parallel()
	reason := "down since 2025-01-02T15:04:05Z (3s), restarting (attempt 2)"
	url := setupGone(t, true, downMonitor{reason: reason})
	resp, body := get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.JSONEq(t, fmt.Sprintf(`{"status":"unavailable","database":%q,"reason":%q}`, reason, "database "+reason), body)
	resp, body = get(t, url+"/api/v1/runs")
	requireDatabaseUnavailable(t, resp, body, reason)
}

// TestClassifyTellsOutagesFromFailedStatements: the errors that say the database cannot serve
// now (out of reach, SQLSTATE classes 08 and 57; short of a resource, class 53), as opposed to a
// statement that failed, wrapped as the store wraps them; and what each class 53 code is short of.
func TestClassifyTellsOutagesFromFailedStatements(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, connectErr := pgx.Connect(ctx, closedPortURL(t))
	require.Error(t, connectErr)
	wrap := func(err error) error { return fmt.Errorf("list runs: %w", err) }
	pg := func(code string) error { return wrap(&pgconn.PgError{Code: code, Message: "m"}) }
	for _, tc := range []struct {
		name  string
		err   error
		kind  outageKind
		short string
		maybe bool
	}{
		{"connect refused", wrap(connectErr), unreachable, "", true},
		{"connection exception 08000", pg("08000"), unreachable, "", false},
		{"connection does not exist 08003", pg("08003"), unreachable, "", false},
		{"connection failure 08006", pg("08006"), unreachable, "", false},
		{"protocol violation 08P01", pg("08P01"), unreachable, "", false},
		{"operator intervention 57000", pg("57000"), unreachable, "", false},
		{"admin shutdown 57P01", pg("57P01"), unreachable, "", false},
		{"crash shutdown 57P02", pg("57P02"), unreachable, "", false},
		{"cannot connect now 57P03", pg("57P03"), unreachable, "", false},
		{"database dropped 57P04", pg("57P04"), unreachable, "", false},
		{"idle session timeout 57P05", pg("57P05"), unreachable, "", false},
		{"statement timeout or cancel 57014", pg("57014"), notAnOutage, "", false},
		{"insufficient resources 53000", pg("53000"), shortOf, "insufficient resources", false},
		{"disk full 53100", pg("53100"), shortOf, "no space left on device", false},
		{"out of memory 53200", pg("53200"), shortOf, "out of memory", false},
		{"too many connections 53300", pg("53300"), shortOf, "too many connections", false},
		{"configuration limit exceeded 53400", pg("53400"), shortOf, "a configuration limit reached", false},
		{"connection closed", wrap(pgconn.ErrConnClosed), unreachable, "", false},
		{"unique violation", pg("23505"), notAnOutage, "", false},
		{"undefined table", pg("42P01"), notAnOutage, "", false},
		{"serialization failure", pg("40001"), notAnOutage, "", false},
		{"program limit exceeded", pg("54000"), notAnOutage, "", false},
		{"I/O error 58030", pg("58030"), notAnOutage, "", false},
		{"no code", pg(""), notAnOutage, "", false},
		{"deadline", wrap(context.DeadlineExceeded), notAnOutage, "", true},
		{"network error", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}), notAnOutage, "", true},
		{"not found", wrap(store.ErrNotFound), notAnOutage, "", false},
		{"anything else", errors.New("boom"), notAnOutage, "", false},
	} {
		kind, short := classify(tc.err)
		require.Equal(t, tc.kind, kind, tc.name)
		require.Equal(t, tc.short, short, tc.name)
		require.Equal(t, tc.maybe, mayBeConnectionError(tc.err), tc.name)
	}
}

// TestShortOfAResourceIs503: a statement that fails for want of disk space, memory or
// connections is a 503 database_unavailable naming what is short and since when, never a 500.
func TestShortOfAResourceIs503(t *testing.T) {
	t.Parallel()
	srv := setupGoneServer(t)
	for code, short := range map[string]string{"53100": "no space left on device", "53200": "out of memory", "53300": "too many connections"} {
		err := fmt.Errorf("start run: %w", &pgconn.PgError{Code: code, Message: "could not extend file"})
		e := srv.toError(context.Background(), err)
		require.Equal(t, http.StatusServiceUnavailable, e.Status, code)
		require.Equal(t, codeDatabaseUnavailable, e.Code, code)
		require.Regexp(t, `^the database is unavailable \(`+short+` since \d{4}-\d\d-\d\dT[0-9:]+Z\); retry in a few seconds$`, e.Message, code)
	}
}

// TestNetworkErrorWithDatabaseUpIsStillA500: an error that only may come from the database (here
// a network error, as a model endpoint's would be) is no 503 while the database answers.
func TestNetworkErrorWithDatabaseUpIsStillA500(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	netErr := fmt.Errorf("call model: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	e := b.srv.toError(context.Background(), netErr)
	require.Equal(t, http.StatusInternalServerError, e.Status)
	down := setupGoneServer(t)
	e = down.toError(context.Background(), netErr)
	require.Equal(t, http.StatusServiceUnavailable, e.Status, "the same error while the database is gone")
}

// setupGoneServer is a server over an unreachable database, not listening: for toError alone.
func setupGoneServer(t *testing.T) *Server {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), closedPortURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: true}, Deps{Store: store.New(pool)})
	require.NoError(t, err)
	return srv
}
