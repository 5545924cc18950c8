package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// lockedBuffer is a log sink that the service's goroutines write to at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestACancelledStreamSaysOnceThatItsChunksAreNoLongerFlushed cancels a run whose streaming flow
// pays no heed to its context and goes on sending chunks for a second and a half (as an app's
// action does until its cancel reaches it): the chunk flusher, every 100 ms, finds the run no
// longer held until the worker's lease renewal stops it. The log says so in one line, not a
// warning a flush.
func TestACancelledStreamSaysOnceThatItsChunksAreNoLongerFlushed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 0)
	reg := engine.NewRegistry()
	started := make(chan struct{})
	var once sync.Once
	engine.DefineStreamingFlow(reg, "deafStream", func(ctx context.Context, _ struct{}, send func(context.Context, string) error) (string, error) {
		deadline := time.Time{}
		for i := 0; ; i++ {
			_ = send(context.WithoutCancel(ctx), "tick")
			if i == 3 {
				once.Do(func() { close(started) })
			}
			if ctx.Err() != nil && deadline.IsZero() {
				deadline = time.Now().Add(1500 * time.Millisecond)
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				return "late", nil
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	logs := &lockedBuffer{}
	svc, err := runs.New(runs.Config{Workers: 1, LeaseTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, b.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(svc.Stop)
	run, err := svc.StartRun(ctx, runs.StartParams{Action: "/flow/deafStream", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	<-started
	time.Sleep(250 * time.Millisecond) // a few flushes while it is held
	// Cancelled from another process (a serve's, here a second service on the database): the
	// worker learns of it at its next lease renewal, and flushes meanwhile.
	_, err = b.svc.Cancel(ctx, run.ID, "rita")
	require.NoError(t, err)
	got := b.wait(t, run.ID, store.RunCancelled)
	require.Equal(t, store.RunCancelled, got.Status)
	time.Sleep(2 * time.Second) // the flow's late chunks, and the flushes that find the run gone

	out := logs.String()
	require.Equal(t, 0, strings.Count(out, `msg="flush chunks"`), "no warning a flush:\n%s", out)
	require.LessOrEqual(t, strings.Count(out, "stop flushing chunks"), 1, out)
	var chunks int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM run_chunks WHERE run_id = $1`, run.ID).Scan(&chunks))
	require.Positive(t, chunks, "the chunks sent while the run was held were flushed")
}
