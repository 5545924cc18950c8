package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// restartPolicy bounds the supervisor's restarts. The delays double from firstDelay up to maxDelay.
type restartPolicy struct {
	attempts   int
	firstDelay time.Duration
	maxDelay   time.Duration
	// stableAfter is how long a restarted server must stay up for its next crash to count as a new
	// outage; a server that dies sooner is in a crash loop, whose attempts add up.
	stableAfter time.Duration
}

// defaultRestartPolicy spans about three minutes of attempts before the supervisor gives up. The
// moment before the first attempt keeps a postgres that stopped because the whole machine is
// shutting down from being restarted under devui's own stop.
var defaultRestartPolicy = restartPolicy{attempts: 10, firstDelay: 500 * time.Millisecond, maxDelay: 30 * time.Second, stableAfter: time.Minute}

// delay is the wait before an attempt.
func (p restartPolicy) delay(attempt int) time.Duration {
	d := p.firstDelay
	for i := 1; i < attempt && d < p.maxDelay; i++ {
		d *= 2
	}
	return min(d, p.maxDelay)
}

// errStopped is returned by a restart that Stop overtook.
var errStopped = errors.New("pgcluster: stopped")

// Health is what the supervisor knows of a cluster started by Start. Its zero value is a cluster
// that is up, or not supervised.
type Health struct {
	// Down is set from the moment postgres died until a restarted one accepts connections.
	Down bool
	// DownSince is when postgres was seen dead.
	DownSince time.Time
	// Attempt is the restart attempt under way, from 1.
	Attempt int
	// LastErr is why the previous attempt failed, if one did.
	LastErr error
	// GaveUp is set when the attempts ran out: the cluster stays down (Failed has the error).
	GaveUp bool
	// Restarts counts the restarts that succeeded since Start.
	Restarts int
}

// String describes an outage for people: "down since 2025-01-02T15:04:05Z (3s), restarting
// (attempt 2; the last failed: …)".
func (h Health) String() string {
	if !h.Down {
		return "up"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "down since %s (%s)", h.DownSince.UTC().Format(time.RFC3339), time.Since(h.DownSince).Round(time.Second))
	if h.GaveUp {
		fmt.Fprintf(&b, ", gave up restarting after %d attempts", h.Attempt)
	} else {
		fmt.Fprintf(&b, ", restarting (attempt %d)", h.Attempt)
	}
	if h.LastErr != nil {
		first, _, _ := strings.Cut(h.LastErr.Error(), "\n")
		fmt.Fprintf(&b, ": %s", first)
	}
	return b.String()
}

// Health reports the supervisor's view of the cluster.
func (c *Cluster) Health() Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health
}

// Outage describes the cluster while it is down after a crash ("down since …, restarting (attempt
// 2)"), and reports false while it is up.
func (c *Cluster) Outage() (string, bool) {
	h := c.Health()
	if !h.Down {
		return "", false
	}
	return h.String(), true
}

// Failed delivers the error that made the supervisor give up: postgres died and could not be
// restarted. Nothing is sent while the cluster is up or being restarted.
func (c *Cluster) Failed() <-chan error { return c.failed }

func (c *Cluster) setHealth(h Health) {
	c.mu.Lock()
	c.health = h
	c.mu.Unlock()
}

// startSupervisor watches the child that Start started until ctx ends or Stop is called.
func (c *Cluster) startSupervisor(ctx context.Context, exited <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		cancel()
		return
	}
	c.cancelSupervisor, c.supervised = cancel, done
	c.mu.Unlock()
	go func() {
		defer close(done)
		c.supervise(ctx, exited)
	}()
}

// supervise restarts postgres whenever it exits without being asked to, on the same data dir (its
// crash recovery replays the WAL) and the same port when it is free. Attempts back off; when they
// run out it gives up and reports on Failed. With exited nil, this process uses another devui's
// postmaster: it waits for that devui to be gone, then takes the cluster over the same way.
func (c *Cluster) supervise(ctx context.Context, exited <-chan struct{}) {
	var (
		attempt  int
		restarts int
		upAt     = time.Now()
	)
	for {
		if exited == nil {
			if !c.waitOwnerGone(ctx) {
				return
			}
			c.cfg.Logger.Warn("the devui that ran the embedded PostgreSQL is gone; taking it over", "data_dir", c.pgData)
		} else {
			select {
			case <-ctx.Done():
				return
			case <-exited:
			}
		}
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		cmd, stopped := c.cmd, c.stopped
		c.mu.Unlock()
		if stopped {
			return
		}
		downSince := time.Now()
		if downSince.Sub(upAt) >= c.policy.stableAfter {
			attempt = 0
		}
		// At once, before the dead server's connections are ended: whoever asks (the server's
		// 503s, the log's outage lines) learns it from here rather than from their errors.
		c.setHealth(Health{Down: true, DownSince: downSince, Attempt: attempt + 1, Restarts: restarts})
		if exited != nil {
			c.cfg.Logger.Error("embedded PostgreSQL exited unexpectedly; restarting it",
				"exit", cmd.ProcessState.String(), "pid", cmd.Process.Pid, "log", c.logFile, "log_tail", lastLines(c.logTail(), 5))
			// What is left of it (backends, checkpointer) keeps its shared memory, and a new
			// postmaster refuses to start beside it.
			endCluster(ctx, c.pgData, cmd.Process.Pid)
		}
		var (
			lastErr error
			att     attachment
		)
		for {
			attempt++
			c.setHealth(Health{Down: true, DownSince: downSince, Attempt: attempt, LastErr: lastErr, Restarts: restarts})
			if attempt > c.policy.attempts {
				c.giveUp(downSince, attempt-1, lastErr, restarts)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.policy.delay(attempt)):
			}
			var err error
			exited, att, err = c.restart(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil || errors.Is(err, errStopped) {
				return
			}
			lastErr = err
			c.cfg.Logger.Warn("restarting embedded PostgreSQL failed", "attempt", attempt, "of", c.policy.attempts,
				"retry_in", c.policy.delay(attempt+1), "err", err)
		}
		restarts++
		upAt = time.Now()
		c.setHealth(Health{Restarts: restarts})
		switch att {
		case started:
			c.cfg.Logger.Warn("embedded PostgreSQL restarted", "attempt", attempt, "down_for", time.Since(downSince).Round(time.Millisecond), "port", c.Port())
		case watching:
			c.cfg.Logger.Info("another devui restarted the embedded PostgreSQL first; using it, and taking it over should that devui end")
		case detached:
			c.cfg.Logger.Info("the embedded PostgreSQL was restarted with devui db start; using it without supervising it")
			return
		}
	}
}

