package trace_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// TestRetentionDeletesByAgeAndBySpanCapInBatches runs retention passes over 30 traces of 3 spans:
// by age, every trace older than the limit goes, several small batches making one pass; by span
// cap, the newest traces holding the cap stay. Both are counted in metrics.
func TestRetentionDeletesByAgeAndBySpanCapInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	now := time.Now()
	var spans []store.Span
	for i := range 30 {
		traceID := fmt.Sprintf("%032x", 0xc000+i)
		start := now.Add(-time.Duration(30-i) * time.Hour).UnixNano() // trace 0 is 30 hours old
		root := fmt.Sprintf("%016x", 0xc000+i*10)
		for j := range 3 {
			sp := store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", 0xc000+i*10+j), Name: "s",
				StartTime: start + int64(j), EndTime: start + 10, Source: store.SpanSourceOTLP}
			if j > 0 {
				sp.ParentSpanID = &root
			}
			spans = append(spans, sp)
		}
	}
	_, err := st.SpanIngest(ctx, spans)
	require.NoError(t, err)
	count := func() (traces, spans int) {
		t.Helper()
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM traces), (SELECT count(*) FROM spans)`).Scan(&traces, &spans))
		return traces, spans
	}

	metrics := trace.NewMetrics()
	byAge := trace.NewRetention(st, trace.RetentionConfig{MaxAge: 20*time.Hour + 30*time.Minute, BatchTraces: 3, Pause: time.Millisecond}, metrics, nil)
	tr, sp, err := byAge.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10, tr, "the traces 21 to 30 hours old")
	require.EqualValues(t, 30, sp)
	tr2, sp2 := count()
	require.Equal(t, 20, tr2)
	require.Equal(t, 60, sp2)

	byCap := trace.NewRetention(st, trace.RetentionConfig{MaxSpans: 25, BatchTraces: 4, Pause: time.Millisecond}, metrics, nil)
	tr, sp, err = byCap.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 12, tr, "8 traces (24 spans) fit under 25; the 9th would not")
	require.EqualValues(t, 36, sp)
	tr2, sp2 = count()
	require.Equal(t, 8, tr2)
	require.Equal(t, 24, sp2)
	var oldest int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT min(start_time_unix_nano) FROM traces`).Scan(&oldest))
	require.Greater(t, oldest, now.Add(-9*time.Hour).UnixNano(), "the newest traces stay")

	tr, _, err = byCap.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, tr, "a second pass finds nothing more")
	body := gather(t, metrics)
	require.Contains(t, body, `loupe_trace_retention_deleted_total{kind="traces"} 22`)
	require.Contains(t, body, `loupe_trace_retention_deleted_total{kind="spans"} 66`)
}
