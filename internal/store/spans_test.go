package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

const testTraceID = "0af7651916cd43dd8448eb211c80319c"

func testSpan(spanID string, parent string, start, end int64) store.Span {
	sp := store.Span{TraceID: testTraceID, SpanID: spanID, Name: "span-" + spanID, Kind: 1,
		StartTime: start, EndTime: end, Attributes: json.RawMessage(`{"k":"v"}`), Source: store.SpanSourceGenkit}
	if parent != "" {
		sp.ParentSpanID = &parent
	}
	return sp
}

func TestSpanIngestMergesAStartAndItsEndInEitherOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)

	running := testSpan("b7ad6b7169203331", "", 100, 0)
	res, err := s.SpanIngest(ctx, []store.Span{running})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Inserted: 1}, res)
	tr, err := s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Zero(t, tr.EndTime, "a running root leaves the trace running")

	ended := testSpan("b7ad6b7169203331", "", 100, 250)
	ended.StatusCode = store.StatusError
	res, err = s.SpanIngest(ctx, []store.Span{ended})
	require.NoError(t, err)
	key := store.SpanKey{TraceID: testTraceID, SpanID: "b7ad6b7169203331"}
	require.Equal(t, store.SpanIngestResult{Updated: 1, Ended: []store.SpanKey{key}}, res, "the span ended here")

	// The end sent again replaces the stored copy, but the span had ended already.
	res, err = s.SpanIngest(ctx, []store.Span{ended})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Updated: 1}, res)

	// A start that arrives after its end is stale and must not un-end the span.
	res, err = s.SpanIngest(ctx, []store.Span{running})
	require.NoError(t, err)
	require.Equal(t, store.SpanIngestResult{Skipped: 1}, res)

	spans, err := s.SpansByTrace(ctx, testTraceID, 0)
	require.NoError(t, err)
	require.Len(t, spans, 1)
	require.EqualValues(t, 250, spans[0].EndTime)
	tr, err = s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Equal(t, 1, tr.SpanCount, "a merged span is counted once")
	require.EqualValues(t, 250, tr.EndTime)
	require.Equal(t, store.StatusError, tr.StatusCode)
	require.Equal(t, "span-b7ad6b7169203331", tr.DisplayName)
}

func TestSpanIngestMergesDuplicatesWithinOneBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	parent := testSpan("00f067aa0ba902b7", "", 10, 90)
	start := testSpan("1111111111111111", "00f067aa0ba902b7", 20, 0)
	end := testSpan("1111111111111111", "00f067aa0ba902b7", 20, 30)
	res, err := s.SpanIngest(ctx, []store.Span{end, parent, start})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Inserted)
	spans, err := s.SpansByTrace(ctx, testTraceID, 0)
	require.NoError(t, err)
	require.Len(t, spans, 2)
	require.EqualValues(t, 30, spans[1].EndTime, "the ended copy wins over the start within a batch")
}

func TestSpanIngestStagesLargeBatchesWithCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	spans := make([]store.Span, 0, 600)
	spans = append(spans, testSpan("aaaaaaaaaaaaaaaa", "", 1, 1000))
	for i := 1; i < 600; i++ {
		spans = append(spans, testSpan(fmt.Sprintf("%016x", i), "aaaaaaaaaaaaaaaa", int64(i), int64(i+1)))
	}
	res, err := s.SpanIngest(ctx, spans)
	require.NoError(t, err)
	require.EqualValues(t, 600, res.Inserted)
	// The same batch again updates every span, and adds none.
	res, err = s.SpanIngest(ctx, spans)
	require.NoError(t, err)
	require.EqualValues(t, 600, res.Updated)
	tr, err := s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Equal(t, 600, tr.SpanCount)
	require.Equal(t, "aaaaaaaaaaaaaaaa", *tr.RootSpanID)
}

func TestSpanIngestKeepsKnownRunIDsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	unknown := uuid.New()
	a := testSpan("aaaaaaaaaaaaaaaa", "", 1, 2)
	a.RunID = &run.ID
	b := testSpan("bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa", 1, 2)
	b.RunID = &unknown
	_, err = s.SpanIngest(ctx, []store.Span{a, b})
	require.NoError(t, err, "a run id that names no run must not fail the ingest")
	spans, err := s.SpansByTrace(ctx, testTraceID, 0)
	require.NoError(t, err)
	require.Equal(t, run.ID, *spans[0].RunID)
	require.Nil(t, spans[1].RunID)
	tr, err := s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Equal(t, run.ID, *tr.RunID)
}

