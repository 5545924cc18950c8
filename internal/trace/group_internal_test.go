package trace

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// flightLog is a group committer's write function that records which traces are being written
// at once, and holds each write until release is closed.
type flightLog struct {
	mu       sync.Mutex
	flying   map[string]int // trace -> writes in flight
	overlaps []string       // traces written by two groups at once
	most     int            // most writes in flight at once
	now      int
	started  chan struct{}
	release  chan struct{}
}

func newFlightLog() *flightLog {
	return &flightLog{flying: map[string]int{}, started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (f *flightLog) write(_ context.Context, _ string, spans []store.Span) (store.SpanIngestResult, error) {
	traces := map[string]bool{}
	for _, sp := range spans {
		traces[sp.TraceID] = true
	}
	f.mu.Lock()
	f.now++
	f.most = max(f.most, f.now)
	for t := range traces {
		if f.flying[t]++; f.flying[t] > 1 {
			f.overlaps = append(f.overlaps, t)
		}
	}
	f.mu.Unlock()
	f.started <- struct{}{}
	<-f.release
	f.mu.Lock()
	f.now--
	for t := range traces {
		f.flying[t]--
	}
	f.mu.Unlock()
	return store.SpanIngestResult{Inserted: int64(len(spans))}, nil
}

func spansOf(traceID string, n int) []store.Span {
	out := make([]store.Span, n)
	for i := range out {
		out[i] = store.Span{TraceID: traceID, SpanID: "00f067aa0ba902b7", StartTime: 1, EndTime: 2}
	}
	return out
}

// TestGroupWritersNeverShareATrace: with two writers, groups of distinct traces are written side
// by side, and a group that shares a trace with one in flight waits for it.
func TestGroupWritersNeverShareATrace(t *testing.T) {
	t.Parallel()
	f := newFlightLog()
	g := &groupCommitter{writeFunc: f.write, maxWriters: 2}
	var wg sync.WaitGroup
	ingest := func(traceID string) {
		wg.Go(func() {
			_, err := g.ingest("otlp", spansOf(traceID, 3))
			require.NoError(t, err)
		})
	}
	wait := func(what string) {
		select {
		case <-f.started:
		case <-time.After(10 * time.Second):
			t.Fatalf("no write started: %s", what)
		}
	}

	// Two distinct traces: both writes in flight at once.
	ingest("4c74a721b00e2befd7101e2794d8c4b0")
	wait("the first group")
	ingest("5b8efff798038103d269b633813fc60c")
	wait("a second group of another trace, while the first is in flight")

	// Two more calls, one into each trace in flight: neither may start while both are held.
	ingest("4c74a721b00e2befd7101e2794d8c4b0")
	ingest("5b8efff798038103d269b633813fc60c")
	select {
	case <-f.started:
		t.Fatal("a group started while a group of its trace was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(f.release)
	wg.Wait()
	require.Empty(t, f.overlaps)
	require.Equal(t, 2, f.most)
	require.NotEmpty(t, f.started, "the two waiting calls were written once their traces were free (in one group or two)")
	require.Empty(t, g.queue)
	require.Zero(t, g.writers)
	require.Empty(t, g.flying)
}
