package trace

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// TestAReadWaitsForTheStartsTheTimerIsWriting: once the delay passes, the timer takes the held
// starts and writes them. A read that comes during that write must wait for it, as it waits for
// the starts still held: held() counts the starts being written, and flush waits for the timer's
// write to end. Before, held() said nothing was held and the read went ahead without them (make
// stress saw a trace's span count change between two reads of the list).
func TestAReadWaitsForTheStartsTheTimerIsWriting(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var written atomic.Bool
	b := newStartBuffer(time.Millisecond, func(_ context.Context, _ string, _ []store.Span) error {
		<-release
		written.Store(true)
		return nil
	})
	require.True(t, b.hold(store.SpanSourceGenkit, []store.Span{{TraceID: "6c74a721b00e2befd7101e2794d8c4b0", SpanID: "00f067aa0ba902b7"}}))
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) == 0
	}, 5*time.Second, time.Millisecond, "the timer took the start")
	require.True(t, b.held(), "a start being written still counts")

	flushed := make(chan struct{})
	go func() {
		b.flush(context.Background())
		close(flushed)
	}()
	select {
	case <-flushed:
		t.Fatal("the read's flush returned while the timer was still writing the start")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-flushed
	require.True(t, written.Load())
	require.False(t, b.held(), "nothing is held once written")
}