func TestSpanIngestWithoutRootUsesSpanExtremes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	_, err := s.SpanIngest(ctx, []store.Span{testSpan("1111111111111111", "ffffffffffffffff", 50, 60)})
	require.NoError(t, err)
	_, err = s.SpanIngest(ctx, []store.Span{testSpan("2222222222222222", "ffffffffffffffff", 40, 70)})
	require.NoError(t, err)
	tr, err := s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Nil(t, tr.RootSpanID)
	require.EqualValues(t, 40, tr.StartTime)
	require.EqualValues(t, 70, tr.EndTime)
	require.Equal(t, 2, tr.SpanCount)

	_, err = s.SpanIngest(ctx, []store.Span{testSpan("ffffffffffffffff", "", 30, 80)})
	require.NoError(t, err)
	tr, err = s.TraceGet(ctx, testTraceID)
	require.NoError(t, err)
	require.Equal(t, "ffffffffffffffff", *tr.RootSpanID)
	require.Equal(t, "span-ffffffffffffffff", tr.DisplayName)
	require.EqualValues(t, 30, tr.StartTime)
	require.EqualValues(t, 80, tr.EndTime)
	require.Equal(t, 3, tr.SpanCount)
}

func TestSpanTurnFactsExtractsAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	sp := testSpan("aaaaaaaaaaaaaaaa", "", 1, 2)
	sp.Attributes = json.RawMessage(`{"loupe.turn.index":2,"gen_ai.request.model":"m","gen_ai.usage.input_tokens":7,"genkit:metadata:subtype":"model","genkit:output":"{\"usage\":{\"inputTokens\":3}"}`)
	_, err := s.SpanIngest(ctx, []store.Span{sp})
	require.NoError(t, err)
	facts, err := s.SpanTurnFactsByTrace(ctx, testTraceID)
	require.NoError(t, err)
	require.Len(t, facts, 1)
	require.Equal(t, "2", *facts[0].TurnIndex)
	require.Equal(t, "m", *facts[0].Model)
	require.Equal(t, "7", *facts[0].InputTokens)
	require.Nil(t, facts[0].ModelOutput, "gen_ai usage wins over Genkit's output, which is then not read")
}

func TestSpanIngestFastPathMatchesTheMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	// The same story into two traces: a large batch that mixes new spans with stored ones
	// (running spans that end, an ended span resent as running), once through the fast path
	// (SpanIngest on the pool) and once through the merge (SpanIngest inside a transaction).
	story := func(traceID string) (first, second []store.Span) {
		span := func(id, parent string, start, end int64) store.Span {
			sp := testSpan(id, parent, start, end)
			sp.TraceID = traceID
			return sp
		}
		for i := range 100 {
			first = append(first, span(fmt.Sprintf("%016x", i+1), "aaaaaaaaaaaaaaaa", int64(100+i), 0))
		}
		first = append(first, span("bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa", 5, 500))
		for i := range 100 {
			second = append(second, span(fmt.Sprintf("%016x", i+1), "aaaaaaaaaaaaaaaa", int64(100+i), int64(300+i)))
			second = append(second, span(fmt.Sprintf("%016x", 1000+i), "aaaaaaaaaaaaaaaa", int64(50+i), int64(60+i)))
		}
		second = append(second, span("bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa", 5, 0)) // stale start: skipped
		second = append(second, span("aaaaaaaaaaaaaaaa", "", 1, 900))
		return first, second
	}
	const fastID, mergeID = "0af7651916cd43dd8448eb211c800001", "0af7651916cd43dd8448eb211c800002"
	first, second := story(fastID)
	// Ended: the one span that came ended, then the 100 running that ended, the 100 new and the
	// root; not the stale start.
	ids := func(keys []store.SpanKey) []string {
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = k.SpanID
		}
		slices.Sort(out)
		return out
	}
	res, err := s.SpanIngest(ctx, first)
	require.NoError(t, err)
	require.Equal(t, []string{"bbbbbbbbbbbbbbbb"}, ids(res.Ended))
	res.Ended = nil
	require.Equal(t, store.SpanIngestResult{Inserted: 101}, res)
	res, err = s.SpanIngest(ctx, second)
	require.NoError(t, err)
	fastEnded := ids(res.Ended)
	require.Len(t, fastEnded, 201)
	require.NotContains(t, fastEnded, "bbbbbbbbbbbbbbbb")
	res.Ended = nil
	require.Equal(t, store.SpanIngestResult{Inserted: 101, Updated: 100, Skipped: 1}, res)

	first, second = story(mergeID)
	require.NoError(t, s.WithTx(ctx, func(tx *store.Store) error {
		if _, err := tx.SpanIngest(ctx, first); err != nil {
			return err
		}
		res, err := tx.SpanIngest(ctx, second)
		require.Equal(t, fastEnded, ids(res.Ended), "the merge reports the same spans ended")
		return err
	}))

	fast, err := s.TraceGet(ctx, fastID)
	require.NoError(t, err)
	merged, err := s.TraceGet(ctx, mergeID)
	require.NoError(t, err)
	require.Equal(t, 202, fast.SpanCount)
	require.EqualValues(t, 900, fast.EndTime)
	fast.TraceID, fast.UpdatedAt = merged.TraceID, merged.UpdatedAt
	require.Equal(t, merged, fast, "the fast path folds the summary exactly as the merge does")

	fastSpans, err := s.SpansByTrace(ctx, fastID, 0)
	require.NoError(t, err)
	mergedSpans, err := s.SpansByTrace(ctx, mergeID, 0)
	require.NoError(t, err)
	require.Len(t, fastSpans, 202)
	for i := range fastSpans {
		fastSpans[i].TraceID = mergeID
	}
	require.Equal(t, mergedSpans, fastSpans)
	for _, sp := range fastSpans {
		if sp.SpanID == "bbbbbbbbbbbbbbbb" {
			require.EqualValues(t, 500, sp.EndTime, "a stale start never un-ends a span")
		}
	}
}

