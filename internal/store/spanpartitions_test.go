package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// partitionOf names the table that holds a span.
func partitionOf(t *testing.T, s *store.Store, traceID, spanID string) []string {
	t.Helper()
	var names []string
	rows, err := s.Pool().Query(context.Background(), `SELECT tableoid::regclass::text FROM spans
		WHERE trace_id = $1 AND span_id = $2 ORDER BY 1`, traceID, spanID)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	return names
}

// isPartition reports whether the catalog lists name as a partition of spans.
func isPartition(t *testing.T, s *store.Store, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, s.Pool().QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'spans'::regclass AND c.relname = $1)`, name).Scan(&ok))
	return ok
}

func TestSpanIngestIntoADayWithNoPartitionLandsInDefaultAndMovesWhenThePartitionIsCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	day := time.Date(2031, 3, 4, 0, 0, 0, 0, time.UTC) // no partition covers it
	require.False(t, isPartition(t, s, "spans_20310304"))

	sp := testSpan("00000000000000a1", "", day.Add(time.Hour).UnixNano(), day.Add(2*time.Hour).UnixNano())
	res, err := s.SpanIngest(ctx, []store.Span{sp})
	require.NoError(t, err, "an insert never fails for want of a partition")
	require.Equal(t, store.SpanIngestResult{Inserted: 1}, counts(res))
	require.Equal(t, []string{"00000000000000a1"}, endedIDs(res))
	require.Equal(t, []string{"spans_default"}, partitionOf(t, s, testTraceID, "00000000000000a1"))

	created, err := s.SpanPartitionsEnsure(ctx, day, day, store.SpanPartitionsDaily)
	require.NoError(t, err)
	require.Equal(t, 1, created)
	require.True(t, isPartition(t, s, "spans_20310304"))
	require.Equal(t, []string{"spans_20310304"}, partitionOf(t, s, testTraceID, "00000000000000a1"),
		"the day's span moved out of spans_default into the new partition")
	created, err = s.SpanPartitionsEnsure(ctx, day, day, store.SpanPartitionsDaily)
	require.NoError(t, err)
	require.Zero(t, created, "a second call finds the partition")

	parts, err := s.SpanPartitions(ctx)
	require.NoError(t, err)
	var found bool
	for _, p := range parts {
		if p.Name == "spans_20310304" {
			found = true
			require.Equal(t, day.UnixNano(), p.From)
			require.Equal(t, day.Add(24*time.Hour).UnixNano(), p.To)
		}
	}
	require.True(t, found, "SpanPartitions lists it with its bounds: %+v", parts)
}

func TestSpanIngestMergesAStartAndItsEndAcrossAPartitionBoundary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	day := time.Date(2031, 5, 6, 0, 0, 0, 0, time.UTC)
	_, err := s.SpanPartitionsEnsure(ctx, day, day.Add(24*time.Hour), store.SpanPartitionsDaily)
	require.NoError(t, err)
	start := day.Add(24*time.Hour - time.Millisecond).UnixNano() // a millisecond before midnight
	end := day.Add(24*time.Hour + time.Second).UnixNano()        // ends the next day

	// Genkit's realtime mode: the start, then the end, each in its own request.
	res, err := s.SpanIngest(ctx, []store.Span{testSpan("00000000000000b1", "", start, 0)})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Inserted: 1}, res, "a running span is not ended")
	child := testSpan("00000000000000b2", "00000000000000b1", end-int64(time.Millisecond), end)
	res, err = s.SpanIngest(ctx, []store.Span{testSpan("00000000000000b1", "", start, end), child})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Inserted: 1, Updated: 1}, counts(res))
	require.Equal(t, []string{"00000000000000b1", "00000000000000b2"}, endedIDs(res))
	require.Equal(t, []string{"spans_20310506"}, partitionOf(t, s, testTraceID, "00000000000000b1"),
		"one row, in the partition of its start")
	require.Equal(t, []string{"spans_20310507"}, partitionOf(t, s, testTraceID, "00000000000000b2"))

	spans, err := s.SpansByTrace(ctx, testTraceID, 0)
	require.NoError(t, err)
	require.Len(t, spans, 2, "the trace is whole across the two partitions")
	require.Equal(t, end, spans[0].EndTime)
	tr, err := s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Equal(t, 2, tr.SpanCount)
	require.Equal(t, end, tr.EndTime)

	// A copy whose start moved into the next day replaces the stored span instead of adding one;
	// a running copy with another start than the ended one stored is stale and skipped.
	moved := testSpan("00000000000000b1", "", start+int64(2*time.Millisecond), end)
	moved.ParentSpanID = nil
	res, err = s.SpanIngest(ctx, []store.Span{moved})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Updated: 1}, res, "a span ended before is not ended again by its moved copy")
	require.Equal(t, []string{"spans_20310507"}, partitionOf(t, s, testTraceID, "00000000000000b1"))
	res, err = s.SpanIngest(ctx, []store.Span{testSpan("00000000000000b1", "", start, 0)})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Skipped: 1}, res)
	require.Equal(t, []string{"spans_20310507"}, partitionOf(t, s, testTraceID, "00000000000000b1"))
	tr, err = s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Equal(t, 2, tr.SpanCount, "a replaced span is still counted once")

	// The fast path (a batch of 64 or more new spans) meets the stored span by its key's prefix too.
	batch := []store.Span{testSpan("00000000000000b1", "", start, end+1)}
	for i := range 70 {
		batch = append(batch, testSpan("00000000000001"+string(rune('0'+i/10))+string(rune('0'+i%10)), "00000000000000b1", start+int64(i), end))
	}
	res, err = s.SpanIngest(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Inserted: 70, Updated: 1}, counts(res))
	require.Len(t, endedIDs(res), 70, "the new spans ended; b1 had ended before")
	require.NotContains(t, endedIDs(res), "00000000000000b1")
	require.Equal(t, []string{"spans_20310506"}, partitionOf(t, s, testTraceID, "00000000000000b1"))
	tr, err = s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Equal(t, 72, tr.SpanCount)
}

func TestSpanPartitionDropKeepsTheSpansOfTracesStillSummarized(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	day := time.Date(2031, 7, 8, 0, 0, 0, 0, time.UTC)
	_, err := s.SpanPartitionsEnsure(ctx, day, day.Add(24*time.Hour), store.SpanPartitionsDaily)
	require.NoError(t, err)
	at := func(d time.Duration) int64 { return day.Add(d).UnixNano() }
	const gone, kept = "0000000000000000000000000000000a", "0000000000000000000000000000000b"
	span := func(traceID, id, parent string, start int64) store.Span {
		sp := testSpan(id, parent, start, start+1000)
		sp.TraceID = traceID
		return sp
	}
	_, err = s.SpanIngest(ctx, []store.Span{
		span(gone, "00000000000000c1", "", at(time.Hour)),
		span(kept, "00000000000000d1", "", at(23*time.Hour)),
		span(kept, "00000000000000d2", "00000000000000d1", at(25*time.Hour)), // the next day
	})
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `DELETE FROM traces WHERE trace_id = $1`, gone)
	require.NoError(t, err)

	parts, err := s.SpanPartitions(ctx)
	require.NoError(t, err)
	var p store.SpanPartition
	for _, x := range parts {
		if x.Name == "spans_20310708" {
			p = x
		}
	}
	require.Equal(t, "spans_20310708", p.Name)
	n, err := s.SpanPartitionDrop(ctx, p)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the summarized trace's span in the day is kept")
	require.False(t, isPartition(t, s, "spans_20310708"), "the partition is gone from pg_inherits")
	var exists bool
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT to_regclass('spans_20310708') IS NOT NULL`).Scan(&exists))
	require.False(t, exists, "and from pg_class")
	require.Empty(t, partitionOf(t, s, gone, "00000000000000c1"))
	require.Equal(t, []string{"spans_default"}, partitionOf(t, s, kept, "00000000000000d1"))
	require.Equal(t, []string{"spans_20310709"}, partitionOf(t, s, kept, "00000000000000d2"))
	spans, err := s.SpansByTrace(ctx, kept, 0)
	require.NoError(t, err)
	require.Len(t, spans, 2, "the kept trace is whole")

	// Another replica's pass may drop the same partition a moment later: it finds it gone.
	n, err = s.SpanPartitionDrop(ctx, p)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestMigration00060KeepsTheSpansOfAnExistingDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	require.NoError(t, store.MigrateDownTo(ctx, pool, 59))
	status, err := store.Migrations(ctx, pool)
	require.NoError(t, err)
	require.EqualValues(t, 59, status.Current)
	var kind string
	require.NoError(t, pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'spans'`).Scan(&kind))
	require.Equal(t, "r", kind, "before 00060 spans is a plain table")

	now := time.Now().UTC()
	old := now.Add(-10 * 24 * time.Hour)
	ancient := now.Add(-500 * 24 * time.Hour)
	_, err = pool.Exec(ctx, `
		INSERT INTO spans (trace_id, span_id, parent_span_id, name, start_time_unix_nano, end_time_unix_nano, attributes, source)
		SELECT lpad(to_hex(g / 3), 32, '0'), lpad(to_hex(g), 16, '0'),
			CASE WHEN g % 3 = 0 THEN NULL ELSE lpad(to_hex(g - g % 3), 16, '0') END, 'span' || g,
			(ARRAY[$1::bigint, $2::bigint, $3::bigint])[g % 3 + 1] + g, 0, '{"k":"v"}', 'otlp'
		FROM generate_series(3, 302) g`, now.UnixNano(), old.UnixNano(), ancient.UnixNano())
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO traces (trace_id, span_count, start_time_unix_nano)
		SELECT trace_id, count(*), min(start_time_unix_nano) FROM spans GROUP BY trace_id`)
	require.NoError(t, err)

	applied, err := store.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []int64{60, 61}, applied)
	require.NoError(t, pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'spans'`).Scan(&kind))
	require.Equal(t, "p", kind, "spans is partitioned")
	var count, distinctKeys int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans`).Scan(&count, &distinctKeys))
	require.Equal(t, 300, count, "every span survived the migration")
	require.Equal(t, 300, distinctKeys)
	byTable := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT tableoid::regclass::text, count(*) FROM spans GROUP BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		var n int
		require.NoError(t, rows.Scan(&name, &n))
		byTable[name] = n
	}
	require.NoError(t, rows.Err())
	// The older spans of the last 400 days go to a partition a month, ending where today's begins.
	parts, err := store.New(pool).SpanPartitions(ctx)
	require.NoError(t, err)
	var oldPart store.SpanPartition
	for _, p := range parts {
		if p.From <= old.UnixNano() && old.UnixNano() < p.To {
			oldPart = p
		}
	}
	oldMonth := time.Date(old.Year(), old.Month(), 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, "spans_"+oldMonth.Format("20060102"), oldPart.Name, "%+v", parts)
	require.Equal(t, oldMonth.UnixNano(), oldPart.From)
	require.Equal(t, min(oldMonth.AddDate(0, 1, 0).UnixNano(), now.Truncate(24*time.Hour).UnixNano()), oldPart.To,
		"a month, or less where today's partition begins")
	require.Equal(t, 100, byTable["spans_default"], "spans older than 400 days go to spans_default: %v", byTable)
	require.Equal(t, 100, byTable[oldPart.Name], "the others to their month's partition: %v", byTable)
	require.Equal(t, 100, count-byTable["spans_default"]-byTable[oldPart.Name],
		"today's to today's (or, past midnight, tomorrow's): %v", byTable)
	var unset int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM traces t WHERE span_start_min_unix_nano <>
		(SELECT min(start_time_unix_nano) FROM spans s WHERE s.trace_id = t.trace_id)
		OR span_start_max_unix_nano <> (SELECT max(start_time_unix_nano) FROM spans s WHERE s.trace_id = t.trace_id)`).Scan(&unset))
	require.Zero(t, unset, "every summary knows the span start times of its trace")

	// Ingest works on the migrated table: an end merges into its migrated start.
	st := store.New(pool)
	var traceID, spanID string
	var start int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT trace_id, span_id, start_time_unix_nano FROM spans
		WHERE parent_span_id IS NULL AND start_time_unix_nano > $1 LIMIT 1`, old.Add(time.Hour).UnixNano()).Scan(&traceID, &spanID, &start))
	res, err := st.SpanIngest(ctx, []store.Span{{TraceID: traceID, SpanID: spanID, Name: "ended", StartTime: start, EndTime: start + 5}})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Updated: 1, Ended: []store.SpanKey{{TraceID: traceID, SpanID: spanID}}}, res)
}

