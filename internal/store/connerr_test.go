package store_test

import (
	"context"
	"net"
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

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = pgx.Connect(ctx, "postgres://loupe@"+addr+"/loupe?connect_timeout=5")
	require.Error(t, err)
	require.True(t, store.IsConnectionLost(err), "a connect to a port where nothing listens: %v", err)
}
