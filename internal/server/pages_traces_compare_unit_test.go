package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// compareSkeleton is a skeleton of spans given as "id parent name" with start order by position.
func compareSkeleton(spans ...[3]string) *skeleton {
	facts := make([]store.SpanTurnFacts, len(spans))
	for i, s := range spans {
		facts[i] = store.SpanTurnFacts{SpanID: s[0], Name: s[2], StartTime: int64(1+i) * 1e6, EndTime: int64(100+i) * 1e6}
		if s[1] != "" {
			p := s[1]
			facts[i].ParentSpanID = &p
		}
	}
	return buildSkeleton("t", facts, time.Now().UnixNano())
}

// TestAlignTracesPlacesEachSidesOwnSpans: spans only B has come after the sibling they follow in
// B (or first, when none does), in B's order; spans only A has stay where A has them; children
// align under aligned parents only.
func TestAlignTracesPlacesEachSidesOwnSpans(t *testing.T) {
	a := compareSkeleton(
		[3]string{"1", "", "root"},
		[3]string{"2", "1", "plan"},
		[3]string{"3", "1", "search"},
		[3]string{"4", "3", "http"},
		[3]string{"5", "1", "answer"},
	)
	b := compareSkeleton(
		[3]string{"1", "", "root"},
		[3]string{"2", "1", "warm up"},
		[3]string{"3", "1", "plan"},
		[3]string{"4", "1", "search"},
		[3]string{"5", "1", "search"},
		[3]string{"6", "5", "http"},
		[3]string{"7", "1", "check"},
		[3]string{"8", "1", "answer"},
	)
	var got []string
	for _, r := range alignTraces(a, b) {
		side := "AB"
		switch {
		case r.a == nil:
			side = "B"
		case r.b == nil:
			side = "A"
		}
		got = append(got, fmt.Sprintf("%d %s#%d %s", r.depth, r.name, r.nth, side))
	}
	require.Equal(t, []string{
		"0 root#0 AB",
		"1 warm up#0 B", // before anything A has too
		"1 plan#0 AB",
		"1 search#0 AB",
		"2 http#0 A", // B's first search made no call; its second did
		"1 search#1 B",
		"2 http#0 B",
		"1 check#0 B",
		"1 answer#0 AB",
	}, got)
}