// counts is an ingest's result without the keys of the spans it ended.
func counts(res store.SpanIngestResult) store.SpanIngestResult {
	res.Ended = nil
	return res
}

// endedIDs are the span ids of the spans an ingest stored ended for the first time.
func endedIDs(res store.SpanIngestResult) []string {
	var ids []string
	for _, k := range res.Ended {
		ids = append(ids, k.SpanID)
	}
	return ids
}

// TestATraceIsReadOnlyInThePartitionsOfItsSpans reads and then ingests into a trace that lies in
// one day's partition, and checks, from PostgreSQL's own scan counters, that neither scanned
// another day: reads and ingest's lookups bounded by the summary's span start times are pruned,
// where those by trace id alone probe every day's key, and would slow with each day kept.
func TestATraceIsReadOnlyInThePartitionsOfItsSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One connection, so that pg_stat_force_next_flush flushes the counters of the reads before
	// they are read.
	cfg := storetest.NewPool(t).Config()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := store.New(pool)
	day := time.Date(2031, 7, 1, 0, 0, 0, 0, time.UTC)
	_, err = s.SpanPartitionsEnsure(ctx, day, day.Add(3*24*time.Hour), store.SpanPartitionsDaily)
	require.NoError(t, err)
	at := func(d int) int64 { return day.Add(time.Duration(d)*24*time.Hour + time.Hour).UnixNano() }
	other := "ffffffffffffffffffffffffffffffff"
	straddling := []store.Span{testSpan("00000000000000c1", "", at(0), at(2)), testSpan("00000000000000c2", "00000000000000c1", at(2), at(2)+1)}
	for i := range straddling {
		straddling[i].TraceID = other
	}
	_, err = s.SpanIngest(ctx, append(straddling,
		testSpan("00000000000000d1", "", at(1), at(1)+10), testSpan("00000000000000d2", "00000000000000d1", at(1)+1, at(1)+5)))
	require.NoError(t, err)

	scans := func() map[string]int64 {
		t.Helper()
		_, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		out := map[string]int64{}
		rows, err := pool.Query(ctx, `SELECT relname::text, COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0)
			FROM pg_stat_user_tables WHERE relname IN ('spans_20310701', 'spans_20310702', 'spans_20310703', 'spans_default')`)
		require.NoError(t, err)
		for rows.Next() {
			var name string
			var n int64
			require.NoError(t, rows.Scan(&name, &n))
			out[name] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	before := scans()
	spans, err := s.SpansByTrace(ctx, testTraceID, 0)
	require.NoError(t, err)
	require.Len(t, spans, 2)
	_, err = s.SpanSkeletonsByTrace(ctx, testTraceID, 0)
	require.NoError(t, err)
	_, err = s.SpanSearch(ctx, testTraceID, "span")
	require.NoError(t, err)
	tr, err := s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Equal(t, 2, tr.SpanCount)
	after := scans()
	require.Greater(t, after["spans_20310702"], before["spans_20310702"], "the trace's day was read")
	for _, name := range []string{"spans_20310701", "spans_20310703", "spans_default"} {
		require.Equal(t, before[name], after[name], "%s holds none of the trace's spans and was not read", name)
	}

	// Ingest looks for stored copies in the trace's days only: a new trace's spans (the fast path,
	// 16 or more), more spans of the trace (the fast path's lookup), and a span's end (the merge).
	before = scans()
	fresh := make([]store.Span, 0, 20)
	more := make([]store.Span, 0, 20)
	for i := range 20 {
		sp := testSpan(fmt.Sprintf("00000000000001%02d", i), "", at(1)+int64(i), at(1)+100)
		sp.TraceID = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
		fresh = append(fresh, sp)
		more = append(more, testSpan(fmt.Sprintf("00000000000002%02d", i), "00000000000000d1", at(1)+int64(i), at(1)+100))
	}
	res, err := s.SpanIngest(ctx, fresh)
	require.NoError(t, err)
	require.Equal(t, int64(20), res.Inserted)
	res, err = s.SpanIngest(ctx, append(more, testSpan("00000000000000d1", "", at(1), at(1)+20)))
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Inserted: 20, Updated: 1}, counts(res))
	res, err = s.SpanIngest(ctx, []store.Span{testSpan("00000000000000d2", "00000000000000d1", at(1)+1, at(1)+6)})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Updated: 1}, counts(res))
	after = scans()
	for _, name := range []string{"spans_20310701", "spans_20310703", "spans_default"} {
		require.Equal(t, before[name], after[name], "%s holds none of the ingested traces' spans and was not read", name)
	}

	// A trace whose spans straddle days is read whole, from each of its days.
	spans, err = s.SpansByTrace(ctx, other, 0)
	require.NoError(t, err)
	require.Len(t, spans, 2)
	tr, err = s.TraceGet(ctx, other)
	require.NoError(t, err)
	require.Equal(t, 2, tr.SpanCount)
}

