package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
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
