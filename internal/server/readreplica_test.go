package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/pgcluster"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// TestTracePagesReadFromAStreamingReplica runs a primary and a real streaming replica of it
// (pg_basebackup, hot standby), and a server whose reads go to the replica (Deps.Reads, trace.Config.Reads:
// serve --read-database-url). A trace ingested on the primary shows on the trace list, its page and
// the trace API once the replica has replayed it; with the replica's replay paused, a new trace is
// on the primary but on no page, and it shows once replay resumes: the pages read the replica.
// Ingest, meanwhile, writes to the primary.
func TestTracePagesReadFromAStreamingReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root, err := os.MkdirTemp("", "loupe-replica-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(root, 0o755))
	t.Cleanup(func() { os.RemoveAll(root) })

	primary, err := pgcluster.New(pgcluster.Config{DataDir: filepath.Join(root, "primary"), Fast: true})
	require.NoError(t, err)
	require.NoError(t, primary.Start(ctx))
	t.Cleanup(primary.Stop)
	pp, err := pgxpool.New(ctx, primary.URL())
	require.NoError(t, err)
	t.Cleanup(pp.Close)
	_, err = store.Migrate(ctx, pp)
	require.NoError(t, err)

	standby, err := primary.NewStandby(ctx, filepath.Join(root, "standby"))
	require.NoError(t, err)
	require.NoError(t, standby.Start(ctx))
	t.Cleanup(standby.Stop)
	rp, err := pgxpool.New(ctx, standby.URL())
	require.NoError(t, err)
	t.Cleanup(rp.Close)
	var inRecovery bool
	require.NoError(t, rp.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery))
	require.True(t, inRecovery, "the replica is a standby")

	st, reads := store.New(pp), store.New(rp)
	traces, err := trace.NewService(trace.Config{Store: st, Reads: reads, StartDelay: -1})
	require.NoError(t, err)
	t.Cleanup(traces.Close)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: true}, Deps{Store: st, Reads: reads, Traces: traces})
	require.NoError(t, err)
	page := func(path string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:4000"+path, nil)
		req.Header.Set("Accept", "text/html")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	ingest := func(name string) string {
		id := newTraceID()
		t0 := time.Now().Add(-time.Second).UnixNano()
		_, err := traces.Ingest(ctx, store.SpanSourceOTLP, []store.Span{testSpan(id, spanHex('a', 1), "", name, t0, t0+5e6, "")})
		require.NoError(t, err)
		return id
	}
	onReplica := func(id string) bool {
		_, err := reads.TraceGet(ctx, id)
		return err == nil
	}

	first := ingest("replicated-trace")
	require.Eventually(t, func() bool { return onReplica(first) }, 30*time.Second, 20*time.Millisecond)
	code, body := page("/traces")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<tr data-trace="`+first+`">`)
	code, body = page("/traces/" + first)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "replicated-trace")

	_, err = rp.Exec(ctx, `SELECT pg_wal_replay_pause()`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var state string
		require.NoError(t, rp.QueryRow(ctx, `SELECT pg_get_wal_replay_pause_state()`).Scan(&state))
		return state == "paused"
	}, 30*time.Second, 20*time.Millisecond)
	second := ingest("held-back-trace")
	_, err = st.TraceGet(ctx, second)
	require.NoError(t, err, "ingest wrote to the primary")
	_, body = page("/traces")
	require.NotContains(t, body, second, "the list reads the replica, which has not replayed it")
	code, _ = page("/api/v1/traces/" + second)
	require.Equal(t, http.StatusNotFound, code, "the trace API reads the replica too")

	_, err = rp.Exec(ctx, `SELECT pg_wal_replay_resume()`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, body := page("/traces")
		return onReplica(second) && strings.Contains(body, `<tr data-trace="`+second+`">`)
	}, 30*time.Second, 50*time.Millisecond, "the trace shows once the replica replays it")
	code, _ = page("/api/v1/traces/" + second)
	require.Equal(t, http.StatusOK, code)
}
