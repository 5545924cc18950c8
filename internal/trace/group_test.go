package trace_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// TestIngestGroupCommitIsLosslessAndIsolatesBadRequests proves that concurrent ingest calls,
// which share transactions, store every span once, merge each start with its end whatever
// group either lands in, keep the summary exact, and that a request the database refuses fails
// alone and writes nothing.
func TestIngestGroupCommitIsLosslessAndIsolatesBadRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	// Starts written at once, as ends are, so that starts and ends race through the groups.
	svc, err := trace.NewService(trace.Config{Store: st, IngestWriters: 2, StartDelay: -1})
	require.NoError(t, err)

	const spans, callers = 300, 8
	traceID, rootID := "4c74a721b00e2befd7101e2794d8c4b0", "00f067aa0ba902b7"
	starts, ends := make([][]byte, spans), make([][]byte, spans)
	for i := range starts {
		starts[i], ends[i] = genkitSpanBodies(traceID, rootID)
	}
	// Ingest validates and sanitises what it can, so a body only the database refuses is made
	// here: this test's own database refuses spans named "poison", whichever way they are written.
	_, err = st.Pool().Exec(ctx, `CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned span'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON spans FOR EACH ROW EXECUTE FUNCTION refuse_poison()`)
	require.NoError(t, err)
	bad, _ := genkitSpanBodies(traceID, rootID)
	bad = bytes.Replace(bad, []byte(`"displayName":"tool"`), []byte(`"displayName":"poison"`), 1)
	require.NotEqual(t, -1, bytes.Index(bad, []byte(`poison`)))

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   []error
		next   = make(chan int, spans)
		badErr error
	)
	for i := range spans {
		next <- i
	}
	close(next)
	for c := range callers {
		wg.Go(func() {
			if c == 0 {
				_, badErr = svc.IngestGenkit(ctx, bad)
			}
			for i := range next {
				for _, body := range [][]byte{starts[i], ends[i]} {
					if _, err := svc.IngestGenkit(ctx, body); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	require.ErrorContains(t, badErr, "poisoned span", "the database refuses the bad body")

	var stored, running int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE end_time_unix_nano = 0)
		FROM spans WHERE trace_id = $1`, traceID).Scan(&stored, &running))
	require.Equal(t, spans, stored, "every span stored once; the bad body wrote nothing")
	require.Zero(t, running, "every start merged with its end")
	tr, err := st.TraceGet(ctx, traceID)
	require.NoError(t, err)
	require.Equal(t, spans, tr.SpanCount)
	require.NotZero(t, tr.EndTime)
}