// TestSpanPartitionsMonthlyAreClippedAgainstTheDaysThatExist: a store that keeps its traces makes
// a partition a month; where day partitions exist already (retention was on before), the months
// around them are clipped to fit, so that ranges never overlap and every day is covered once.
func TestSpanPartitionsMonthlyAreClippedAgainstTheDaysThatExist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	day := func(m time.Month, d int) time.Time { return time.Date(2032, m, d, 0, 0, 0, 0, time.UTC) }
	created, err := s.SpanPartitionsEnsure(ctx, day(7, 10), day(7, 11), store.SpanPartitionsDaily)
	require.NoError(t, err)
	require.Equal(t, 2, created)

	created, err = s.SpanPartitionsEnsure(ctx, day(7, 1), day(8, 2), store.SpanPartitionsMonthly)
	require.NoError(t, err)
	require.Equal(t, 3, created, "July before the days, July after them, and August")
	parts, err := s.SpanPartitions(ctx)
	require.NoError(t, err)
	got := map[string][2]time.Time{}
	for _, p := range parts {
		if from := time.Unix(0, p.From).UTC(); from.Year() == 2032 {
			got[p.Name] = [2]time.Time{from, time.Unix(0, p.To).UTC()}
		}
	}
	require.Equal(t, map[string][2]time.Time{
		"spans_20320701": {day(7, 1), day(7, 10)},
		"spans_20320710": {day(7, 10), day(7, 11)},
		"spans_20320711": {day(7, 11), day(7, 12)},
		"spans_20320712": {day(7, 12), day(8, 1)},
		"spans_20320801": {day(8, 1), day(9, 1)},
	}, got)

	created, err = s.SpanPartitionsEnsure(ctx, day(7, 1), day(8, 31), store.SpanPartitionsMonthly)
	require.NoError(t, err)
	require.Zero(t, created, "every day is covered")
	sp := testSpan("00000000000000c1", "", day(7, 20).UnixNano(), day(7, 20).UnixNano()+5)
	_, err = s.SpanIngest(ctx, []store.Span{sp})
	require.NoError(t, err)
	require.Equal(t, []string{"spans_20320712"}, partitionOf(t, s, testTraceID, "00000000000000c1"))
}

