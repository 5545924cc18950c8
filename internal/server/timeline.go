package server

import (
	"strconv"

	"github.com/loupe-dev/loupe/internal/trace"
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
	f := &sk.facts[i]
	tl := sk.tl
	end = max(end, f.StartTime)
	row.X = tl.Pos(f.StartTime)
	row.S, row.E = f.StartTime-sk.axis0, end-sk.axis0
	// A turn that Genkit nested the next turn in is drawn solid up to that turn, then faint to its
	// end: its bar would otherwise run to the end of the run, as every earlier turn's does.
	if at, n := sk.nestedTurn(i); at > f.StartTime && at < end {
		x := tl.Pos(at)
		row.Tail = &templates.WaitBar{X: x, W: max(tl.Pos(end)-x, minBar), S: at - sk.axis0, E: end - sk.axis0,
			Label: "continues in turn " + strconv.Itoa(n) + ", which is nested in it"}
		end = at
		row.E = at - sk.axis0
	}
	row.W = max(tl.Pos(end)-row.X, minBar)
	row.Kind = sk.kind(i)
	if f.EndTime != 0 && (len(sk.children[i]) > 0 || sk.self[i] != f.EndTime-f.StartTime) {
		row.Self = fmtNanos(sk.self[i])
	}
	if row.Interrupted && f.EndTime != 0 {
		if g, ok := tl.GapAfter(f.EndTime); ok {
			x := tl.Pos(f.EndTime)
			row.Waits = append(row.Waits, templates.WaitBar{X: x, W: max(g.X+g.W-x, minBar),
				S: f.EndTime - sk.axis0, E: g.End - sk.axis0, Label: g.Label()})
		}
	}
}

// kind is what the span is, for its bar's colour: model, tool, turn, flow (a flow, an agent, a
// Genkit root action), or other.
func (sk *skeleton) kind(i int32) string {
	f := &sk.facts[i]
	switch k := trace.SpanKind(f); {
	case k == trace.KindModel:
		return "model"
	case k == trace.KindTurn || sk.turn[i] >= 0:
		return "turn"
	case k == trace.KindTool:
		return "tool"
	case k == trace.KindAgent, deref(f.Subtype) == "flow", deref(f.GenkitType) == "flow":
		return "flow"
	}
	return "other"
}

// timelineView is the axis for the page: its breakpoints, for timeline.js, and its folded gaps.
func (sk *skeleton) timelineView() templates.TimelineView {
	tl := sk.tl
	v := templates.TimelineView{}
	for _, g := range tl.Gaps {
		v.Gaps = append(v.Gaps, templates.TimelineGap{S: g.Start - sk.axis0, E: g.End - sk.axis0,
			X: g.X, W: g.W, Reviewer: g.Reviewer, Label: g.Label()})
	}
	v.JSON = string(mustJSON(struct {
		Len    int64        `json:"len"`
		Points [][2]float64 `json:"points"`
	}{tl.End - tl.Start, tl.Points()}))
	return v
}

// nestedTurn is when the first turn nested in span i (a child of it in the trace that the tree
// lifts beside it) starts, and its index; 0 when there is none.
func (sk *skeleton) nestedTurn(i int32) (int64, int) {
	if sk.turn[i] < 0 {
		return 0, 0
	}
	if sk.nested == nil {
		sk.nested = map[int32]int32{}
		for c := range sk.facts {
			if sk.turn[c] < 0 || sk.facts[c].ParentSpanID == nil {
				continue
			}
			p, ok := sk.idx[*sk.facts[c].ParentSpanID]
			if !ok || sk.turn[p] < 0 {
				continue
			}
			if old, seen := sk.nested[p]; !seen || sk.facts[c].StartTime < sk.facts[old].StartTime {
				sk.nested[p] = int32(c)
			}
		}
	}
	c, ok := sk.nested[i]
	if !ok {
		return 0, 0
	}
	return sk.facts[c].StartTime, sk.turn[c]
}
