package store_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestTheFastPathFoldsUsageAsTraceUsageFoldDoes: a batch of new spans writes its traces'
// summaries, usage and services included, in one upsert computed in Go; batch after batch, the
// rows it leaves are those that the merge statement leaves, which folds them in SQL (COPY staging,
// and the arrays of small groups): the model first named,
// the sums, the first service, the first session and the first thread.
func TestTheFastPathFoldsUsageAsTraceUsageFoldDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	s := store.New(pool)
	// Each batch: 20 new ended spans of trace a and of trace b; what the services say of a.
	batches := []store.TraceService{
		{Service: "svc", Thread: "t1"},
		{Service: "svc2", Session: "s1", Thread: "t2"},
		{Session: "s2", Thread: "t3"},
		{Service: "svc3", Session: "s1", Thread: "t4"},
	}
	ingest := func(prefix string, fold func(context.Context, []store.Span, store.UsageFunc) (store.SpanIngestResult, error)) {
		a, b := prefix+"000000000000000000000000000000a", prefix+"000000000000000000000000000000b"
		for i, sv := range batches {
			var spans []store.Span
			for _, trace := range []string{a, b} {
				for j := range 20 {
					n := i*20 + j + 1
					sp := store.Span{TraceID: trace, SpanID: fmt.Sprintf("%016x", n), Name: "s", StartTime: int64(1000 - n), EndTime: 2000}
					if n != 1 {
						sp.ParentSpanID = ptr(fmt.Sprintf("%016x", 1))
					}
					spans = append(spans, sp)
				}
			}
			usage := func(ended []store.SpanKey) ([]store.SpanUsage, []store.TraceService) {
				var shares []store.SpanUsage
				for _, k := range ended {
					if k.TraceID != a {
						continue
					}
					n, err := strconv.ParseInt(k.SpanID, 16, 64)
					require.NoError(t, err)
					u := store.SpanUsage{TraceID: k.TraceID, SpanID: k.SpanID, StartTime: 1000 - n}
					switch n % 3 {
					case 0:
						u.Kind, u.Model, u.InputTokens, u.OutputTokens = "model", fmt.Sprintf("m%d", n%2), n, 2*n
						if n%4 == 0 {
							u.Model = "" // a call that names no model
						}
					case 1:
						u.Kind, u.Failed = "tool", n%2 == 0
					default:
						continue
					}
					shares = append(shares, u)
				}
				sv := sv
				sv.TraceID = a
				return shares, []store.TraceService{sv, {TraceID: b, Service: "other"}}
			}
			_, err := fold(ctx, spans, usage)
			require.NoError(t, err)
		}
	}
	ingest("1", s.SpanIngestFold)     // new spans on the fast path: one upsert a batch
	ingest("2", s.SpanIngestCopyFold) // COPY staging, then the merge, which folds in SQL
	ingest("3", func(ctx context.Context, spans []store.Span, usage store.UsageFunc) (store.SpanIngestResult, error) {
		for len(spans) > 0 { // small groups take the arrays merge, which folds in SQL too
			n := min(len(spans), 10)
			if _, err := s.SpanIngestFold(ctx, spans[:n], usage); err != nil {
				return store.SpanIngestResult{}, err
			}
			spans = spans[n:]
		}
		return store.SpanIngestResult{}, nil
	})
	rows := func(prefix string) []string {
		var out []string
		for _, suffix := range []string{"a", "b"} {
			var row string
			require.NoError(t, pool.QueryRow(ctx, `SELECT concat_ws('|', display_name, root_span_id, start_time_unix_nano,
				end_time_unix_nano, status_code, span_count, source, service, model, model_calls, input_tokens,
				output_tokens, tool_calls, tool_errors, session, thread, last_end_time_unix_nano, error_spans)
				FROM traces WHERE trace_id = $1`, prefix+"000000000000000000000000000000"+suffix).Scan(&row))
			out = append(out, row)
		}
		return out
	}
	fast := rows("1")
	require.Equal(t, rows("2"), fast)
	// In groups of ten, the model is the earliest call's of the first group that names one.
	withoutModel := func(rows []string) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			f := strings.Split(r, "|")
			f[8] = ""
			out[i] = strings.Join(f, "|")
		}
		return out
	}
	require.Equal(t, withoutModel(rows("3")), withoutModel(fast))
	require.Contains(t, fast[0], "|svc|", "the first service named")
	require.Contains(t, fast[0], "|s1|t1|", "the first session named, and the first thread")
}

