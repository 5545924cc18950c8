package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// seedTraces stores n one-span traces; trace i starts at i*1000 and is named "even" or "odd".
func seedTraces(t *testing.T, s *store.Store, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var spans []store.Span
	for i := range n {
		ids[i] = fmt.Sprintf("%032x", i+1)
		name := "even"
		if i%2 == 1 {
			name = "odd"
		}
		sp := store.Span{TraceID: ids[i], SpanID: fmt.Sprintf("%016x", i+1), Name: name,
			StartTime: int64(i) * 1000, EndTime: int64(i)*1000 + 500, Source: store.SpanSourceOTLP,
			Attributes: json.RawMessage(fmt.Sprintf(`{"genkit:type":"action","n":%d,"tag":"t%d"}`, i, i%3))}
		if i == 3 {
			sp.StatusCode = store.StatusError
		}
		spans = append(spans, sp)
	}
	_, err := s.SpanIngest(context.Background(), spans)
	require.NoError(t, err)
	return ids
}

func TestTraceListPagesNewestFirstWithoutGapsOrRepeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	ids := seedTraces(t, s, 25)
	var seen []string
	var after *store.TraceCursor
	for {
		items, next, err := s.TraceList(ctx, store.TraceListParams{Limit: 10, After: after})
		require.NoError(t, err)
		for _, it := range items {
			seen = append(seen, it.TraceID)
		}
		if next == nil {
			break
		}
		cur, err := store.ParseTraceCursor(next.String())
		require.NoError(t, err)
		after = cur
	}
	require.Len(t, seen, 25)
	require.Equal(t, ids[24], seen[0])
	require.Equal(t, ids[0], seen[24])
}

func TestTraceListFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	ids := seedTraces(t, s, 10)
	count := func(filters ...store.TraceFilter) int {
		t.Helper()
		items, _, err := s.TraceList(ctx, store.TraceListParams{Filters: filters, WithRoot: true})
		require.NoError(t, err)
		for _, it := range items {
			require.NotNil(t, it.Root, "WithRoot returns the root span")
		}
		return len(items)
	}
	f := func(field, op string, v any) store.TraceFilter {
		return store.TraceFilter{Field: field, Op: op, Value: v}
	}
	require.Equal(t, 5, count(f(store.TraceFieldName, store.FilterEq, "odd")))
	require.Equal(t, 5, count(f(store.TraceFieldName, store.FilterNeq, "odd")))
	require.Equal(t, 10, count(f(store.TraceFieldName, store.FilterEq, []any{"odd", "even"})))
	require.Equal(t, 5, count(f(store.TraceFieldName, store.FilterContains, "DD")))
	require.Equal(t, 1, count(f(store.TraceFieldStatus, store.FilterEq, int64(2))))
	require.Equal(t, 3, count(f(store.TraceFieldStart, store.FilterGte, int64(7000))))
	require.Equal(t, 2, count(f(store.TraceFieldStart, store.FilterLt, int64(2000))))
	require.Equal(t, 4, count(f(store.TraceFieldStart, store.FilterGt, int64(1000)), f(store.TraceFieldEnd, store.FilterLte, int64(5500))))
	require.Equal(t, 10, count(f(store.TraceFieldType, store.FilterEq, "action")))
	require.Equal(t, 4, count(f("tag", store.FilterEq, "t0")))
	require.Equal(t, 2, count(f("n", store.FilterGte, int64(8))))
	require.Equal(t, 1, count(f(store.TraceFieldID, store.FilterEq, ids[4])))
	require.Equal(t, 10, count(f(store.TraceFieldRunning, store.FilterEq, false)))

	_, _, err := s.TraceList(ctx, store.TraceListParams{Filters: []store.TraceFilter{f(store.TraceFieldStart, "like", int64(1))}})
	require.ErrorIs(t, err, store.ErrInvalidFilter)
	_, _, err = s.TraceList(ctx, store.TraceListParams{Filters: []store.TraceFilter{f(store.TraceFieldStart, store.FilterEq, "soon")}})
	require.ErrorIs(t, err, store.ErrInvalidFilter)
}