// TestSpanPartitionsHourlyAndDaysAroundThem: a busy store makes a partition an hour, named after
// it; days made after, around those hours, are clipped to fit, so every instant is covered once;
// spans land in their hour; and each partition's rows can be estimated for the next choice.
func TestSpanPartitionsHourlyAndDaysAroundThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	at := func(d, h int) time.Time { return time.Date(2034, 3, d, h, 0, 0, 0, time.UTC) }
	created, err := s.SpanPartitionsEnsure(ctx, at(9, 22).Add(30*time.Minute), at(10, 1).Add(5*time.Minute), store.SpanPartitionsHourly)
	require.NoError(t, err)
	require.Equal(t, 4, created, "22:00, 23:00, 00:00 and 01:00")

	created, err = s.SpanPartitionsEnsure(ctx, at(9, 0), at(10, 0), store.SpanPartitionsDaily)
	require.NoError(t, err)
	require.Equal(t, 2, created, "the 9th before its hours, the 10th after them")
	parts, err := s.SpanPartitions(ctx)
	require.NoError(t, err)
	got := map[string][2]time.Time{}
	for _, p := range parts {
		if from := time.Unix(0, p.From).UTC(); from.Year() == 2034 {
			got[p.Name] = [2]time.Time{from, time.Unix(0, p.To).UTC()}
		}
	}
	require.Equal(t, map[string][2]time.Time{
		"spans_20340309_00": {at(9, 0), at(9, 22)}, // narrower than a day: named after its first hour
		"spans_20340309_22": {at(9, 22), at(9, 23)},
		"spans_20340309_23": {at(9, 23), at(10, 0)},
		"spans_20340310_00": {at(10, 0), at(10, 1)},
		"spans_20340310_01": {at(10, 1), at(10, 2)},
		"spans_20340310_02": {at(10, 2), at(11, 0)},
	}, got)

	spans := make([]store.Span, 30)
	for i := range spans {
		start := at(9, 23).Add(time.Duration(i) * time.Second).UnixNano()
		spans[i] = testSpan(fmt.Sprintf("%016x", 0xe100+i), "", start, start+5)
	}
	_, err = s.SpanIngest(ctx, spans)
	require.NoError(t, err)
	require.Equal(t, []string{"spans_20340309_23"}, partitionOf(t, s, testTraceID, spans[0].SpanID))
	_, err = s.Pool().Exec(ctx, `ANALYZE spans_20340309_23`)
	require.NoError(t, err)
	rows, err := s.SpanPartitionRows(ctx, store.SpanPartition{Name: "spans_20340309_23"})
	require.NoError(t, err)
	require.EqualValues(t, 30, rows)
	rows, err = s.SpanPartitionRows(ctx, store.SpanPartition{Name: "spans_20340309_22"})
	require.NoError(t, err)
	require.Zero(t, rows)
}

