package trace_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

func fact(id, parent string, start, end int64) store.SpanTurnFacts {
	f := store.SpanTurnFacts{SpanID: id, Name: id, StartTime: start, EndTime: end}
	if parent != "" {
		f.ParentSpanID = &parent
	}
	return f
}

const ms = int64(time.Millisecond)

// TestSelfTimesSubtractTheUnionOfChildren: a span's own time is its duration less the union of
// its children's intervals (overlapping children count once, a child sticking out of its parent
// counts only inside it), Genkit's nested turns included; a leaf's own time is its duration.
func TestSelfTimesSubtractTheUnionOfChildren(t *testing.T) {
	t.Parallel()
	facts := []store.SpanTurnFacts{
		fact("root", "", 0, 100*ms),
		fact("a", "root", 10*ms, 40*ms),
		fact("b", "root", 30*ms, 50*ms),  // overlaps a: a ∪ b is 10..50
		fact("c", "root", 90*ms, 120*ms), // past the root's end: only 90..100 counts
		fact("leaf", "a", 20*ms, 25*ms),
		fact("open", "b", 45*ms, 0), // no end: open until the axis' end (200ms), clipped to b
	}
	self := trace.SelfTimes(facts, 200*ms)
	require.Equal(t, []int64{50 * ms, 25 * ms, 15 * ms, 30 * ms, 5 * ms, 155 * ms}, self)
}

// TestTimelineFoldsAReviewersWait: a run that worked 50 ms, waited 17 s for a reviewer after an
// interrupted tool, then worked 50 ms more: the wait is one folded gap labelled "waited 17 s for a
// reviewer", a fixed 4% of the axis, and the work on either side takes the rest, drawn to scale.
func TestTimelineFoldsAReviewersWait(t *testing.T) {
	t.Parallel()
	t0 := time.Now().UnixNano()
	interrupted := "interrupted"
	tool := fact("tool", "turn", t0+20*ms, t0+50*ms)
	tool.State = &interrupted
	resume := t0 + 50*ms + 17*int64(time.Second)
	facts := []store.SpanTurnFacts{
		fact("root", "", t0, t0+50*ms),
		fact("turn", "root", t0+10*ms, t0+50*ms),
		tool,
		fact("resumed", "turn", resume, resume+50*ms),
	}
	tl := trace.BuildTimeline(facts, t0, resume+50*ms)
	require.Len(t, tl.Gaps, 1)
	g := tl.Gaps[0]
	require.True(t, g.Reviewer)
	require.Equal(t, "waited 17 s for a reviewer", g.Label())
	require.Equal(t, t0+50*ms, g.Start)
	require.Equal(t, resume, g.End)
	require.InDelta(t, 40, g.W, 0.001)
	require.InDelta(t, 480, g.X, 0.001, "the 50 ms before the wait take half of the 960 units left")
	require.InDelta(t, 0, tl.Pos(t0), 0.001)
	require.InDelta(t, 96, tl.Pos(t0+10*ms), 0.001, "to scale: 10 ms is 96 units")
	require.InDelta(t, 520, tl.Pos(resume), 0.001)
	require.InDelta(t, 500, tl.Pos(resume-17*int64(time.Second)/2), 0.001, "inside the gap, linear across its width")
	require.InDelta(t, 1000, tl.Pos(resume+50*ms), 0.001)
	require.Equal(t, [][2]float64{{0, 0}, {480, float64(50 * ms)}, {520, float64(resume - t0)}, {1000, float64(resume + 50*ms - t0)}}, tl.Points())
	wait, ok := tl.GapAfter(tool.EndTime)
	require.True(t, ok)
	require.Equal(t, g, wait)
}

// TestTimelineLeavesShortOrSmallGapsToScale: a gap under a second, or one that is a small share
// of a long trace, is not folded; an idle stretch without an interrupt before it says "nothing
// ran"; a span without an end keeps the trace busy to the end.
func TestTimelineLeavesShortOrSmallGapsToScale(t *testing.T) {
	t.Parallel()
	sec := int64(time.Second)
	short := trace.BuildTimeline([]store.SpanTurnFacts{fact("a", "", 0, 10*ms), fact("b", "", 900*ms, 910*ms)}, 0, 910*ms)
	require.Empty(t, short.Gaps, "under FoldMin")
	require.InDelta(t, 500, short.Pos(455*ms), 0.001, "no gap: linear")
	small := trace.BuildTimeline([]store.SpanTurnFacts{fact("a", "", 0, 50*sec), fact("b", "", 52*sec, 100*sec)}, 0, 100*sec)
	require.Empty(t, small.Gaps, "2 s of 100 s is drawn to scale")
	idle := trace.BuildTimeline([]store.SpanTurnFacts{fact("a", "", 0, sec), fact("b", "", 9*sec, 10*sec)}, 0, 10*sec)
	require.Len(t, idle.Gaps, 1)
	require.False(t, idle.Gaps[0].Reviewer)
	require.Equal(t, "nothing ran for 8.0 s", idle.Gaps[0].Label())
	open := trace.BuildTimeline([]store.SpanTurnFacts{fact("root", "", 0, 0), fact("a", "root", 0, sec), fact("b", "root", 9*sec, 10*sec)}, 0, 10*sec)
	require.Empty(t, open.Gaps, "the open root spans the whole trace")
}

func TestFormatWait(t *testing.T) {
	t.Parallel()
	for ns, want := range map[time.Duration]string{
		1500 * time.Millisecond:                   "1.5 s",
		17*time.Second + 300*time.Millisecond:     "17 s",
		4*time.Minute + 5*time.Second:             "4 min 05 s",
		2*time.Hour + 3*time.Minute + time.Second: "2 h 03 min",
	} {
		require.Equal(t, want, trace.FormatWait(int64(ns)))
	}
}
