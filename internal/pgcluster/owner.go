package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A cluster started by Start is owned: the postmaster is a child of one devui, which holds the
// owner lock (an flock on postgres.owner, whose content is its pid) from before it starts postgres
// until after postgres has stopped. The lock is what the other processes on the data dir go by:
//
//   - held, and a postmaster runs: another devui owns it and supervises it; attach and watch for
//     that devui's end, then take over.
//   - held, and none runs: the owner is restarting it; wait.
//   - free, with a pid in the file, and a postmaster runs: its owner died (kill -9, OOM) and the
//     postmaster, which got SIGINT from the kernel, is shutting down or left over; wait for it to
//     exit (end it if it does not), then start afresh.
//   - free, with an empty file: nobody's child, a daemon of StartDetached (devui db start); use it.
//
// Being released by the kernel when its holder dies, however it dies, the lock never needs
// clearing by hand.

// ownership is this process's hold on the owner lock.
type ownership struct{ f *os.File }

// ownerFile is the file whose flock says which process owns the cluster's postmaster.
func (c *Cluster) ownerFile() string { return filepath.Join(c.cfg.DataDir, "postgres.owner") }

// tryOwn takes the owner lock if it is free. It returns nil, nil when another process holds it.
func (c *Cluster) tryOwn() (*ownership, error) {
	f, err := os.OpenFile(c.ownerFile(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: open owner lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		closeErr := f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, closeErr
		}
		return nil, errors.Join(fmt.Errorf("pgcluster: owner lock %s: %w", f.Name(), err), closeErr)
	}
	return &ownership{f: f}, nil
}

// ownerAlive reports whether another process holds the owner lock.
func (c *Cluster) ownerAlive() bool {
	o, err := c.tryOwn()
	if err != nil {
		return true // cannot tell: leave the cluster to whoever runs it
	}
	if o == nil {
		return true
	}
	o.release(false)
	return false
}

// previousOwner is the pid the owner file names: the last owner, who left it there by dying.
func (o *ownership) previousOwner() int {
	data := make([]byte, 32)
	n, _ := o.f.ReadAt(data, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data[:n])))
	return pid
}

// record writes this process's pid into the owner file, for the next owner to find if this
// process dies with its postmaster still running.
func (o *ownership) record() error {
	if err := o.f.Truncate(0); err != nil {
		return fmt.Errorf("pgcluster: write owner: %w", err)
	}
	if _, err := o.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return fmt.Errorf("pgcluster: write owner: %w", err)
	}
	return nil
}

// release gives the owner lock up. clear empties the owner file first: the postmaster is gone (or
// is a daemon), so the next owner has nothing of ours to end. It is safe on a nil ownership.
func (o *ownership) release(clear bool) {
	if o == nil {
		return
	}
	if clear {
		_ = o.f.Truncate(0)
	}
	_ = syscall.Flock(int(o.f.Fd()), syscall.LOCK_UN)
	_ = o.f.Close()
}

// postmasterStatus is line 8 of postmaster.pid (PostgreSQL 10 and later): starting, stopping,
// ready or standby; empty when the server has not written it yet.
func (c *Cluster) postmasterStatus() string {
	data, err := os.ReadFile(filepath.Join(c.pgData, "postmaster.pid"))
	if err != nil {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 8 {
		return ""
	}
	return strings.TrimSpace(lines[7])
}

// postmasterPID is the pid of the postgres running on this cluster, or 0.
func (c *Cluster) postmasterPID() int {
	pid, _, err := readLock(filepath.Join(c.pgData, "postmaster.pid"))
	if err != nil || !isPostgres(pid) {
		return 0
	}
	return pid
}

// endLeftover ends a postmaster that no live devui owns any more. Its owner's death set off a fast
// shutdown (the child's Pdeathsig), which is waited for, asked for again in case the signal was
// lost; a server that does not finish it within 30 seconds is ended as a crashed one is
// (endCluster). It returns once nothing of it runs.
func (c *Cluster) endLeftover(ctx context.Context, pid int) error {
	gone := func() bool { return !isPostgres(pid) && len(clusterProcesses(c.pgData, pid)) == 0 }
	_ = syscall.Kill(pid, syscall.SIGINT)
	for deadline := time.Now().Add(30 * time.Second); !gone() && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !gone() {
		endCluster(ctx, c.pgData, pid)
	}
	if !gone() {
		return fmt.Errorf("pgcluster: the PostgreSQL (pid %d) left by a devui that died does not exit", pid)
	}
	return nil
}