// TestIngestOfNewSpansNeverScansTraces ingests batch after batch of new spans with their usage and
// services on one connection, and checks from PostgreSQL's counters that traces was never read
// sequentially. TraceUsageFold's UPDATE ... FROM unnest, prepared while traces was small, kept a
// hash join over a sequential scan of traces: in a fresh store, ingest slowed with every trace
// stored until autovacuum analyzed the table.
func TestIngestOfNewSpansNeverScansTraces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	scans := func() int64 { return tableReads(t, pool, "COALESCE(seq_scan, 0)", "traces")["traces"] }
	before := scans()
	for i := range 30 {
		traceID := fmt.Sprintf("%032x", 0xf000+i)
		spans := make([]store.Span, 20)
		for j := range spans {
			spans[j] = store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", j+1), Name: "s", StartTime: 1, EndTime: 2}
			if j > 0 {
				spans[j].ParentSpanID = ptr(fmt.Sprintf("%016x", 1))
			}
		}
		_, err := s.SpanIngestFold(ctx, spans, func(ended []store.SpanKey) ([]store.SpanUsage, []store.TraceService) {
			return []store.SpanUsage{{TraceID: traceID, SpanID: ended[1].SpanID, Kind: "model", Model: "m", InputTokens: 3}},
				[]store.TraceService{{TraceID: traceID, Service: "svc"}}
		})
		require.NoError(t, err)
	}
	require.Equal(t, before, scans(), "ingest read traces sequentially")
	tr, err := s.TraceGet(ctx, fmt.Sprintf("%032x", 0xf000+29))
	require.NoError(t, err)
	require.Equal(t, 1, tr.ModelCalls)
	require.Equal(t, "svc", tr.Service)
}

// TestIngestOfSmallGroupsNeverScansATable: Genkit's realtime export sends each span twice, at its
// start and at its end, in groups of a few spans, which take the merge statement. pgx prepares it,
// and after five executions PostgreSQL keeps a generic plan made from the statistics of that
// moment: on a fresh store, where spans, traces and runs are empty, a sequential scan of each, kept
// until autovacuum analyzes them, so that each group read every span stored so far (a realtime load
// fell from 2,500 to 418 spans/s in its first 40,000 spans). Ingest plans without sequential scans.
func TestIngestOfSmallGroupsNeverScansATable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	scans := func() map[string]int64 {
		return tableReads(t, pool, "COALESCE(seq_scan, 0)", "spans", "traces", "runs")
	}
	before := scans()
	const traceID = "0000000000000000000000000000e001"
	usage := func(ended []store.SpanKey) ([]store.SpanUsage, []store.TraceService) {
		shares := make([]store.SpanUsage, len(ended))
		for i, k := range ended {
			shares[i] = store.SpanUsage{TraceID: k.TraceID, SpanID: k.SpanID, Kind: "model", Model: "m", InputTokens: 1}
		}
		return shares, []store.TraceService{{TraceID: traceID, Service: "svc"}}
	}
	for i := range 30 {
		group := make([]store.Span, 4)
		for j := range group {
			group[j] = store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", 4*i+j+2), Name: "s", StartTime: 1,
				ParentSpanID: ptr(fmt.Sprintf("%016x", 1))}
		}
		_, err := s.SpanIngestFold(ctx, group, usage) // the starts
		require.NoError(t, err)
		for j := range group {
			group[j].EndTime = 2
		}
		_, err = s.SpanIngestFold(ctx, group, usage) // the ends
		require.NoError(t, err)
	}
	require.Equal(t, before, scans(), "ingest read a table sequentially")
	tr, err := s.TraceGet(ctx, traceID)
	require.NoError(t, err)
	require.Equal(t, 120, tr.SpanCount)
	require.Equal(t, 120, tr.ModelCalls)
}