// TestSpanSkeletonsReadNoPayloads: a skeleton has every column but the payloads, their stored
// size instead, and whether genkit:state is "interrupted", whatever shape the attributes have.
func TestSpanSkeletonsReadNoPayloads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	cases := map[string]bool{ // attributes -> interrupted
		`{"genkit:state" : "interrupted", "x": 1}`:        true,
		`{"genkit:state":"success","note":"interrupted"}`: false,
		`{"genkit:state":{"v":"interrupted"}}`:            false,
		`["interrupted"]`:                                 false,
		`"interrupted"`:                                   false,
		`{}`:                                              false,
	}
	var spans []store.Span
	want := map[string]bool{}
	i := 0
	for attrs, interrupted := range cases {
		sp := testSpan(fmt.Sprintf("%016x", i+1), "", int64(10+i), int64(20+i))
		sp.Attributes = json.RawMessage(attrs)
		spans = append(spans, sp)
		want[sp.SpanID] = interrupted
		i++
	}
	_, err := s.SpanIngest(ctx, spans)
	require.NoError(t, err)
	full, err := s.SpansByTrace(ctx, testTraceID, 0)
	require.NoError(t, err)
	sks, err := s.SpanSkeletonsByTrace(ctx, testTraceID, 0)
	require.NoError(t, err)
	require.Len(t, sks, len(cases))
	for i, sk := range sks {
		sp := full[i]
		require.Equal(t, want[sk.SpanID], sk.Interrupted, string(sp.Attributes))
		require.EqualValues(t, len(sp.Attributes)+len(sp.Events)+len(sp.Links)+len(sp.Resource), sk.PayloadBytes)
		sk.PayloadBytes, sk.Interrupted = 0, false
		sp.Attributes, sp.Events, sp.Links, sp.Resource = nil, nil, nil, nil
		require.Equal(t, sp, sk.Span, "everything but the payloads, in the same order")
	}
}

