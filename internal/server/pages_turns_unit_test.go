package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/trace"
)

// TestTurnRowsLeaveOutAGenerateThatCalledNothing: a generate span with no model call and no tool
// call (a resume with nothing left to do) gets no "turn 3 — 0 0 — 0µs" row; a turn still running,
// or one that failed before its model answered, keeps its row, and the others keep their numbers.
func TestTurnRowsLeaveOutAGenerateThatCalledNothing(t *testing.T) {
	t.Parallel()
	turns := []trace.Turn{
		{Index: 0, SpanID: "a", Model: "demo/travel", InputTokens: 10, OutputTokens: 3, DurationNS: 2e6},
		{Index: 1, SpanID: "b", ToolCalls: []trace.ToolCall{{Name: "bookFlight"}}, DurationNS: 1e6},
		{Index: 2, SpanID: "c"}, // the phantom
		{Index: 3, SpanID: "d", State: "error"},
		{Index: 4, SpanID: "e", Running: true},
	}
	rows := turnRows(turns, 0, "/traces/x?span=", false)
	var got []int
	for _, r := range rows {
		got = append(got, r.Index)
	}
	require.Equal(t, []int{0, 1, 3, 4}, got)
	require.Equal(t, "/traces/x?span=d", rows[2].Link)
}