// TestABatchOfNewSpansIsNotLookedUp: ingest looks up which spans of a batch are stored (an index
// probe a span, and a round trip) only when this process stored one of them lately; a batch of new
// spans goes straight to the COPY, whatever its size and even in a trace stored before (the end of
// a span whose start was never written). A span stored by another process (here, another Store)
// fails that COPY on its unique key, and the batch is then looked up and merged: nothing is lost
// or counted twice.
func TestABatchOfNewSpansIsNotLookedUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, a := oneConnStore(t)
	probes := func() int64 { return tableReads(t, pool, "COALESCE(idx_scan, 0)", "spans")["spans"] }
	batch := func(traceID string, from, n int, end int64) []store.Span {
		spans := make([]store.Span, n)
		for i := range spans {
			spans[i] = store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", from+i), Name: "s", StartTime: 1, EndTime: end,
				ParentSpanID: ptr(fmt.Sprintf("%016x", 999))}
		}
		return spans
	}
	const traceID = "0000000000000000000000000000c001"
	before := probes()
	res, err := a.SpanIngest(ctx, batch(traceID, 1, 20, 0)) // running spans of a new trace
	require.NoError(t, err)
	require.EqualValues(t, 20, res.Inserted)
	require.Equal(t, before, probes(), "a new trace's batch probed spans")

	before = probes()
	res, err = a.SpanIngest(ctx, batch(traceID, 41, 3, 5)) // three new spans of a known trace
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Inserted)
	require.Equal(t, before, probes(), "a batch of new spans in a known trace probed spans")

	before = probes()
	res, err = a.SpanIngest(ctx, batch(traceID, 11, 20, 5)) // 10 of them end, 10 new: known spans
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Inserted: 10, Updated: 10, Ended: res.Ended}, res)
	require.Len(t, res.Ended, 20)
	require.Greater(t, probes(), before, "a batch with known spans was not looked up")

	before = probes()
	res, err = a.SpanIngest(ctx, batch(traceID, 1, 2, 5)) // two known spans end: a small merge
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Updated)
	require.Greater(t, probes(), before, "a small batch with known spans was not looked up")

	// Another process, which has not seen the trace: a large batch and a small one.
	b := store.New(pool)
	res, err = b.SpanIngest(ctx, batch(traceID, 21, 20, 7)) // 10 stored (ended at 5), 10 new
	require.NoError(t, err)
	require.EqualValues(t, 10, res.Inserted)
	require.EqualValues(t, 10, res.Updated)
	res, err = b.SpanIngest(ctx, batch(traceID, 3, 2, 7)) // 2 stored running
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Updated)
	tr, err := b.TraceGet(ctx, traceID)
	require.NoError(t, err)
	require.Equal(t, 43, tr.SpanCount)
	var stored, ended int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE end_time_unix_nano = 7)
		FROM spans WHERE trace_id = $1`, traceID).Scan(&stored, &ended))
	require.Equal(t, 43, stored)
	require.Equal(t, 22, ended)
}

// TestAShareGivenTwiceCountsOnce: a span twice in one batch (an exporter's retry grouped with its
// first try) may come with its share twice, from a usage function that reads each copy; on each
// path the span counts once.
func TestAShareGivenTwiceCountsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	for i, n := range []int{4, 40, 300} { // the arrays merge, the fast path, COPY staging
		traceID := fmt.Sprintf("0000000000000000000000000000d%03d", i)
		spans := make([]store.Span, n)
		var shares []store.SpanUsage
		for j := range spans {
			spans[j] = store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", j+1), Name: "s", StartTime: 1, EndTime: 2}
			u := store.SpanUsage{TraceID: traceID, SpanID: spans[j].SpanID, Kind: "tool"}
			shares = append(shares, u, u)
		}
		ingest := s.SpanIngestFold
		switch n {
		case 4: // the arrays merge takes small batches of spans stored before: their starts
			running := slices.Clone(spans)
			for j := range running {
				running[j].EndTime = 0
			}
			_, err := s.SpanIngest(ctx, running)
			require.NoError(t, err)
		case 300:
			ingest = s.SpanIngestCopyFold
		}
		_, err := ingest(ctx, append(spans, spans...), func([]store.SpanKey) ([]store.SpanUsage, []store.TraceService) {
			return shares, nil
		})
		require.NoError(t, err)
		tr, err := s.TraceGet(ctx, traceID)
		require.NoError(t, err)
		require.Equal(t, n, tr.ToolCalls, "%d spans", n)
		require.Equal(t, n, tr.SpanCount, "%d spans", n)
	}
}

// TestABatchWhoseFoldFailsStoresNothing: a batch of new spans is copied, folded and committed in
// one round trip; when the fold fails after the COPY, nothing of the batch is stored, the error
// is the fold's, and the connection goes on serving (here the pool's only one).
func TestABatchWhoseFoldFailsStoresNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	const refused, fine = "0000000000000000000000000000f001", "0000000000000000000000000000f002"
	_, err := pool.Exec(ctx, `CREATE FUNCTION refuse_trace() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.trace_id = '`+refused+`' THEN RAISE EXCEPTION 'refused trace'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_trace BEFORE INSERT ON traces FOR EACH ROW EXECUTE FUNCTION refuse_trace()`)
	require.NoError(t, err)
	batch := func(traceID string) []store.Span {
		spans := make([]store.Span, 20)
		for i := range spans {
			spans[i] = store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", i+1), Name: "s", StartTime: 1, EndTime: 2}
		}
		return spans
	}
	_, err = s.SpanIngest(ctx, batch(refused))
	require.ErrorContains(t, err, "refused trace")
	var stored int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM spans WHERE trace_id = $1`, refused).Scan(&stored))
	require.Zero(t, stored, "the COPY was rolled back with the fold")

	res, err := s.SpanIngest(ctx, batch(fine))
	require.NoError(t, err)
	require.EqualValues(t, 20, res.Inserted)
	tr, err := s.TraceGet(ctx, fine)
	require.NoError(t, err)
	require.Equal(t, 20, tr.SpanCount)
}