// TestSpanIngestCopiesAwkwardTextExactly: spans whose text holds what COPY's text format escapes
// (backslashes, tabs, newlines, carriage returns, a lone \N) come back byte for byte, through the
// fast path (COPY straight into spans) and the staged merge (COPY into a staging table, with run
// ids), and an empty string stays an empty string while a missing parent stays NULL.
func TestSpanIngestCopiesAwkwardTextExactly(t *testing.T) {
	t.Parallel()
	require.Equal(t, store.SpanCopyFieldsAndColumns[1], store.SpanCopyFieldsAndColumns[0], "a COPY row has a field per column")
	ctx := context.Background()
	s := storetest.New(t)
	awkward := []string{`\N`, "a\tb\nc\rd\\e", `\\N`, "", `C:\temp\new`, "é 漢字 🙂", "tab\t"}
	build := func(traceID string, n int) []store.Span {
		spans := make([]store.Span, 0, n)
		for i := range n {
			w := awkward[i%len(awkward)]
			sp := store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", i+1), Name: w, Kind: 1,
				StartTime: int64(i + 1), EndTime: int64(i + 2), StatusMessage: w, Scope: w, ScopeVersion: w,
				Attributes: json.RawMessage(fmt.Sprintf(`{"k":%q,"nested":"{\"a\":\"b\\\\c\"}"}`, w)),
				Events:     json.RawMessage(`[{"name":"e\\te","time_unix_nano":1}]`),
				Resource:   json.RawMessage(`{"service.name":"svc\\nline"}`), Source: store.SpanSourceOTLP}
			if i > 0 {
				parent := fmt.Sprintf("%016x", 1)
				sp.ParentSpanID = &parent
			}
			spans = append(spans, sp)
		}
		return spans
	}
	check := func(traceID string, want []store.Span) {
		got, err := s.SpansByTrace(ctx, traceID, len(want))
		require.NoError(t, err)
		require.Len(t, got, len(want))
		byID := map[string]store.Span{}
		for _, sp := range got {
			byID[sp.SpanID] = sp
		}
		for _, w := range want {
			g := byID[w.SpanID]
			require.Equal(t, w.Name, g.Name)
			require.Equal(t, w.StatusMessage, g.StatusMessage)
			require.Equal(t, w.Scope, g.Scope)
			require.Equal(t, w.ScopeVersion, g.ScopeVersion)
			require.Equal(t, string(w.Attributes), string(g.Attributes))
			require.Equal(t, string(w.Events), string(g.Events))
			require.Equal(t, string(w.Resource), string(g.Resource))
			require.Equal(t, w.ParentSpanID, g.ParentSpanID)
		}
	}
	fast := build("0af7651916cd43dd8448eb211c80aaaa", 70) // at least fastThreshold, no run ids
	res, err := s.SpanIngest(ctx, fast)
	require.NoError(t, err)
	require.EqualValues(t, 70, res.Inserted)
	check("0af7651916cd43dd8448eb211c80aaaa", fast)

	staged := build("0af7651916cd43dd8448eb211c80bbbb", 30)
	res, err = s.SpanIngestCopy(ctx, staged)
	require.NoError(t, err)
	require.EqualValues(t, 30, res.Inserted)
	check("0af7651916cd43dd8448eb211c80bbbb", staged)
}

// TestAFailedFastIngestLeavesNoTransactionOpen: a batch the fast path's COPY refuses (an attribute
// that is not JSON) fails alone; its transaction is rolled back, no session stays idle in a
// transaction, and the next batches are stored.
func TestAFailedFastIngestLeavesNoTransactionOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	batch := func(traceID string, bad bool) []store.Span {
		spans := make([]store.Span, 0, 80)
		for i := range 80 {
			sp := testSpan(fmt.Sprintf("%016x", i+1), "", int64(i+1), int64(i+2))
			sp.TraceID = traceID
			if bad && i == 40 {
				sp.Attributes = json.RawMessage(`{"not json`)
			}
			spans = append(spans, sp)
		}
		return spans
	}
	_, err := s.SpanIngest(ctx, batch("0af7651916cd43dd8448eb211c80cccc", true))
	require.Error(t, err)
	var open int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&open))
	require.Zero(t, open, "no session left in a transaction")
	for i := range 5 {
		res, err := s.SpanIngest(ctx, batch(fmt.Sprintf("0af7651916cd43dd8448eb211c80dd%02d", i), false))
		require.NoError(t, err)
		require.EqualValues(t, 80, res.Inserted)
	}
	_, err = s.TraceGet(ctx, "0af7651916cd43dd8448eb211c80cccc")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing of the refused batch was stored")
}

