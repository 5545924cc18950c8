package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestTraceInterruptedIsAStatusOfItsOwn: a trace with an interrupted span is interrupted, and the
// filter finds it; a trace that went on in itself after its interrupt (Loupe's own resume, whose
// span links to the interrupted turn with loupe.link.type=resume) is not, nor is a plain one.
func TestTraceInterruptedIsAStatusOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	const stopped, resumed, plain = "000000000000000000000000000000a1", "000000000000000000000000000000a2", "000000000000000000000000000000a3"
	interrupted := json.RawMessage(`{"genkit:state":"interrupted"}`)
	_, err := s.SpanIngest(ctx, []store.Span{
		{TraceID: stopped, SpanID: "00000000000000a1", Name: "flow", StartTime: 1, EndTime: 9, Source: store.SpanSourceGenkit},
		{TraceID: stopped, SpanID: "00000000000000b1", ParentSpanID: ptr("00000000000000a1"), Name: "tool", StartTime: 2, EndTime: 3, Attributes: interrupted, Source: store.SpanSourceGenkit},
		{TraceID: resumed, SpanID: "00000000000000a2", Name: "flow", StartTime: 1, EndTime: 9},
		{TraceID: resumed, SpanID: "00000000000000b2", ParentSpanID: ptr("00000000000000a2"), Name: "tool", StartTime: 2, EndTime: 3, Attributes: interrupted},
		{TraceID: resumed, SpanID: "00000000000000c2", ParentSpanID: ptr("00000000000000a2"), Name: "flow", StartTime: 5, EndTime: 8,
			Links: json.RawMessage(`[{"trace_id":"` + resumed + `","span_id":"00000000000000a2","attributes":{"loupe.link.type":"resume"}}]`)},
		{TraceID: plain, SpanID: "00000000000000a3", Name: "flow", StartTime: 1, EndTime: 9},
	})
	require.NoError(t, err)
	for id, want := range map[string]bool{stopped: true, resumed: false, plain: false} {
		tr, err := s.TraceGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, tr.Interrupted, id)
	}
	items, _, err := s.TraceList(ctx, store.TraceListParams{Limit: 10,
		Filters: []store.TraceFilter{{Field: store.TraceFieldInterrupted, Op: store.FilterEq, Value: true}}})
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, stopped, items[0].TraceID)
	require.True(t, items[0].Interrupted)
	items, _, err = s.TraceList(ctx, store.TraceListParams{Limit: 10,
		Filters: []store.TraceFilter{{Field: store.TraceFieldInterrupted, Op: store.FilterNeq, Value: true}}})
	require.NoError(t, err)
	require.Len(t, items, 2)
	_, _, err = s.TraceList(ctx, store.TraceListParams{Limit: 10,
		Filters: []store.TraceFilter{{Field: store.TraceFieldInterrupted, Op: store.FilterEq, Value: "yes"}}})
	require.ErrorIs(t, err, store.ErrInvalidFilter)
}

func ptr(s string) *string { return &s }

// TestTraceRunIDFindsLinkedExecutions: the run_id filter finds a trace whose spans carry no run id
// (Genkit Go's) once an execution of the run has linked it, as well as one whose root carries
// loupe.run.id; a stale execution links nothing.
func TestTraceRunIDFindsLinkedExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	const goTrace, labelled, other = "000000000000000000000000000000c1", "000000000000000000000000000000c2", "000000000000000000000000000000c3"
	_, err = s.SpanIngest(ctx, []store.Span{
		{TraceID: goTrace, SpanID: "00000000000000c1", Name: "flow", StartTime: 1, EndTime: 9, Source: store.SpanSourceGenkit},
		{TraceID: labelled, SpanID: "00000000000000c2", Name: "flow", StartTime: 2, EndTime: 9, Source: store.SpanSourceGenkit,
			Attributes: json.RawMessage(`{"loupe.run.id":"` + run.ID.String() + `"}`), RunID: &run.ID}, // as ingest reads it
		{TraceID: other, SpanID: "00000000000000c3", Name: "flow", StartTime: 3, EndTime: 9, Source: store.SpanSourceGenkit},
	})
	require.NoError(t, err)
	list := func() []string {
		items, _, err := s.TraceList(ctx, store.TraceListParams{Limit: 10,
			Filters: []store.TraceFilter{{Field: store.TraceFieldRunID, Op: store.FilterEq, Value: run.ID.String()}}})
		require.NoError(t, err)
		var ids []string
		for _, it := range items {
			ids = append(ids, it.TraceID)
		}
		return ids
	}
	require.Equal(t, []string{labelled}, list())
	require.NoError(t, s.RunTraceAdd(ctx, store.Fence{RunID: run.ID, Epoch: run.LeaseEpoch + 7}, other), "a stale execution")
	require.NoError(t, s.RunTraceAdd(ctx, store.FenceOf(run), goTrace))
	require.NoError(t, s.RunTraceAdd(ctx, store.FenceOf(run), goTrace), "twice is once")
	require.ElementsMatch(t, []string{labelled, goTrace}, list())
	got, err := s.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, goTrace, *got.TraceID, "the first linked trace is the run's")
	_, _, err = s.TraceList(ctx, store.TraceListParams{Limit: 10,
		Filters: []store.TraceFilter{{Field: store.TraceFieldRunID, Op: store.FilterEq, Value: "nope"}}})
	require.ErrorIs(t, err, store.ErrInvalidFilter)
}
