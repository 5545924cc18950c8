package trace

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// A waterfall drawn to the wall clock is unreadable when a run waited for a person: 17 s of
// waiting beside 50 ms of work leaves the work as 1-px slivers. The timeline folds each long
// stretch in which no span of the trace was open to a fixed width, marked and labelled ("waited
// 17 s for a reviewer"), and draws the rest to scale.

// FoldMin is the shortest idle stretch that is folded; shorter ones are drawn to scale.
const FoldMin = time.Second

const (
	// foldShare is how much of the trace's wall time a stretch must take to be folded: a folded
	// gap is drawn gapWidth wide, so folding a smaller one would not make the rest any wider.
	foldShare = 0.08
	// axisWidth is the folded axis' length, in the waterfall's units (its viewBox).
	axisWidth = 1000.0
	// gapWidth is a folded gap's width on the axis, while the gaps take at most maxGapsWidth.
	gapWidth     = 40.0
	maxGapsWidth = 300.0
	// maxGaps caps the folded gaps of a trace: the longest are folded.
	maxGaps = 50
)

// Timeline is a trace's time axis as the waterfall draws it, from Start to End (unix ns), 1000
// units long, with its long idle stretches folded.
type Timeline struct {
	Start, End int64
	Gaps       []Gap
	// scale is units per ns of unfolded time; gapW a folded gap's width.
	scale, gapW float64
}

// Gap is a folded stretch of a trace in which no span was open.
type Gap struct {
	Start, End int64
	// Reviewer is a gap after an interrupt: the run waited for a person to answer it.
	Reviewer bool
	// X and W place the gap on the folded axis.
	X, W float64
}

// Label says what the gap was: "waited 17 s for a reviewer", or "nothing ran for 4 min 05 s".
func (g Gap) Label() string {
	d := FormatWait(g.End - g.Start)
	if g.Reviewer {
		return "waited " + d + " for a reviewer"
	}
	return "nothing ran for " + d
}

// FormatWait renders a wait for people: "1.5 s", "17 s", "4 min 05 s", "2 h 03 min".
func FormatWait(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
}

// BuildTimeline folds the idle stretches of a trace whose axis runs from start to end; a span
// without an end is open until end. A stretch is a reviewer's wait when a span in the work before
// it (since the previous folded gap) ended interrupted (genkit:state).
func BuildTimeline(facts []store.SpanTurnFacts, start, end int64) *Timeline {
	tl := &Timeline{Start: start, End: max(end, start+1)}
	type iv struct {
		s, e        int64
		interrupted bool
	}
	ivs := make([]iv, 0, len(facts))
	for i := range facts {
		f := &facts[i]
		e := f.EndTime
		if e == 0 {
			e = tl.End
		}
		ivs = append(ivs, iv{f.StartTime, max(e, f.StartTime), deref(f.State) == "interrupted"})
	}
	slices.SortFunc(ivs, func(a, b iv) int { return cmp.Compare(a.s, b.s) })
	wall := tl.End - tl.Start
	minGap := max(int64(FoldMin), int64(float64(wall)*foldShare))
	var gaps []Gap
	interrupted := false
	for k := 0; k < len(ivs); {
		segEnd := ivs[k].e
		for ; k < len(ivs) && ivs[k].s <= segEnd; k++ {
			segEnd = max(segEnd, ivs[k].e)
			interrupted = interrupted || ivs[k].interrupted
		}
		if k < len(ivs) && ivs[k].s-segEnd >= minGap {
			gaps = append(gaps, Gap{Start: segEnd, End: ivs[k].s, Reviewer: interrupted})
			interrupted = false
		}
	}
	if len(gaps) > maxGaps {
		slices.SortFunc(gaps, func(a, b Gap) int { return cmp.Compare(b.End-b.Start, a.End-a.Start) })
		gaps = gaps[:maxGaps]
		slices.SortFunc(gaps, func(a, b Gap) int { return cmp.Compare(a.Start, b.Start) })
	}
	folded := int64(0)
	for _, g := range gaps {
		folded += g.End - g.Start
	}
	if len(gaps) > 0 {
		tl.gapW = min(gapWidth, maxGapsWidth/float64(len(gaps)))
	}
	if rest := wall - folded; rest > 0 {
		tl.scale = (axisWidth - tl.gapW*float64(len(gaps))) / float64(rest)
	}
	tl.Gaps = gaps
	for i := range tl.Gaps {
		tl.Gaps[i].X = tl.Pos(gaps[i].Start)
		tl.Gaps[i].W = tl.gapW
	}
	return tl
}

