package store_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestIsConnectionLost feeds IsConnectionLost the errors a real server gives: a connection its
// server ended (as a restart or a crash ends every connection) and a connect to a port where
// nothing listens are lost connections; a statement the server refuses is not.
func TestIsConnectionLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.NewURL(t)
	victim, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer victim.Close(ctx)
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(ctx)

	_, err = victim.Exec(ctx, "SELECT nonsense FROM")
	require.Error(t, err)
	require.False(t, store.IsConnectionLost(err), "a syntax error is a failed statement: %v", err)
	_, err = victim.Exec(ctx, "CREATE TEMP TABLE u (v int PRIMARY KEY); INSERT INTO u VALUES (1), (1)")
	require.Error(t, err)
	require.False(t, store.IsConnectionLost(err), "a unique violation is a failed statement: %v", err)

	pid := victim.PgConn().PID()
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n))
		return n == 0
	}, 30*time.Second, 10*time.Millisecond, "the server ends the connection")
	_, err = victim.Exec(ctx, "SELECT 1")
	require.Error(t, err)
	require.True(t, store.IsConnectionLost(err), "a connection the server ended: %v", err)

	// A COPY whose connection is cut mid-stream, with no word from the server: pgconn's CopyFrom
	// answers with the socket's own error (an unexpected EOF, a reset), none of pgconn's types;
	// ingest's COPY says the connection is lost (a span exporter logged it as a failure of its own).
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer proxy.Close()
	target := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	cut := make(chan struct{})
	go func() {
		client, err := proxy.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", target)
		if err != nil {
			client.Close()
			return
		}
		go func() { _, _ = io.Copy(server, client) }()
		go func() { _, _ = io.Copy(client, server) }()
		<-cut
		client.Close()
		server.Close()
	}()
	cfg.Host, cfg.Port = "127.0.0.1", uint16(proxy.Addr().(*net.TCPAddr).Port)
	copier, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer copier.Close(ctx)
	_, err = copier.Exec(ctx, "CREATE TEMP TABLE c (LIKE spans)")
	require.NoError(t, err)
	close(cut)
	spans := []store.Span{{TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Name: "s", StartTime: 1}}
	err = store.CopySpans(ctx, copier.PgConn(), "c", spans)
	require.Error(t, err)
	require.True(t, store.IsConnectionLost(err), "a COPY whose connection was cut: %v (%T)", err, err)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = pgx.Connect(ctx, "postgres://loupe@"+addr+"/loupe?connect_timeout=5")
	require.Error(t, err)
	require.True(t, store.IsConnectionLost(err), "a connect to a port where nothing listens: %v", err)
}
