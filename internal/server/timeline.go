package server

import (
	"strconv"

	"github.com/loupe-dev/loupe/web/templates"
)

// The waterfall's timeline (trace.Timeline): bars on an axis whose long idle stretches are folded,
// coloured by kind, each row with its span's own time beside its total. timeline.js draws the
// ruler, the folded gaps and the zoom from the same axis (data-timeline), and maps the bars'
// times (data-s, data-e: ns from the trace's start) to it.

// minBar is the narrowest bar, in axis units, so that a span of a few µs still shows.
const minBar = 1.5

// place sets a row's bar, kind, own time and, for a tool that interrupted, its wait for a
// reviewer; end is where the bar ends (the axis' end for a span still running).
func (sk *skeleton) place(row *templates.SpanRow, i int32, end int64) {
	f := &sk.Facts[i]
	tl := sk.Timeline
	end = max(end, f.StartTime)
	row.X = tl.Pos(f.StartTime)
	row.S, row.E = f.StartTime-sk.Axis0, end-sk.Axis0
	// A turn that Genkit nested the next turn in is drawn solid up to that turn, then faint to its
	// end: its bar would otherwise run to the end of the run, as every earlier turn's does.
	if at, n := sk.NestedTurn(i); at > f.StartTime && at < end {
		x := tl.Pos(at)
		row.Tail = &templates.WaitBar{X: x, W: max(tl.Pos(end)-x, minBar), S: at - sk.Axis0, E: end - sk.Axis0,
			Label: "continues in turn " + strconv.Itoa(n) + ", which is nested in it"}
		end = at
		row.E = at - sk.Axis0
	}
	row.W = max(tl.Pos(end)-row.X, minBar)
	row.Kind = sk.Kind(i)
	if f.EndTime != 0 && (len(sk.Children[i]) > 0 || sk.Self[i] != f.EndTime-f.StartTime) {
		row.Self = fmtNanos(sk.Self[i])
	}
	if row.Interrupted && f.EndTime != 0 {
		if g, ok := tl.GapAfter(f.EndTime); ok {
			x := tl.Pos(f.EndTime)
			row.Waits = append(row.Waits, templates.WaitBar{X: x, W: max(g.X+g.W-x, minBar),
				S: f.EndTime - sk.Axis0, E: g.End - sk.Axis0, Label: g.Label()})
		}
	}
}

// timelineView is the axis for the page: its breakpoints, for timeline.js, and its folded gaps.
func (sk *skeleton) timelineView() templates.TimelineView {
	tl := sk.Timeline
	v := templates.TimelineView{}
	for _, g := range tl.Gaps {
		v.Gaps = append(v.Gaps, templates.TimelineGap{S: g.Start - sk.Axis0, E: g.End - sk.Axis0,
			X: g.X, W: g.W, Reviewer: g.Reviewer, Label: g.Label()})
	}
	v.JSON = string(mustJSON(struct {
		Len    int64        `json:"len"`
		Points [][2]float64 `json:"points"`
	}{tl.End - tl.Start, tl.Points()}))
	return v
}