// Pos is where time t (unix ns) falls on the folded axis, from 0 to 1000.
func (tl *Timeline) Pos(t int64) float64 {
	t = min(max(t, tl.Start), tl.End)
	x, prev := 0.0, tl.Start
	for _, g := range tl.Gaps {
		if t <= g.Start {
			break
		}
		x += float64(g.Start-prev) * tl.scale
		if t < g.End {
			return x + tl.gapW*float64(t-g.Start)/float64(g.End-g.Start)
		}
		x += tl.gapW
		prev = g.End
	}
	return x + float64(t-prev)*tl.scale
}

// Points are the folded axis' breakpoints as [unit, ns from Start] pairs, from [0, 0] to [1000,
// End-Start]: between two of them the axis is linear, so a script can map a time to a place and
// back.
func (tl *Timeline) Points() [][2]float64 {
	pts := [][2]float64{{0, 0}}
	for _, g := range tl.Gaps {
		pts = append(pts, [2]float64{g.X, float64(g.Start - tl.Start)}, [2]float64{g.X + g.W, float64(g.End - tl.Start)})
	}
	return append(pts, [2]float64{axisWidth, float64(tl.End - tl.Start)})
}

// GapAfter is the first reviewer's wait that starts at or after t, for an interrupted span that
// ended at t: its wait runs to the gap's end.
func (tl *Timeline) GapAfter(t int64) (Gap, bool) {
	for _, g := range tl.Gaps {
		if g.Reviewer && g.Start >= t {
			return g, true
		}
	}
	return Gap{}, false
}

// SelfTimes is each span's own time: its duration less the time in which a span inside it (a
// child in the trace, wherever the display hangs it) was open, clipped to its own interval. A
// span without an end is open until end. Genkit nests each turn's generate in the previous one, so
// a turn's total runs to the end of the run while its own time is what it spent itself.
func SelfTimes(facts []store.SpanTurnFacts, end int64) []int64 {
	n := len(facts)
	idx := make(map[string]int, n)
	for i := range facts {
		idx[facts[i].SpanID] = i
	}
	interval := func(i int) (int64, int64) {
		e := facts[i].EndTime
		if e == 0 {
			e = end
		}
		return facts[i].StartTime, max(e, facts[i].StartTime)
	}
	kids := make([][]int, n)
	for i := range facts {
		if p := facts[i].ParentSpanID; p != nil {
			if j, ok := idx[*p]; ok && j != i {
				kids[j] = append(kids[j], i)
			}
		}
	}
	self := make([]int64, n)
	type iv struct{ s, e int64 }
	var ivs []iv
	for i := range facts {
		s, e := interval(i)
		self[i] = e - s
		if len(kids[i]) == 0 {
			continue
		}
		ivs = ivs[:0]
		for _, c := range kids[i] {
			cs, ce := interval(c)
			cs, ce = max(cs, s), min(ce, e)
			if ce > cs {
				ivs = append(ivs, iv{cs, ce})
			}
		}
		slices.SortFunc(ivs, func(a, b iv) int { return cmp.Compare(a.s, b.s) })
		covered, curS, curE := int64(0), int64(0), int64(-1)
		for _, v := range ivs {
			if curE < 0 || v.s > curE {
				if curE >= 0 {
					covered += curE - curS
				}
				curS, curE = v.s, v.e
			} else {
				curE = max(curE, v.e)
			}
		}
		if curE >= 0 {
			covered += curE - curS
		}
		self[i] -= covered
	}
	return self
}