// waitOwnerGone waits until no process holds the owner lock: the devui whose postmaster this
// process uses has ended. Meanwhile Port follows that postmaster, which its owner may restart on
// another port. It reports false when ctx ended first.
func (c *Cluster) waitOwnerGone(ctx context.Context) bool {
	for c.ownerAlive() {
		if port, ok := c.runningPort(); ok {
			c.port.Store(int32(port))
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
	return true
}

func (c *Cluster) giveUp(downSince time.Time, attempts int, lastErr error, restarts int) {
	c.setHealth(Health{Down: true, DownSince: downSince, Attempt: attempts, LastErr: lastErr, GaveUp: true, Restarts: restarts})
	err := fmt.Errorf("pgcluster: the embedded PostgreSQL died and %d restarts failed (its log: %s): %w", attempts, c.logFile, lastErr)
	c.cfg.Logger.Error("gave up restarting the embedded PostgreSQL", "attempts", attempts, "err", lastErr)
	select {
	case c.failed <- err:
	default:
	}
}

// restart starts postgres again and returns the channel closed when it exits, or attaches to one
// that another process started meanwhile, as att says; then there is no channel, since that server
// is not this process's child.
func (c *Cluster) restart(ctx context.Context) (exited <-chan struct{}, att attachment, err error) {
	unlock, own, att, err := c.lockAndAttach(ctx)
	if err != nil || att != started {
		return nil, att, err
	}
	defer unlock()
	if err := c.adopt(own); err != nil {
		return nil, att, err
	}
	if err := c.pickPort(c.Port()); err != nil {
		return nil, att, err
	}
	if exited, err = c.spawn(ctx); err != nil {
		return nil, att, err
	}
	return exited, att, nil
}

// endCluster ends what is left of a dead postmaster's server (pid postmaster, data directory
// pgData): its children, found by clusterProcesses. A child that outlives its postmaster keeps the
// server's shared memory, and a new postmaster refuses to start beside it ("pre-existing shared
// memory block is still in use"). Most notice the death at their next wait and exit, telling
// their clients why (SQLSTATE 57P01), which is what lets the clients' logs tell an outage from a
// failure; they are given orphanGrace for it. What is left then (a query busy on the CPU runs on
// to its end) is ended, immediate shutdown first, then SIGKILL, at most ten seconds more, or until
// ctx ends.
func endCluster(ctx context.Context, pgData string, postmaster int) {
	// Only what runs now: a server started on the directory meanwhile (by another devui) is not
	// the dead one's.
	left := clusterProcesses(pgData, postmaster)
	alive := func() []int {
		now := clusterProcesses(pgData, postmaster)
		return slices.DeleteFunc(now, func(pid int) bool { return !slices.Contains(left, pid) })
	}
	wait := func(d time.Duration) bool {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			if len(alive()) == 0 {
				return true
			}
			select {
			case <-ctx.Done():
				return true
			case <-time.After(20 * time.Millisecond):
			}
		}
		return false
	}
	if wait(orphanGrace) {
		return
	}
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL} {
		for _, pid := range alive() {
			_ = syscall.Kill(pid, sig)
		}
		if wait(5 * time.Second) {
			return
		}
	}
}

// orphanGrace is how long a dead postmaster's children are given to exit on their own.
const orphanGrace = 2 * time.Second

// clusterProcesses lists the live processes of the server whose data directory is pgData: each
// process named postgres that runs in that directory (the postmaster makes it its working
// directory, and its children inherit it; a pid reused by another program is not one of them),
// zombies left out (nobody may reap them, devui being a container's pid 1, and they hold nothing). Neither the postmaster's parentage
// nor its process group finds its children: PostgreSQL makes each one a session and process group
// of its own (setsid), and once the postmaster is dead they are orphans. Without /proc (macOS) it
// is postmaster alone, if signal 0 reaches it.
func clusterProcesses(pgData string, postmaster int) []int {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		if postmaster > 0 && syscall.Kill(postmaster, 0) == nil {
			return []int{postmaster}
		}
		return nil
	}
	dir, err := filepath.Abs(pgData)
	if err != nil {
		dir = pgData
	}
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	var pids []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state …; comm may hold spaces and parentheses.
		open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(string(data[closing+1:]))
		if len(fields) < 1 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data[:open])))
		if err != nil {
			continue
		}
		if string(data[open+1:closing]) != "postgres" {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join(filepath.Dir(path), "cwd")); err != nil || cwd != dir {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
