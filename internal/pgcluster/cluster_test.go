package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// newTestCluster prepares a cluster in a fresh directory that the server's account can reach even
// when tests run as root.
func newTestCluster(t *testing.T) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "loupe-pgcluster-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := New(Config{DataDir: dir, Fast: true})
	require.NoError(t, err, "the embedded cluster needs PostgreSQL server binaries: apt-get install -y postgresql")
	return c
}

func queryOne(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
}

func TestStartStopReusesTheSameCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newTestCluster(t)
	require.NoError(t, c.Start(ctx))
	queryOne(t, c.URL())

	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	pid := c.cmd.Process.Pid
	c.Stop()
	c.Stop() // safe twice
	require.False(t, isPostgres(pid), "postgres must be gone after Stop")

	again, err := New(c.cfg)
	require.NoError(t, err)
	require.NoError(t, again.Start(ctx))
	defer again.Stop()
	conn, err = pgx.Connect(ctx, again.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v int
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, 42, v, "the second start must reuse the data of the first")
}

func TestStartRecoversFromStaleLockAndOrphan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newTestCluster(t)

	// A server already running on the cluster (another devui, or a detached start) is used as is,
	// and not stopped by the one that merely attached to it.
	require.NoError(t, c.StartDetached(ctx))
	runningPort, ok := c.runningPort()
	require.True(t, ok)
	second, err := New(c.cfg)
	require.NoError(t, err)
	require.NoError(t, second.Start(ctx), "start must use the running server")
	queryOne(t, second.URL())
	require.Equal(t, runningPort, second.Port())
	second.Stop()
	_, ok = c.runningPort()
	require.True(t, ok, "an attached Start does not stop a server it does not own")
	require.NoError(t, c.StopDetached(ctx))

	// A stale lock whose process is gone (the server was SIGKILLed too).
	lock := filepath.Join(c.pgData, "postmaster.pid")
	require.NoError(t, os.WriteFile(lock, []byte("999999\n"+c.pgData+"\n0\n5432\n"), 0o600))
	third, err := New(c.cfg)
	require.NoError(t, err)
	require.NoError(t, third.Start(ctx))
	defer third.Stop()
	queryOne(t, third.URL())
}

func TestStopDetached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newTestCluster(t)
	require.NoError(t, c.StartDetached(ctx))
	url, ok := c.Running()
	require.True(t, ok)
	queryOne(t, url)
	require.NoError(t, c.StartDetached(ctx), "a second detached start reuses the running server")
	require.NoError(t, c.StopDetached(ctx))
	_, ok = c.Running()
	require.False(t, ok)
	require.NoError(t, c.StopDetached(ctx), "stopping a stopped cluster is not an error")
}

func TestChildDiesWithParentSignal(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	require.NoError(t, c.Start(context.Background()))
	defer c.Stop()
	require.Equal(t, syscall.SIGINT, c.cmd.SysProcAttr.Pdeathsig, "postgres must get SIGINT when devui dies")
}

func TestNoBinariesMessageNamesTheWaysOut(t *testing.T) {
	t.Parallel()
	msg := ErrNoBinaries.Error()
	require.Contains(t, msg, "apt-get install")
	require.Contains(t, msg, "brew install")
	require.Contains(t, msg, "docker compose up -d db")
	require.Contains(t, msg, "DATABASE_URL")
}

func TestConcurrentStartsShareOneCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := newTestCluster(t)
	second, err := New(first.cfg)
	require.NoError(t, err)
	errs := make(chan error, 2)
	for _, c := range []*Cluster{first, second} {
		go func() { errs <- c.Start(ctx) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	defer first.Stop()
	defer second.Stop()
	require.Equal(t, first.Port(), second.Port(), "the second start uses the server the first started")
	queryOne(t, first.URL())
	queryOne(t, second.URL())
}

// TestDetachedClusterKeepsItsPortAcrossRestarts proves a cluster started again (after a stop, a
// crash or a reboot) takes the port it last ran on when that port is free, so a URL that a script
// or another program saved keeps working.
func TestDetachedClusterKeepsItsPortAcrossRestarts(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	ctx := context.Background()
	require.NoError(t, c.StartDetached(ctx))
	first, ok := c.Running()
	require.True(t, ok)
	require.NoError(t, c.StopDetached(ctx))

	again, err := New(Config{DataDir: c.cfg.DataDir, Fast: true})
	require.NoError(t, err)
	require.NoError(t, again.StartDetached(ctx))
	t.Cleanup(func() { _ = again.StopDetached(context.Background()) })
	second, ok := again.Running()
	require.True(t, ok)
	require.Equal(t, first, second, "the restarted cluster answers at the same URL")
}

// TestAttachedStartTakesOverWhenTheOwnerStops: a Start that found another process's postgres
// running uses it, and once that owner stops it, starts postgres as its own child and supervises
// it, on the same port, with what was committed before.
func TestAttachedStartTakesOverWhenTheOwnerStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := newTestCluster(t)
	first.policy.firstDelay = 10 * time.Millisecond
	require.NoError(t, first.Start(ctx))
	defer first.Stop()
	second, err := New(first.cfg)
	require.NoError(t, err)
	second.policy.firstDelay = 10 * time.Millisecond
	require.NoError(t, second.Start(ctx))
	defer second.Stop()
	second.mu.Lock()
	require.Nil(t, second.cmd, "the second start uses the first one's server")
	second.mu.Unlock()
	conn, err := pgx.Connect(ctx, second.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SET synchronous_commit = on; CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	first.Stop()
	require.Eventually(t, func() bool {
		second.mu.Lock()
		defer second.mu.Unlock()
		return second.cmd != nil && second.own != nil && second.health.Restarts == 1
	}, time.Minute, 10*time.Millisecond, "the second takes the cluster over")
	require.Equal(t, first.Port(), second.Port())
	conn, err = pgx.Connect(ctx, second.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v int
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, 7, v)
}
