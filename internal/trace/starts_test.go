package trace_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// TestSpanStartsAreHeldThenWrittenOnceOrSupersededByTheirEnd covers the start buffer: a start
// notice is answered at once and published live; a read sees it; a span whose end follows within
// the delay is inserted once, by its end; a start left alone is written when the delay passes;
// Close writes what is still held.
func TestSpanStartsAreHeldThenWrittenOnceOrSupersededByTheirEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	pub := &recordingPublisher{}
	// The delay is an hour where a start must still be held when its end or a read comes (a short
	// one could pass between two calls on a loaded machine), and short where it must pass.
	svc, err := trace.NewService(trace.Config{Store: st, Publisher: pub, StartDelay: time.Hour})
	require.NoError(t, err)
	quick, err := trace.NewService(trace.Config{Store: st, StartDelay: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(quick.Close)
	const traceID, rootID = "6c74a721b00e2befd7101e2794d8c4b0", "00f067aa0ba902b7"
	stored := func(spanID string) (bool, int64) {
		var end int64
		err := st.Pool().QueryRow(ctx, `SELECT end_time_unix_nano FROM spans WHERE trace_id = $1 AND span_id = $2`, traceID, spanID).Scan(&end)
		if err != nil {
			return false, 0
		}
		return true, end
	}
	spanID := func(body []byte) string {
		spans, err := trace.DecodeGenkit(body)
		require.NoError(t, err)
		return spans[0].SpanID
	}

	// A start, then its end within the delay: the start is answered without a write, and the end
	// inserts the span (it would be an update had the start been written).
	start, end := genkitSpanBodies(traceID, rootID)
	res, err := svc.IngestGenkit(ctx, start)
	require.NoError(t, err)
	require.Zero(t, res.Inserted+res.Updated, "a start is held, not written")
	require.Equal(t, 1, pub.count(event.SpanStarted), "a held start still shows live at once")
	ok, _ := stored(spanID(start))
	require.False(t, ok)
	res, err = svc.IngestGenkit(ctx, end)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Inserted)
	require.Zero(t, res.Updated, "the span was written once, by its end")
	require.Contains(t, gather(t, svc.Metrics()), `loupe_trace_ingest_spans_total{result="merged",source="genkit"} 1`)

	// A start with no end: a read writes it first, so the read shows it running.
	start2, end2 := genkitSpanBodies(traceID, rootID)
	_, err = svc.IngestGenkit(ctx, start2)
	require.NoError(t, err)
	tree, err := svc.Tree(ctx, traceID)
	require.NoError(t, err)
	require.Equal(t, 2, tree.SpanCount)
	ok, endTime := stored(spanID(start2))
	require.True(t, ok)
	require.Zero(t, endTime, "running")
	res, err = svc.IngestGenkit(ctx, end2)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Updated, "the end completes the written start")

	// A start with no end and no read: written when the delay passes.
	start3, _ := genkitSpanBodies(traceID, rootID)
	_, err = quick.IngestGenkit(ctx, start3)
	require.NoError(t, err)
	require.Eventually(t, func() bool { ok, _ := stored(spanID(start3)); return ok }, 5*time.Second, 20*time.Millisecond)

	// Close writes what is still held.
	start4, _ := genkitSpanBodies(traceID, rootID)
	_, err = svc.IngestGenkit(ctx, start4)
	require.NoError(t, err)
	svc.Close()
	ok, _ = stored(spanID(start4))
	require.True(t, ok)

	tr, err := st.TraceGet(ctx, traceID)
	require.NoError(t, err)
	require.Equal(t, 4, tr.SpanCount, "each span counted once")
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM spans WHERE trace_id = $1`, traceID).Scan(&n))
	require.Equal(t, 4, n)
}

// TestAHeldStartOutlivesAFailedEnd: when a span's end cannot be written, the start it superseded
// is held again and written, so the span is not lost.
func TestAHeldStartOutlivesAFailedEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.New(t)
	svc, err := trace.NewService(trace.Config{Store: st, StartDelay: time.Hour})
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned span'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON spans FOR EACH ROW EXECUTE FUNCTION refuse_poison()`)
	require.NoError(t, err)
	const traceID, rootID = "8c74a721b00e2befd7101e2794d8c4b0", "00f067aa0ba902b7"
	start, end := genkitSpanBodies(traceID, rootID)
	_, err = svc.IngestGenkit(ctx, start)
	require.NoError(t, err)
	_, err = svc.IngestGenkit(ctx, bytes.Replace(end, []byte(`"displayName":"tool"`), []byte(`"displayName":"poison"`), 1))
	require.ErrorContains(t, err, "poisoned span")
	svc.Close()
	var n int
	var ended int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*), coalesce(max(end_time_unix_nano), 0) FROM spans WHERE trace_id = $1`, traceID).Scan(&n, &ended))
	require.Equal(t, 1, n, "the start was written after all")
	require.Zero(t, ended, "as running")
}
