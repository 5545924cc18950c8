package pgcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// holdStartLock takes the lock that serialises starts of the cluster, as another devui starting
// it would, so that a test can look at the cluster while the supervisor waits to restart it. The
// returned func releases it.
func holdStartLock(t *testing.T, c *Cluster) func() {
	t.Helper()
	f, err := os.OpenFile(c.lockFile(), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	released := false
	release := func() {
		if !released {
			released = true
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// killPostmaster SIGKILLs the server as a crash would, by the pid in postmaster.pid, and returns it.
func killPostmaster(t *testing.T, c *Cluster) int {
	t.Helper()
	pid, _, err := readLock(filepath.Join(c.DataDir(), "postmaster.pid"))
	require.NoError(t, err)
	require.True(t, isPostgres(pid))
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	return pid
}

// TestSupervisorRestartsAKilledPostgres: a postmaster killed with SIGKILL is restarted on the same
// data dir and port; while it is down, Health and Outage say so; what was committed before the
// crash is there after it, and nothing of the dead server is left running.
func TestSupervisorRestartsAKilledPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newTestCluster(t)
	c.policy.firstDelay = 10 * time.Millisecond
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	port := c.Port()
	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	// A test cluster commits asynchronously; this commit must reach the WAL before the crash.
	_, err = conn.Exec(ctx, "SET synchronous_commit = on; CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	release := holdStartLock(t, c)
	pid := killPostmaster(t, c)
	require.Eventually(t, func() bool { return c.Health().Down }, 10*time.Second, 10*time.Millisecond)
	reason, down := c.Outage()
	require.True(t, down)
	require.Contains(t, reason, "down since ")
	require.Contains(t, reason, "restarting (attempt 1)")
	require.Eventually(t, func() bool { return len(clusterProcesses(c.pgData, pid)) == 0 }, 15*time.Second, 20*time.Millisecond,
		"the dead server's backends are ended, so that a new one can start")

	release()
	require.Eventually(t, func() bool { h := c.Health(); return !h.Down && h.Restarts == 1 }, 60*time.Second, 20*time.Millisecond)
	_, down = c.Outage()
	require.False(t, down)
	require.Equal(t, port, c.Port(), "a restart keeps the port when it is free")
	conn, err = pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v int
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, 42, v, "crash recovery keeps what was committed")
}

// TestRestartMovesWhenItsPortIsTaken: a program that took the port while postgres was down does
// not keep it from coming back: it comes back on another port, which Port reports.
func TestRestartMovesWhenItsPortIsTaken(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	c.policy.firstDelay = 10 * time.Millisecond
	require.NoError(t, c.Start(context.Background()))
	defer c.Stop()
	port := c.Port()
	release := holdStartLock(t, c)
	killPostmaster(t, c)
	var squatter net.Listener
	require.Eventually(t, func() bool {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		squatter = l
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the dead server's port is free")
	defer squatter.Close()

	release()
	require.Eventually(t, func() bool { h := c.Health(); return !h.Down && h.Restarts == 1 }, 60*time.Second, 20*time.Millisecond)
	require.NotEqual(t, port, c.Port())
	queryOne(t, c.URL())
}

// TestStopDuringRestartNeverRestarts: Stop while the supervisor waits to restart a dead server
// returns at once, and no server comes up afterwards.
func TestStopDuringRestartNeverRestarts(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	c.policy.firstDelay = 10 * time.Millisecond
	require.NoError(t, c.Start(context.Background()))
	defer c.Stop()
	release := holdStartLock(t, c)
	killPostmaster(t, c)
	require.Eventually(t, func() bool { return c.Health().Down }, 10*time.Second, 10*time.Millisecond)

	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("Stop waited for the restart")
	}
	release()
	_, running := c.runningPort()
	require.False(t, running, "a stopped cluster is never restarted")
}

// TestSupervisorGivesUp: a server that cannot start again (here, a broken configuration) is
// retried a bounded number of times; then Health says so and Failed delivers the error.
func TestSupervisorGivesUp(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	c.policy = restartPolicy{attempts: 2, firstDelay: 10 * time.Millisecond, maxDelay: 20 * time.Millisecond, stableAfter: time.Minute}
	require.NoError(t, c.Start(context.Background()))
	defer c.Stop()
	conf := filepath.Join(c.DataDir(), "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\nthis is not a setting\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	killPostmaster(t, c)

	select {
	case err := <-c.Failed():
		require.ErrorContains(t, err, "2 restarts failed")
	case <-time.After(60 * time.Second):
		t.Fatal("the supervisor did not give up")
	}
	h := c.Health()
	require.True(t, h.Down)
	require.True(t, h.GaveUp)
	require.Contains(t, h.String(), "gave up restarting after 2 attempts: pgcluster: postgres exited during start-up")
}

// TestSupervisorEndsABackendThatOutlivesItsPostmaster: a backend busy on the CPU does not notice
// its postmaster's death until its query ends, and keeps the server's shared memory, so that a new
// postmaster refuses to start beside it. PostgreSQL makes each backend a process group of its
// own, so ending the postmaster's group missed it, and each restart failed until the query ended.
// The supervisor ends it, and the server is back within seconds.
func TestSupervisorEndsABackendThatOutlivesItsPostmaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newTestCluster(t)
	c.policy.firstDelay = 10 * time.Millisecond
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var backend int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend))
	busy := make(chan error, 1)
	go func() {
		// Minutes of CPU, with no wait at which the backend would see its postmaster gone.
		_, err := conn.Exec(context.Background(), `SELECT count(*) FROM generate_series(1, 100000000000)`)
		busy <- err
	}()
	require.Eventually(t, func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
		return err == nil && strings.Contains(string(stat), ") R ")
	}, 10*time.Second, 10*time.Millisecond, "the backend runs its query")
	time.Sleep(200 * time.Millisecond)
	pid := killPostmaster(t, c)
	require.Eventually(t, func() bool { h := c.Health(); return !h.Down && h.Restarts == 1 }, 30*time.Second, 20*time.Millisecond,
		"the server is back")
	require.NotContains(t, clusterProcesses(c.pgData, pid), backend, "the busy backend is ended")
	select {
	case err := <-busy:
		require.Error(t, err, "the busy query's connection is gone")
	case <-time.After(10 * time.Second):
		t.Fatal("the busy query's connection was not ended")
	}
}