// TestAConnectionHoldsOneSpanCopyStatement: a connection that COPYs new spans into one partition,
// then another, then the first again, stores every span and holds one prepared COPY, for the
// table it wrote last.
func TestAConnectionHoldsOneSpanCopyStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	// Noon, so that the batch's start times and the hour either side of them (where ingest looks
	// for stored copies) fall in the day's partition.
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	_, err := s.SpanPartitionsEnsure(ctx, now, now, store.SpanPartitionsDaily)
	require.NoError(t, err)
	ingest := func(traceID string, start int64) {
		t.Helper()
		spans := make([]store.Span, 20)
		for i := range spans {
			spans[i] = store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", i+1), Name: "s", StartTime: start, EndTime: start + 1}
		}
		res, err := s.SpanIngest(ctx, spans)
		require.NoError(t, err)
		require.EqualValues(t, 20, res.Inserted)
	}
	ingest("0000000000000000000000000000c0a1", 1)
	ingest("0000000000000000000000000000c0a2", now.UnixNano())
	ingest("0000000000000000000000000000c0a3", 1)
	ingest("0000000000000000000000000000c0a4", now.UnixNano())

	var stored int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM spans`).Scan(&stored))
	require.Equal(t, 80, stored)
	rows, err := pool.Query(ctx, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE 'COPY %'`)
	require.NoError(t, err)
	copies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, copies, 1, "one COPY statement on the connection: %q", copies)
	require.Contains(t, copies[0], "spans_"+now.Format("20060102"), "the COPY into the table written last")
}

// TestNewSpansAreCopiedIntoTheirHour: with hour partitions, a batch of new spans is COPYed into
// the hour that holds it, not through the partitioned table (which routes every row), although
// the hour either side of it, where ingest would look for stored copies, spans three hours.
func TestNewSpansAreCopiedIntoTheirHour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	// A day no partition covers yet, so that its hours can be made.
	at := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 40).Add(12*time.Hour + 30*time.Minute)
	_, err := s.SpanPartitionsEnsure(ctx, at.Add(-2*time.Hour), at.Add(2*time.Hour), store.SpanPartitionsHourly)
	require.NoError(t, err)
	spans := make([]store.Span, 20)
	for i := range spans {
		spans[i] = store.Span{TraceID: "0000000000000000000000000000c0b1", SpanID: fmt.Sprintf("%016x", i+1), Name: "s",
			StartTime: at.UnixNano() + int64(i), EndTime: at.UnixNano() + 1000}
	}
	res, err := s.SpanIngest(ctx, spans)
	require.NoError(t, err)
	require.EqualValues(t, 20, res.Inserted)
	var copy string
	require.NoError(t, pool.QueryRow(ctx, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE 'COPY %'`).Scan(&copy))
	require.Contains(t, copy, `COPY "spans_`+at.Format("20060102")+`_12"`)
	var stored int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM spans_`+at.Format("20060102")+`_12`).Scan(&stored))
	require.Equal(t, 20, stored)
}