// TestSpanIngestFoldCountsEachEndedSpanOnceOnEveryPath folds a model call's share per span
// stored ended, and the trace's service, on each path SpanIngestFold takes: the fast path with
// new spans only (the fold goes with the COMMIT), the fast path merging stored spans (the merge
// says which ended first), the arrays merge (small batches), and inside a caller's transaction.
// Each trace is sent as running spans, then as the same spans ended and resent, so every span is
// counted exactly once, and a rolled-back ingest folds nothing.
func TestSpanIngestFoldCountsEachEndedSpanOnceOnEveryPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	usage := func(traceID string) store.UsageFunc {
		return func(ended []store.SpanKey) ([]store.SpanUsage, []store.TraceService) {
			var out []store.SpanUsage
			for _, k := range ended {
				out = append(out, store.SpanUsage{TraceID: k.TraceID, SpanID: k.SpanID, Kind: "model", Model: "m", InputTokens: 10})
			}
			return out, []store.TraceService{{TraceID: traceID, Service: "svc"}}
		}
	}
	spans := func(traceID string, n int, ended bool) []store.Span {
		out := make([]store.Span, n)
		for i := range n {
			end := int64(0)
			if ended {
				end = int64(1000 + i)
			}
			out[i] = testSpan(fmt.Sprintf("%016x", i+1), "aaaaaaaaaaaaaaaa", int64(100+i), end)
			out[i].TraceID = traceID
		}
		return out
	}
	for name, n := range map[string]int{"fast": 100, "arrays": 10} {
		for _, inTx := range []bool{false, true} {
			traceID := fmt.Sprintf("0af7651916cd43dd8448eb211c8%02d%03d", len(name), n)
			if inTx {
				traceID = traceID[:31] + "f"
			}
			ingest := func(batch []store.Span) {
				if !inTx {
					_, err := s.SpanIngestFold(ctx, batch, usage(traceID))
					require.NoError(t, err, name)
					return
				}
				require.NoError(t, s.WithTx(ctx, func(tx *store.Store) error {
					_, err := tx.SpanIngestFold(ctx, batch, usage(traceID))
					return err
				}), name)
			}
			ingest(spans(traceID, n, false))
			tr, err := s.TraceGet(ctx, traceID)
			require.NoError(t, err)
			require.Zero(t, tr.ModelCalls, "%s: running spans have no share yet", name)
			require.Equal(t, "svc", tr.Service, "%s: the service is folded with the first spans", name)
			ingest(spans(traceID, n, true)) // they end: stored, so the fast path merges them
			ingest(spans(traceID, n, true)) // resent: nothing more to count
			tr, err = s.TraceGet(ctx, traceID)
			require.NoError(t, err)
			require.Equal(t, n, tr.ModelCalls, "%s (in a transaction: %v): each span counted once", name, inTx)
			require.EqualValues(t, 10*n, tr.InputTokens, name)
			require.Equal(t, "m", tr.Model, name)
			require.Equal(t, n, tr.SpanCount, name)
		}
	}
	// New spans only, on the fast path: the fold goes with the COMMIT.
	const fresh = "0af7651916cd43dd8448eb211c80fee1"
	_, err := s.SpanIngestFold(ctx, spans(fresh, 80, true), usage(fresh))
	require.NoError(t, err)
	tr, err := s.TraceGet(ctx, fresh)
	require.NoError(t, err)
	require.Equal(t, 80, tr.ModelCalls)
	// A refused batch folds nothing: its spans and its shares go together.
	const refused = "0af7651916cd43dd8448eb211c80fee2"
	bad := spans(refused, 80, true)
	bad[40].Attributes = json.RawMessage(`{"not json`)
	_, err = s.SpanIngestFold(ctx, bad, usage(refused))
	require.Error(t, err)
	_, err = s.TraceGet(ctx, refused)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestCopyBufferEstimateCoversEveryRow: copySpans sizes its buffer once from the spans; a row
// longer than the estimate would make it grow, copying the whole buffer, for every group.
func TestCopyBufferEstimateCoversEveryRow(t *testing.T) {
	t.Parallel()
	parent, run := "00f067aa0ba902b7", uuid.New()
	for _, sp := range []store.Span{
		{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b8"},
		{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b8", ParentSpanID: &parent, RunID: &run,
			Name: "n", Attributes: []byte(`{"a":1}`), Source: store.SpanSourceOTLP, Scope: "s"},
	} {
		written, estimate := store.CopyRowSize(&sp)
		require.LessOrEqual(t, written, estimate)
	}
}
