package server

import (
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
	row.W = max(tl.Pos(end)-row.X, minBar)
	row.S, row.E = f.StartTime-sk.axis0, end-sk.axis0
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