// TestAMergeIntoAPartitionDroppedSinceGoesThroughSpans: a small group's merge writes the one
// partition that holds it, from the partitions the store listed; when that partition has been
// dropped since (another replica's retention pass), the merge fails as an undefined table, and is
// tried again through spans, which routes it to spans_default: nothing is lost.
func TestAMergeIntoAPartitionDroppedSinceGoesThroughSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	day := time.Date(2033, 1, 5, 0, 0, 0, 0, time.UTC)
	_, err := s.SpanPartitionsEnsure(ctx, day, day, store.SpanPartitionsDaily)
	require.NoError(t, err)
	start := day.Add(12 * time.Hour).UnixNano()
	res, err := s.SpanIngest(ctx, []store.Span{testSpan("00000000000000d1", "", start, 0)})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Inserted)
	require.Equal(t, []string{"spans_20330105"}, partitionOf(t, s, testTraceID, "00000000000000d1"))

	_, err = s.Pool().Exec(ctx, `DROP TABLE spans_20330105`)
	require.NoError(t, err)
	res, err = s.SpanIngest(ctx, []store.Span{testSpan("00000000000000d2", "00000000000000d1", start+1, start+2)})
	require.NoError(t, err, "the merge is tried again through spans")
	require.EqualValues(t, 1, res.Inserted)
	require.Equal(t, []string{"spans_default"}, partitionOf(t, s, testTraceID, "00000000000000d2"))
}
