package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// TestExpandAllStaysWithinItsBudget: "expand all" on a 5,101-span trace opens level by level and
// stops before the rows pass the budget, so the page never holds the whole trace.
func TestExpandAllStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	root := "r000000000000000"
	facts := []store.SpanTurnFacts{{SpanID: root, Name: "root", StartTime: 1, EndTime: 10}}
	for i := range 100 {
		mid := fmt.Sprintf("m%015d", i)
		facts = append(facts, store.SpanTurnFacts{SpanID: mid, ParentSpanID: &root, Name: "mid", StartTime: int64(2 + i), EndTime: 9})
		for j := range 50 {
			facts = append(facts, store.SpanTurnFacts{SpanID: fmt.Sprintf("l%07d%08d", i, j), ParentSpanID: &facts[len(facts)-1-j].SpanID, Name: "leaf", StartTime: 3, EndTime: 4})
		}
	}
	sk := buildSkeleton("t", facts, 100)
	rows := sk.rowsWindow(-1, 0, 0, 0, sk.OpenAll(-1, expandAllRows, childPage), -1)
	require.LessOrEqual(t, len(rows), expandAllRows+1, "within the budget (and a show-more row)")
	require.Greater(t, len(rows), expandAllRows/2, "the budget is used")
	small := sk.rowsWindow(-1, 0, 0, 0, sk.OpenAll(-1, 1_000_000, childPage), -1)
	require.Len(t, small, 1+100+100*50, "with room, every span is a row")
}
