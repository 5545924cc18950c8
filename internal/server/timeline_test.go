package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// TestSkeletonRowsOnTheFoldedTimeline: a run that waited 17 s for a reviewer between two
// executions is drawn on the folded axis (the work before the wait ends before the gap at 480,
// the resumed flow starts after it at 520, both to scale); the interrupted tool's row carries its
// wait to the end of the gap; each row has its kind, and a span with spans inside its own time.
func TestSkeletonRowsOnTheFoldedTimeline(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	ms := int64(time.Millisecond)
	t0 := time.Now().Add(-time.Hour).UnixNano()
	resume := t0 + 50*ms + 17*int64(time.Second)
	facts := []store.SpanTurnFacts{
		{SpanID: "root", Name: "travel", StartTime: t0, EndTime: t0 + 50*ms, GenkitType: s("action"), Subtype: s("flow")},
		{SpanID: "turn", ParentSpanID: s("root"), Name: "generate", StartTime: t0 + 10*ms, EndTime: t0 + 50*ms, GenkitType: s("util"), GenkitName: s("generate")},
		{SpanID: "model", ParentSpanID: s("turn"), Name: "demo/travel", StartTime: t0 + 10*ms, EndTime: t0 + 20*ms, Subtype: s("model")},
		{SpanID: "tool", ParentSpanID: s("turn"), Name: "bookFlight", StartTime: t0 + 20*ms, EndTime: t0 + 50*ms, Subtype: s("tool"), State: s("interrupted")},
		{SpanID: "resumed", ParentSpanID: s("turn"), Name: "travel", StartTime: resume, EndTime: resume + 50*ms, GenkitType: s("action"), Subtype: s("flow")},
	}
	sk := buildSkeleton("t", facts, resume+time.Hour.Nanoseconds())
	rows := sk.rows(-1, 0, 0, map[int32]bool{0: true, 1: true}, -1)
	byID := map[string]int{}
	for i, r := range rows {
		byID[r.ID] = i
	}
	require.Len(t, rows, 5)
	root, turn, model, tool, resumed := rows[byID["root"]], rows[byID["turn"]], rows[byID["model"]], rows[byID["tool"]], rows[byID["resumed"]]
	require.Equal(t, []string{"flow", "turn", "model", "tool", "flow"}, []string{root.Kind, turn.Kind, model.Kind, tool.Kind, resumed.Kind})
	require.InDelta(t, 0, root.X, 0.01)
	require.InDelta(t, 480, root.W, 0.01, "50 ms of work take the 480 units before the gap")
	require.InDelta(t, 520, resumed.X, 0.01, "the resumed flow starts after the 40-unit gap")
	require.InDelta(t, 480, resumed.W, 0.01)
	require.Equal(t, int64(0), root.S)
	require.Equal(t, resume-t0, resumed.S, "times for the script: ns from the trace's start")
	require.Equal(t, "10ms", root.Self, "the root's own time: 10 ms before the turn")
	require.Equal(t, "0µs", turn.Self, "the turn's children cover it (the resumed flow lies outside it)")
	require.Empty(t, model.Self, "a leaf has no own time apart from its total")
	require.Len(t, tool.Waits, 1)
	require.Equal(t, "waited 17 s for a reviewer", tool.Waits[0].Label)
	require.InDelta(t, 480, tool.Waits[0].X, 0.01)
	require.InDelta(t, 40, tool.Waits[0].W, 0.01, "the wait runs to the end of the gap")
	v := sk.timelineView()
	require.Len(t, v.Gaps, 1)
	require.True(t, v.Gaps[0].Reviewer)
	require.JSONEq(t, `{"len":17100000000,"points":[[0,0],[480,50000000],[520,17050000000],[1000,17100000000]]}`, v.JSON)
}

// TestSkeletonNestedTurnBarStopsAtTheNextTurn: Genkit nests turn 1 in turn 0; turn 0's bar is
// solid up to turn 1's start and faint from there to its end, and its own time excludes turn 1.
func TestSkeletonNestedTurnBarStopsAtTheNextTurn(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	ms := int64(time.Millisecond)
	t0 := time.Now().Add(-time.Hour).UnixNano()
	facts := []store.SpanTurnFacts{
		{SpanID: "root", Name: "flow", StartTime: t0, EndTime: t0 + 100*ms, GenkitType: s("action"), Subtype: s("flow")},
		{SpanID: "t0", ParentSpanID: s("root"), Name: "generate", StartTime: t0, EndTime: t0 + 100*ms, GenkitType: s("util"), GenkitName: s("generate")},
		{SpanID: "t1", ParentSpanID: s("t0"), Name: "generate", StartTime: t0 + 40*ms, EndTime: t0 + 100*ms, GenkitType: s("util"), GenkitName: s("generate")},
	}
	sk := buildSkeleton("t", facts, t0+2*time.Hour.Nanoseconds())
	rows := sk.rows(-1, 0, 0, map[int32]bool{0: true}, -1)
	require.Len(t, rows, 3, "turn 1 is lifted beside turn 0")
	turn0, turn1 := rows[1], rows[2]
	require.Equal(t, "turn 0", turn0.Label)
	require.InDelta(t, 400, turn0.W, 0.01, "solid up to turn 1")
	require.NotNil(t, turn0.Tail)
	require.InDelta(t, 400, turn0.Tail.X, 0.01)
	require.InDelta(t, 600, turn0.Tail.W, 0.01)
	require.Equal(t, "continues in turn 1, which is nested in it", turn0.Tail.Label)
	require.Equal(t, "40ms", turn0.Self)
	require.Equal(t, "100ms", turn0.Duration)
	require.Nil(t, turn1.Tail)
}