func TestTraceGetNotFound(t *testing.T) {
	t.Parallel()
	_, err := storetest.New(t).TraceGet(context.Background(), testTraceID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestTraceDeleteBatchSparesInterruptedAndReferencedRuns proves retention's rules: old traces go,
// but never those of a run still interrupted, or of a run a replay or a fork refers to.
func TestTraceDeleteBatchSparesInterruptedAndReferencedRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	ids := seedTraces(t, s, 8) // all "old": starts 0..7000

	newRun := func(traceID string, status string) uuid.UUID {
		run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
		require.NoError(t, err)
		_, err = s.Pool().Exec(ctx, `UPDATE runs SET status = $2, trace_id = $3 WHERE id = $1`, run.ID, status, traceID)
		require.NoError(t, err)
		return run.ID
	}
	newRun(ids[0], store.RunInterrupted)
	replayed := newRun(ids[1], store.RunSucceeded)
	_, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a", ReplayOf: &replayed, ReplayMode: "exact"})
	require.NoError(t, err)
	forked := newRun(ids[2], store.RunSucceeded)
	turn := 1
	_, err = s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a", ForkOf: &forked, ForkTurn: &turn})
	require.NoError(t, err)
	newRun(ids[3], store.RunSucceeded) // finished and unreferenced: fair game

	var totalTraces, totalSpans int64
	for {
		tr, sp, err := s.TraceDeleteBatch(ctx, store.TraceDeleteParams{OlderThan: 6000, Limit: 2})
		require.NoError(t, err)
		if tr == 0 {
			break
		}
		totalTraces += tr
		totalSpans += sp
	}
	require.EqualValues(t, 3, totalTraces, "traces 3, 4, 5 are old and unprotected")
	require.EqualValues(t, 3, totalSpans)
	items, _, err := s.TraceList(ctx, store.TraceListParams{})
	require.NoError(t, err)
	var left []string
	for _, it := range items {
		left = append(left, it.TraceID)
	}
	require.ElementsMatch(t, []string{ids[0], ids[1], ids[2], ids[6], ids[7]}, left)

	// Keep at most 1 span: trace 7 holds it; 6 goes; 2, 1 and 0 are protected.
	cut, err := s.TraceSpanCutoff(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, &store.TraceCursor{StartTime: 6000, TraceID: ids[6]}, cut)
	none, err := s.TraceSpanCutoff(ctx, 5)
	require.ErrorIs(t, err, store.ErrNotFound, "5 spans are left: all fit")
	require.Nil(t, none)
	tr, sp, err := s.TraceDeleteBatch(ctx, store.TraceDeleteParams{Beyond: cut})
	require.NoError(t, err)
	require.EqualValues(t, 1, tr, "only trace 6 lies beyond the newest span and is unprotected")
	require.EqualValues(t, 1, sp)
	_, err = s.TraceGet(ctx, ids[6])
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestTraceWithAHugeRootNameIsStored ingests roots whose names are far longer than a B-tree entry
// may be, through the fast path (a large batch of new spans) and the merge path (a single span):
// the spans keep their whole names, the summaries keep DisplayNameMax characters, and an exact
// name filter with the whole name still finds the trace.
func TestTraceWithAHugeRootNameIsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	// 6,000 characters, about 10 KB, random so that PostgreSQL cannot compress the index entry.
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for range 3000 {
		b.WriteRune(rune('a' + rng.IntN(26)))
		b.WriteRune(rune(0x4e00 + rng.IntN(20000)))
	}
	long := b.String()
	batch := make([]store.Span, 100)
	for i := range batch {
		batch[i] = store.Span{TraceID: fmt.Sprintf("%032x", 0xa000+i), SpanID: fmt.Sprintf("%016x", 1+i),
			Name: long, StartTime: 1, EndTime: 2, Source: store.SpanSourceOTLP}
	}
	_, err := s.SpanIngest(ctx, batch)
	require.NoError(t, err, "fast path")
	_, err = s.SpanIngest(ctx, []store.Span{{TraceID: fmt.Sprintf("%032x", 0xb000), SpanID: fmt.Sprintf("%016x", 0xb000),
		Name: long, StartTime: 1, EndTime: 0, Source: store.SpanSourceGenkit}})
	require.NoError(t, err, "merge path")

	tr, err := s.TraceGet(ctx, fmt.Sprintf("%032x", 0xb000))
	require.NoError(t, err)
	require.Equal(t, store.TruncateDisplayName(long), tr.DisplayName)
	require.Equal(t, store.DisplayNameMax, utf8.RuneCountInString(tr.DisplayName))
	spans, err := s.SpansByTrace(ctx, fmt.Sprintf("%032x", 0xa000), 1)
	require.NoError(t, err)
	require.Equal(t, long, spans[0].Name, "the span keeps its whole name")
	items, _, err := s.TraceList(ctx, store.TraceListParams{Limit: 1000,
		Filters: []store.TraceFilter{{Field: store.TraceFieldName, Op: store.FilterEq, Value: long}}})
	require.NoError(t, err)
	require.Len(t, items, 101)
}

// TestTraceListFiltersByRunAndDuration proves the run and duration filters: a run's traces are
// found by the summary's run_id (whatever its root's attributes say), and a trace's duration runs
// from its start to the latest end of any of its spans.
func TestTraceListFiltersByRunAndDuration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	root := "00000000000000a1"
	_, err = s.SpanIngest(ctx, []store.Span{
		{TraceID: fmt.Sprintf("%032x", 100), SpanID: root, Name: "flow", StartTime: 1000, EndTime: 2000, Source: store.SpanSourceLoupe},
		// The child outlasts its root: the trace lasts 5,000 ns, and it is the child that names the run.
		{TraceID: fmt.Sprintf("%032x", 100), SpanID: "00000000000000a2", ParentSpanID: &root, Name: "tool", StartTime: 1500, EndTime: 6000,
			Source: store.SpanSourceLoupe, RunID: &run.ID},
		{TraceID: fmt.Sprintf("%032x", 101), SpanID: "00000000000000b1", Name: "other", StartTime: 1000, EndTime: 1300, Source: store.SpanSourceLoupe,
			Attributes: json.RawMessage(`{"loupe.run.id":"` + run.ID.String() + `"}`)},
	})
	require.NoError(t, err)
	ids := func(filters ...store.TraceFilter) []string {
		t.Helper()
		items, _, err := s.TraceList(ctx, store.TraceListParams{Filters: filters})
		require.NoError(t, err)
		var out []string
		for _, it := range items {
			out = append(out, it.TraceID)
		}
		return out
	}
	f := func(field, op string, v any) store.TraceFilter {
		return store.TraceFilter{Field: field, Op: op, Value: v}
	}
	require.Equal(t, []string{fmt.Sprintf("%032x", 100)}, ids(f(store.TraceFieldRunID, store.FilterEq, run.ID.String())))
	require.Equal(t, []string{fmt.Sprintf("%032x", 101)}, ids(f(store.TraceFieldRunID, store.FilterNeq, run.ID.String())))
	require.Equal(t, []string{fmt.Sprintf("%032x", 100)}, ids(f(store.TraceFieldDuration, store.FilterGte, int64(5000))))
	require.Equal(t, []string{fmt.Sprintf("%032x", 101)}, ids(f(store.TraceFieldDuration, store.FilterLte, int64(4999))))
	require.Empty(t, ids(f(store.TraceFieldDuration, store.FilterGte, int64(301)), f(store.TraceFieldDuration, store.FilterLte, int64(4999))))

	_, _, err = s.TraceList(ctx, store.TraceListParams{Filters: []store.TraceFilter{f(store.TraceFieldRunID, store.FilterEq, "12")}})
	require.ErrorIs(t, err, store.ErrInvalidFilter)
	_, _, err = s.TraceList(ctx, store.TraceListParams{Filters: []store.TraceFilter{f(store.TraceFieldRunID, store.FilterContains, "12")}})
	require.ErrorIs(t, err, store.ErrInvalidFilter)
}
