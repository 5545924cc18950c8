package live_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestListenConnectionNeverReturnsToThePool proves that the hub's LISTEN connection is closed
// outside the pool: the pool's other users never get a connection that the hub then closes under
// them. A one-connection pool makes every other query wait for exactly the connection the listener
// gives up, whether the hub stops or its connection is lost and it reconnects; run under -race,
// closing a connection that went back to the pool is a data race, and outside -race the waiting
// query fails with "conn closed".
func TestListenConnectionNeverReturnsToThePool(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(storetest.NewURL(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	for round := range 20 {
		h, err := live.New(live.Config{Pool: pool, Channel: "race_test"})
		require.NoError(t, err)
		require.NoError(t, h.Start(context.Background()))

		// Queries queued behind the listener, waiting for the only connection.
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				var one int
				errs <- pool.QueryRow(ctx, "SELECT 1").Scan(&one)
			}()
		}
		// Give the queries time to queue on the pool before the listener lets go.
		require.Eventually(t, func() bool { return pool.Stat().EmptyAcquireCount() > int64(round*4) }, 10*time.Second, time.Millisecond)
		h.Stop()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "round %d: a query on the pool after the hub let go of its connection", round)
		}
	}
}
