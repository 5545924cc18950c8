package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lockedBuffer is the supervisor's output, written by its goroutine and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStartBacksOffAProgramThatExitsZeroAtOnce: a program that ends by itself at once, status 0,
// is not started again a second later in a loop: the supervisor says that it exited on its own
// and that a program under devui start must keep running, and waits five seconds first.
func TestStartBacksOffAProgramThatExitsZeroAtOnce(t *testing.T) {
	t.Parallel()
	starts := filepath.Join(t.TempDir(), "starts")
	out := &lockedBuffer{}
	sup := &supervisor{argv: []string{"sh", "-c", "echo x >> " + starts}, env: os.Environ(), out: out, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sup.run(ctx) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "exited on its own") }, 10*time.Second, 10*time.Millisecond)
	// Before the fix it ran again after one second, then two.
	time.Sleep(3 * time.Second)
	cancel()
	<-done
	b, err := os.ReadFile(starts)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(b), "x"), "started once in three seconds:\n%s", out.String())
	require.Contains(t, out.String(), "a program under devui start must keep running")
	require.Contains(t, out.String(), "Running it again in 5s")
}

// TestStartKillsAProgramThatIgnoresSIGTERMAtTheDeadline: on Ctrl-C devui start stops the program
// before the server and the database, so a program that ignores SIGTERM must not hold them up
// for good. Its whole process group (here a shell and the sleep it runs, both ignoring the signal)
// is killed once stopWithin has passed, and the supervisor returns then, saying so.
func TestStartKillsAProgramThatIgnoresSIGTERMAtTheDeadline(t *testing.T) {
	t.Parallel()
	const within = 500 * time.Millisecond
	pidFile := filepath.Join(t.TempDir(), "pid")
	out, log := &lockedBuffer{}, &lockedBuffer{}
	sup := &supervisor{argv: []string{"sh", "-c", `trap "" TERM; echo $$ > ` + pidFile + `; while :; do sleep 1; done`},
		env: os.Environ(), out: out, log: slog.New(slog.NewTextHandler(log, nil)), stopWithin: within}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); sup.run(ctx) }()
	var pgid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pgid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the program runs")

	asked := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(within + 10*time.Second):
		t.Fatalf("the supervisor still waits for the program %s after Ctrl-C", time.Since(asked))
	}
	took := time.Since(asked)
	require.GreaterOrEqual(t, took, within, "the program had its time to stop")
	require.Eventually(t, func() bool { return len(groupRunning(pgid)) == 0 }, 5*time.Second, 10*time.Millisecond,
		"nothing of the program's process group is left running: %v", groupRunning(pgid))
	require.Contains(t, log.String(), `level=WARN msg="the command did not stop on SIGTERM; killing it"`)
	t.Logf("stopped %s after Ctrl-C", took.Round(time.Millisecond))
}

// groupRunning lists the processes of process group pgid that still run, from /proc: a killed
// process whose parent has not reaped it yet (a zombie, as the shell's orphaned sleep is until
// init reaps it) does not count.
func groupRunning(pgid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var running []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		running = append(running, pid)
	}
	return running
}
