package trace_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// spansOf counts a trace's spans by the table that holds them.
func spansOf(t *testing.T, st *store.Store, traceID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	rows, err := st.Pool().Query(context.Background(), `SELECT tableoid::regclass::text, count(*) FROM spans
		WHERE trace_id = $1 GROUP BY 1`, traceID)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		var n int
		require.NoError(t, rows.Scan(&name, &n))
		out[name] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// TestRetentionDropsExpiredDayPartitionsAndKeepsStraddlingTracesWhole expires, by age, the day
// three days back (day -3) and half of day -2. It checks that day -3's partition is dropped
// (pg_inherits, pg_class) and day -2's is not; that an expired trace whose spans straddle into day
// -2 goes whole (its day -2 span deleted by row); and that a kept trace with a span in day -3 (a
// span started before its root: clock skew) and an interrupted run's trace rooted in day -3 stay
// whole, their day -3 spans moved to spans_default.
func TestRetentionDropsExpiredDayPartitionsAndKeepsStraddlingTracesWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	midnight := time.Now().UTC().Truncate(24 * time.Hour)
	d3, d2 := midnight.Add(-3*24*time.Hour), midnight.Add(-2*24*time.Hour)
	_, err := st.SpanPartitionsEnsure(ctx, d3, midnight, store.SpanPartitionsDaily)
	require.NoError(t, err)
	name3, name2 := "spans_"+d3.Format("20060102"), "spans_"+d2.Format("20060102")
	horizon := d2.Add(12 * time.Hour)

	run, err := st.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x"})
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `UPDATE runs SET status = 'interrupted' WHERE id = $1`, run.ID)
	require.NoError(t, err)

	const (
		oldTrace      = "000000000000000000000000000000a1" // day -3 only: expired
		oldStraddle   = "000000000000000000000000000000a2" // rooted in day -3, a child in day -2: expired
		keptStraddle  = "000000000000000000000000000000a3" // rooted after the horizon, a child in day -3: kept
		interrupted   = "000000000000000000000000000000a4" // an interrupted run's, rooted in day -3: kept
		youngInDay2   = "000000000000000000000000000000a5" // day -2 after the horizon: kept
		expiredInDay2 = "000000000000000000000000000000a6" // day -2 before the horizon: expired, by rows
	)
	var spans []store.Span
	n := 0
	add := func(traceID string, root bool, at time.Time, runID bool) {
		n++
		sp := store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", 0xb000+n), Name: "s",
			StartTime: at.UnixNano(), EndTime: at.Add(time.Second).UnixNano(), Source: store.SpanSourceOTLP}
		if !root {
			parent := "ffffffffffffffff"
			sp.ParentSpanID = &parent
		}
		if runID {
			sp.RunID = &run.ID
		}
		spans = append(spans, sp)
	}
	add(oldTrace, true, d3.Add(time.Hour), false)
	add(oldTrace, false, d3.Add(2*time.Hour), false)
	add(oldStraddle, true, d2.Add(-time.Hour), false)
	add(oldStraddle, false, d2.Add(time.Hour), false)
	add(keptStraddle, true, horizon.Add(time.Hour), false)
	add(keptStraddle, false, d2.Add(-time.Minute), false)
	add(interrupted, true, d3.Add(3*time.Hour), true)
	add(interrupted, false, d3.Add(4*time.Hour), true)
	add(youngInDay2, true, horizon.Add(2*time.Hour), false)
	add(expiredInDay2, true, d2.Add(3*time.Hour), false)
	_, err = st.SpanIngest(ctx, spans)
	require.NoError(t, err)
	require.Equal(t, map[string]int{name3: 1, name2: 1}, spansOf(t, st, oldStraddle), "the trace straddles two partitions")

	metrics := trace.NewMetrics()
	ret := trace.NewRetention(st, trace.RetentionConfig{MaxAge: time.Since(horizon), BatchTraces: 2, Pause: time.Millisecond}, metrics, nil)
	traces, deleted, err := ret.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, traces, "oldTrace, oldStraddle, expiredInDay2")
	require.EqualValues(t, 5, deleted)

	var inherits, classes int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'spans'::regclass AND c.relname = $1),
		(SELECT count(*) FROM pg_class WHERE relname = $1)`, name3).Scan(&inherits, &classes))
	require.Zero(t, inherits, "day -3's partition is no longer a partition of spans")
	require.Zero(t, classes, "and no longer a table")
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'spans'::regclass AND c.relname = $1`, name2).Scan(&inherits))
	require.Equal(t, 1, inherits, "day -2 ends after the horizon: its partition stays")

	require.Empty(t, spansOf(t, st, oldTrace))
	require.Empty(t, spansOf(t, st, oldStraddle), "an expired straddling trace goes whole")
	require.Empty(t, spansOf(t, st, expiredInDay2))
	require.Equal(t, map[string]int{"spans_default": 1, name2: 1}, spansOf(t, st, keptStraddle), "a kept straddling trace stays whole")
	require.Equal(t, map[string]int{"spans_default": 2}, spansOf(t, st, interrupted), "an interrupted run's trace stays whole")
	require.Equal(t, map[string]int{name2: 1}, spansOf(t, st, youngInDay2))
	for _, id := range []string{keptStraddle, interrupted, youngInDay2} {
		_, err := st.TraceGet(ctx, id)
		require.NoError(t, err, "trace %s keeps its summary", id)
	}
	require.Contains(t, gather(t, metrics), `loupe_trace_retention_deleted_total{kind="partitions"} 1`)

	traces, _, err = ret.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, traces, "a second pass finds nothing more")
	require.Equal(t, map[string]int{"spans_default": 2}, spansOf(t, st, interrupted), "and keeps the kept spans")
}

