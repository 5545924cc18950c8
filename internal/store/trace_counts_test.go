package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// traceCounts are a trace's kept counts, and the same counted from its spans.
type traceCounts struct{ errors, interrupted, resumes int }

func keptCounts(t *testing.T, pool *pgxpool.Pool, traceID string) (kept, counted traceCounts) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT error_spans, interrupted_spans, resume_spans,
		(SELECT count(*) FILTER (WHERE status_code = 2) FROM spans WHERE trace_id = $1),
		(SELECT count(*) FILTER (WHERE attributes->>'genkit:state' = 'interrupted') FROM spans WHERE trace_id = $1),
		(SELECT count(*) FILTER (WHERE links::text LIKE '%"loupe.link.type":"resume"%') FROM spans WHERE trace_id = $1)
		FROM traces WHERE trace_id = $1`, traceID).Scan(&kept.errors, &kept.interrupted, &kept.resumes,
		&counted.errors, &counted.interrupted, &counted.resumes))
	return kept, counted
}

// TestTraceCountsFollowEachSpansLatestCopyOnEveryPath: the failed, interrupted and resuming
// counts that the trace list reads from a trace's summary row follow its spans as they start, end,
// are sent again with another outcome, or arrive out of order, on every ingest path (the fast
// path's COPY and merge, the arrays merge, COPY staging, a caller's transaction), and always equal
// the same counted from the spans.
func TestTraceCountsFollowEachSpansLatestCopyOnEveryPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	s := store.New(pool)
	interrupted := json.RawMessage(`{"genkit:type":"action","genkit:state":"interrupted"}`)
	paths := map[string]struct {
		filler int
		ingest func([]store.Span) error
	}{
		"fast":   {40, func(b []store.Span) error { _, err := s.SpanIngest(ctx, b); return err }},
		"arrays": {3, func(b []store.Span) error { _, err := s.SpanIngest(ctx, b); return err }},
		"copy":   {3, func(b []store.Span) error { _, err := s.SpanIngestCopy(ctx, b); return err }},
		"tx": {40, func(b []store.Span) error {
			return s.WithTx(ctx, func(tx *store.Store) error { _, err := tx.SpanIngest(ctx, b); return err })
		}},
	}
	n := 0
	for name, p := range paths {
		n++
		traceID := fmt.Sprintf("%032x", 0xd000+n)
		span := func(id int, end int64, status int16, attrs, links string) store.Span {
			sp := store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", id), Name: "s", StartTime: int64(id), EndTime: end,
				StatusCode: status, Attributes: json.RawMessage(attrs), Links: json.RawMessage(links)}
			if id != 1 {
				sp.ParentSpanID = ptr(fmt.Sprintf("%016x", 1))
			}
			return sp
		}
		batch := func(spans ...store.Span) []store.Span {
			for i := range p.filler { // spans of no interest, so that the batch takes the path
				spans = append(spans, span(1000+i, 2000, 0, `{}`, `[]`))
			}
			return spans
		}
		step := func(what string, want traceCounts, wantInterrupted bool, spans ...store.Span) {
			t.Helper()
			require.NoError(t, p.ingest(batch(spans...)), "%s: %s", name, what)
			kept, counted := keptCounts(t, pool, traceID)
			require.Equal(t, counted, kept, "%s: %s: the kept counts are the spans'", name, what)
			require.Equal(t, want, kept, "%s: %s", name, what)
			tr, err := s.TraceGet(ctx, traceID)
			require.NoError(t, err)
			require.Equal(t, wantInterrupted, tr.Interrupted, "%s: %s", name, what)
			require.Equal(t, want.errors, tr.ErrorSpans, "%s: %s", name, what)
		}
		resume := fmt.Sprintf(`[{"trace_id":"%s","span_id":"%016x","attributes":{"loupe.link.type":"resume"}}]`, traceID, 3)
		step("first copies", traceCounts{errors: 1, interrupted: 1}, true,
			span(1, 0, 0, `{}`, `[]`),                 // the root, running
			span(2, 20, 2, `{}`, `[]`),                // failed
			span(3, 30, 0, string(interrupted), `[]`), // interrupted
		)
		step("the root fails, the failed span is sent again as ok, a span resumes", traceCounts{errors: 1, interrupted: 1, resumes: 1}, false,
			span(1, 90, 2, `{}`, `[]`),
			span(2, 21, 1, `{}`, `[]`),
			span(4, 40, 0, `{}`, resume),
		)
		step("sent again: nothing changes", traceCounts{errors: 1, interrupted: 1, resumes: 1}, false,
			span(1, 90, 2, `{}`, `[]`),
			span(2, 21, 1, `{}`, `[]`),
			span(4, 40, 0, `{}`, resume),
		)
		step("a late start of an ended span is skipped", traceCounts{errors: 1, interrupted: 1, resumes: 1}, false,
			span(3, 0, 0, `{}`, `[]`),
			span(2, 0, 2, `{}`, `[]`),
		)
		step("the interrupted span is sent again as done, the resume loses its link", traceCounts{errors: 1}, false,
			span(3, 31, 0, `{"genkit:state":"done"}`, `[]`),
			span(4, 41, 0, `{}`, `[]`),
		)
	}
}

// TestSpanFlagsAgreeWithTheMigrationsSQL: the flags ingest works out in Go say what migration
// 00059's conditions say in SQL of the same JSON, awkward JSON included, so that spans stored
// before and after the migration count alike.
func TestSpanFlagsAgreeWithTheMigrationsSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	s := store.New(pool)
	const traceID = "0000000000000000000000000000f1a9"
	attrs := []string{
		`{"genkit:state":"interrupted"}`,
		`{"genkit:state":"done","genkit:output":"interrupted"}`,
		`{"genkit:state":"interrupted","genkit:state":"done"}`,
		`{"genkit:state":"done","genkit:state":"interrupted"}`,
		`{"Genkit:State":"interrupted"}`,
		`{"genkit:state":"interrupt\u0065d"}`,
		`{"genkit\u003astate":"interrupted"}`,
		`{"genkit:state":["interrupted"]}`,
		`{"a":{"genkit:state":"interrupted"}}`,
		`{ "genkit:state" : "interrupted" }`,
	}
	links := []string{
		`[{"attributes":{"loupe.link.type":"resume"}}]`,
		`[{"attributes":{"loupe.link.type":"fork","note":"resume"}}]`,
		`[1,"resume",{"attributes":{"loupe.link.type":"resume"}}]`,
		`[{"Attributes":{"loupe.link.type":"resume"}}]`,
		`[{"attributes":{"loupe.link.type":"resume","loupe.link.type":"fork"}}]`,
		`[{"attributes":{"loupe.link.type":"fork","loupe.link.type":"resume"}}]`,
		`[{"attributes":"loupe.link.type resume"}]`,
		`[{"attributes":{"loupe.link.type":["resume"]}}]`,
		`[ { "attributes" : { "loupe.link.type" : "resume" } } ]`,
	}
	var spans []store.Span
	for i, a := range attrs {
		spans = append(spans, store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", i+1), Name: "a", StartTime: 1, EndTime: 2,
			Attributes: json.RawMessage(a)})
	}
	for i, l := range links {
		spans = append(spans, store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", 100+i), Name: "l", StartTime: 1, EndTime: 2,
			Links: json.RawMessage(l)})
	}
	for _, ingest := range []func(context.Context, []store.Span) (store.SpanIngestResult, error){s.SpanIngest, s.SpanIngestCopy} {
		_, err := pool.Exec(ctx, `DELETE FROM spans; DELETE FROM traces`)
		require.NoError(t, err)
		_, err = ingest(ctx, spans)
		require.NoError(t, err)
		rows, err := pool.Query(ctx, `SELECT attributes::text, links::text, flags,
			COALESCE(strpos(attributes::text, 'interrupted') > 0 AND attributes->>'genkit:state' = 'interrupted', false),
			COALESCE(strpos(links::text, '"loupe.link.type"') > 0 AND strpos(links::text, '"resume"') > 0
				AND json_typeof(links) = 'array'
				AND EXISTS (SELECT 1 FROM json_array_elements(links) l
					WHERE json_typeof(l) = 'object' AND l->'attributes'->>'loupe.link.type' = 'resume'), false)
			FROM spans ORDER BY span_id`)
		require.NoError(t, err)
		seen := 0
		for rows.Next() {
			var a, l string
			var flags int16
			var sqlInterrupted, sqlResumes bool
			require.NoError(t, rows.Scan(&a, &l, &flags, &sqlInterrupted, &sqlResumes))
			require.Equal(t, sqlInterrupted, flags&1 != 0, "interrupted: %s", a)
			require.Equal(t, sqlResumes, flags&2 != 0, "resumes: %s", l)
			seen++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, len(spans), seen)
	}
}

// TestTheListReadsNoSpans lists traces, a 2,000-span one among them, with and without the failed
// and interrupted filters, and checks from PostgreSQL's own counters that no span was read: each
// listed trace's failed count and interrupted status come from its summary row. They were read
// from its spans, and a 10,000-span trace among the 50 newest cost the list ~70 ms.
func TestTheListReadsNoSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	const big, stopped, failed = "000000000000000000000000000000b1", "000000000000000000000000000000b2", "000000000000000000000000000000b3"
	spans := []store.Span{
		{TraceID: stopped, SpanID: "00000000000000b2", Name: "flow", StartTime: 90_000, EndTime: 90_009},
		{TraceID: stopped, SpanID: "00000000000000c2", ParentSpanID: ptr("00000000000000b2"), Name: "tool", StartTime: 90_002, EndTime: 90_003,
			Attributes: json.RawMessage(`{"genkit:state":"interrupted"}`)},
		{TraceID: failed, SpanID: "00000000000000b3", Name: "flow", StartTime: 80_000, EndTime: 80_009},
		{TraceID: failed, SpanID: "00000000000000c3", ParentSpanID: ptr("00000000000000b3"), Name: "tool", StartTime: 80_002, EndTime: 80_003,
			StatusCode: store.StatusError},
	}
	for i := range 2000 {
		sp := store.Span{TraceID: big, SpanID: fmt.Sprintf("%016x", i+1), Name: "tool", StartTime: int64(10_000 + i), EndTime: int64(10_010 + i),
			Attributes: json.RawMessage(`{"genkit:type":"action","genkit:output":"not interrupted"}`)}
		if i > 0 {
			sp.ParentSpanID = ptr(fmt.Sprintf("%016x", 1))
		}
		spans = append(spans, sp)
	}
	_, err := s.SpanIngest(ctx, spans)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE spans`)
	require.NoError(t, err)
	reads := func() int64 {
		return tableReads(t, pool, "COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0)", "spans")["spans"]
	}
	before := reads()
	list := func(filters ...store.TraceFilter) map[string]store.Trace {
		items, _, err := s.TraceList(ctx, store.TraceListParams{Limit: 10, Filters: filters})
		require.NoError(t, err)
		out := map[string]store.Trace{}
		for _, it := range items {
			out[it.TraceID] = it.Trace
		}
		return out
	}
	all := list()
	require.Len(t, all, 3)
	require.True(t, all[stopped].Interrupted)
	failedTrace := all[failed]
	require.False(t, all[big].Interrupted)
	require.Equal(t, 1, all[failed].ErrorSpans)
	require.True(t, failedTrace.Failed())
	require.Zero(t, all[big].ErrorSpans)
	eq := func(field string) store.TraceFilter {
		return store.TraceFilter{Field: field, Op: store.FilterEq, Value: true}
	}
	require.Equal(t, []string{stopped}, keys(list(eq(store.TraceFieldInterrupted))))
	require.Equal(t, []string{failed}, keys(list(eq(store.TraceFieldFailed))))
	require.Equal(t, before, reads(), "the list read spans")
}

