package trace_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

func sp(s string) *string { return &s }

// skFact is a span fact for the skeleton's tests: id, parent ("" for none), start and end (ms).
func skFact(id, parent string, start, end int64) store.SpanTurnFacts {
	f := store.SpanTurnFacts{SpanID: id, Name: id, StartTime: start * 1e6, EndTime: end * 1e6}
	if parent != "" {
		f.ParentSpanID = sp(parent)
	}
	return f
}

// TestSkeletonLiftsTurnsAndPlacesOrphansLoopsAndErrors: a Genkit turn nested in the turn before
// is lifted beside it; a span whose parent is not in the trace is a root that says which parent
// it misses; two spans whose parents loop hang from the first root; the failed tool is where the
// error starts, its failed ancestors only contain it, and the failure names it.
func TestSkeletonLiftsTurnsAndPlacesOrphansLoopsAndErrors(t *testing.T) {
	turn := func(f store.SpanTurnFacts) store.SpanTurnFacts {
		f.GenkitType, f.GenkitName = sp("util"), sp("generate")
		return f
	}
	failed := func(f store.SpanTurnFacts, msg string) store.SpanTurnFacts {
		f.StatusCode, f.StatusMessage = store.StatusError, msg
		return f
	}
	tool := skFact("tool", "t1", 30, 40)
	tool.Name, tool.Subtype = "lookupOrder", sp("tool")
	facts := []store.SpanTurnFacts{
		failed(skFact("flow", "", 0, 100), "boom"),
		turn(skFact("t0", "flow", 10, 90)),
		failed(turn(skFact("t1", "t0", 20, 90)), "boom"),
		failed(tool, "no such order"),
		skFact("stray", "gone", 50, 60),
		skFact("loopA", "loopB", 61, 62),
		skFact("loopB", "loopA", 63, 64),
	}
	sk := trace.BuildSkeleton("t", facts, 200*1e6, time.Minute)
	at := func(id string) int32 { return sk.Index[id] }
	flow, t0, t1 := at("flow"), at("t0"), at("t1")

	require.Equal(t, flow, sk.Parent[t1], "a turn nested in a turn hangs beside it")
	require.Equal(t, []int32{t0, t1, at("loopA"), at("loopB")}, sk.Children[flow])
	require.Equal(t, []int32{flow, at("stray")}, sk.Roots)
	require.Equal(t, "gone", sk.Missing[at("stray")])
	require.Equal(t, []int{0, 1}, []int{sk.Turn[t0], sk.Turn[t1]})
	require.Equal(t, "turn 1", sk.Label(t1))
	require.Equal(t, "tool", sk.Label(at("tool")))

	require.True(t, sk.OwnError[at("tool")])
	require.False(t, sk.OwnError[t1], "its red only repeats the tool's")
	require.True(t, sk.InnerError[t1] && sk.InnerError[flow])
	i, msg := sk.Failure()
	require.Equal(t, at("tool"), i)
	require.Equal(t, "tool lookupOrder failed: no such order", msg)

	at90, n := sk.NestedTurn(t0)
	require.Equal(t, int64(20*1e6), at90)
	require.Equal(t, 1, n)
	require.False(t, sk.Running)
}

// TestSkeletonLiftsADeepChainOfNestedTurns: Genkit nests every turn in the one before; a
// 2,000-turn chain hangs, turn by turn, from the flow, and a loop of turns is placed under the
// first root instead of being lost.
func TestSkeletonLiftsADeepChainOfNestedTurns(t *testing.T) {
	facts := []store.SpanTurnFacts{skFact("flow", "", 0, 1e6)}
	parent := "flow"
	for i := range 2000 {
		id := "t" + strconv.Itoa(i)
		f := skFact(id, parent, int64(i+1), 1e6)
		f.GenkitType, f.GenkitName = sp("util"), sp("generate")
		facts = append(facts, f)
		parent = id
	}
	for _, l := range [][2]string{{"la", "lb"}, {"lb", "la"}} {
		f := skFact(l[0], l[1], 1e6+1, 1e6+2)
		f.GenkitType, f.GenkitName = sp("util"), sp("generate")
		facts = append(facts, f)
	}
	sk := trace.BuildSkeleton("t", facts, 2e12, time.Minute)
	flow := sk.Index["flow"]
	require.Len(t, sk.Children[flow], 2002, "every turn beside the others, and the loop's two")
	for i := 1; i <= 2000; i++ {
		require.Equal(t, flow, sk.Parent[i])
	}
	require.Equal(t, []int32{flow}, sk.Roots)
}