// TestRetentionCreatesTheComingDaysPartitions checks that a pass makes partitions cover today and
// the next AheadDays days: a month each when traces are kept (no rule at all), a day each when they
// expire by age.
func TestRetentionCreatesTheComingDaysPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	dropAll := func() {
		t.Helper()
		_, err := st.Pool().Exec(ctx, `DO $$ DECLARE r record; BEGIN
			FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
				WHERE i.inhparent = 'spans'::regclass AND c.relname <> 'spans_default' LOOP
				EXECUTE format('DROP TABLE %I', r.relname);
			END LOOP; END $$`)
		require.NoError(t, err)
	}
	names := func() []string {
		t.Helper()
		parts, err := st.SpanPartitions(ctx)
		require.NoError(t, err)
		var names []string
		for _, p := range parts {
			names = append(names, p.Name)
		}
		return names
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)

	dropAll()
	_, _, err := trace.NewRetention(st, trace.RetentionConfig{AheadDays: 3}, nil, nil).RunOnce(ctx)
	require.NoError(t, err)
	months := []string{"spans_" + today.AddDate(0, 0, 1-today.Day()).Format("20060102")}
	if last := today.AddDate(0, 0, 3); last.Month() != today.Month() {
		months = append(months, "spans_"+last.AddDate(0, 0, 1-last.Day()).Format("20060102"))
	}
	require.Equal(t, months, names(), "traces kept: a partition a month")

	dropAll()
	_, _, err = trace.NewRetention(st, trace.RetentionConfig{AheadDays: 3, MaxAge: 30 * 24 * time.Hour}, nil, nil).RunOnce(ctx)
	require.NoError(t, err)
	days := []string{}
	for i := range 4 {
		days = append(days, "spans_"+today.Add(time.Duration(i)*24*time.Hour).Format("20060102"))
	}
	require.Equal(t, days, names(), "traces expire by age: a partition a day")
}

// TestRetentionMakesHoursOnceADayIsBusy: with a retention age, a pass makes the coming partitions
// an hour each once a partition that ended lately held HourlyAbove spans a day or more, and a day
// each otherwise.
func TestRetentionMakesHoursOnceADayIsBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	now := time.Now().UTC()
	yesterday := now.Truncate(24 * time.Hour).Add(-24 * time.Hour)
	reset := func() {
		t.Helper()
		_, err := st.Pool().Exec(ctx, fmt.Sprintf(`DO $$ DECLARE r record; BEGIN
			FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
				WHERE i.inhparent = 'spans'::regclass AND c.relname NOT IN ('spans_default', 'spans_%s') LOOP
				EXECUTE format('DROP TABLE %%I', r.relname);
			END LOOP; END $$`, yesterday.Format("20060102")))
		require.NoError(t, err)
	}
	_, err := st.SpanPartitionsEnsure(ctx, yesterday, yesterday, store.SpanPartitionsDaily)
	require.NoError(t, err)
	spans := make([]store.Span, 50)
	for i := range spans {
		start := yesterday.Add(time.Duration(i) * time.Minute).UnixNano()
		spans[i] = store.Span{TraceID: "000000000000000000000000000000c7", SpanID: fmt.Sprintf("%016x", 0xc700+i), Name: "s",
			StartTime: start, EndTime: start + 1000, Source: store.SpanSourceOTLP}
	}
	_, err = st.SpanIngest(ctx, spans)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `ANALYZE `+pgx.Identifier{"spans_" + yesterday.Format("20060102")}.Sanitize())
	require.NoError(t, err)
	coming := func(cfg trace.RetentionConfig) (hours, days int) {
		t.Helper()
		reset()
		_, _, err := trace.NewRetention(st, cfg, nil, nil).RunOnce(ctx)
		require.NoError(t, err)
		parts, err := st.SpanPartitions(ctx)
		require.NoError(t, err)
		for _, p := range parts {
			switch {
			case p.To <= now.Truncate(time.Hour).UnixNano(): // yesterday's
			case p.To-p.From == int64(time.Hour):
				hours++
			case p.To-p.From == int64(24*time.Hour):
				days++
			default:
				t.Fatalf("partition %s is neither an hour nor a day", p.Name)
			}
		}
		return hours, days
	}
	cfg := trace.RetentionConfig{AheadDays: 1, MaxAge: 30 * 24 * time.Hour, HourlyAbove: 40}
	hours, days := coming(cfg)
	require.Equal(t, []int{25, 0}, []int{hours, days}, "50 spans yesterday, hours from 40 a day: this hour to the same hour tomorrow")

	cfg.HourlyAbove = 1000
	hours, days = coming(cfg)
	require.Equal(t, []int{0, 2}, []int{hours, days}, "below the volume: today and tomorrow")
}