func keys(m map[string]store.Trace) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestMigration59CountsTheSpansStoredBeforeIt: rolled back and applied again, migration 00059
// gives the spans already stored the flags ingest gave them, and their traces the counts ingest
// kept.
func TestMigration59CountsTheSpansStoredBeforeIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	s := store.New(pool)
	var spans []store.Span
	for tr := range 3 {
		traceID := fmt.Sprintf("%032x", 0xe000+tr)
		for i := range 6 {
			sp := store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", i+1), Name: "s", StartTime: 1, EndTime: 2}
			if i > 0 {
				sp.ParentSpanID = ptr(fmt.Sprintf("%016x", 1))
			}
			switch (i + tr) % 4 {
			case 1:
				sp.StatusCode = store.StatusError
			case 2:
				sp.Attributes = json.RawMessage(`{"genkit:state":"interrupted"}`)
			case 3:
				sp.Links = json.RawMessage(`[{"trace_id":"` + traceID + `","span_id":"0000000000000001","attributes":{"loupe.link.type":"resume"}}]`)
			}
			spans = append(spans, sp)
		}
	}
	_, err := s.SpanIngest(ctx, spans)
	require.NoError(t, err)
	state := func() string {
		t.Helper()
		var out string
		require.NoError(t, pool.QueryRow(ctx, `SELECT
			(SELECT string_agg(concat_ws(' ', trace_id, error_spans, interrupted_spans, resume_spans), ',' ORDER BY trace_id) FROM traces)
			|| ' / ' || (SELECT string_agg(concat_ws(' ', trace_id, span_id, flags), ',' ORDER BY trace_id, span_id) FROM spans)`).Scan(&out))
		return out
	}
	want := state()
	require.Contains(t, want, fmt.Sprintf("%032x 2 1 1", 0xe000), "the first trace's counts as ingest kept them")
	require.NoError(t, store.MigrateDownTo(ctx, pool, 58)) // 00061 and 00060, span partitions; 00059
	var cols int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name IN ('spans', 'traces') AND column_name IN ('flags', 'error_spans')`).Scan(&cols))
	require.Zero(t, cols, "rolled back")
	applied, err := store.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []int64{59, 60, 61}, applied)
	require.Equal(t, want, state())
}
