package server

import (
	"cmp"
	"slices"
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
	if len(sk.Facts) > 0 {
		v.Minimap = string(mustJSON(sk.minimap()))
	}
	return v
}

// minimapBands is the most rows the minimap draws: a trace of more spans shares each row among
// consecutive spans, in the tree's order.
const minimapBands = 60

// minimapKinds are the minimap's colours, by index: the waterfall's kinds, then a failure.
var minimapKinds = []string{"flow", "turn", "model", "tool", "other", "error"}

// minimapData is the whole trace for the minimap: its spans in the tree's display order (every
// span, loaded or not), in bands of consecutive spans; each bar [band, from, to, kind] is where
// spans of one kind in a band ran, on the folded axis in whole units (0 to 1000), overlapping
// bars merged. A 10,000-span trace so comes to a few hundred bars.
type minimapData struct {
	Bands int        `json:"bands"`
	Kinds []string   `json:"kinds"`
	Bars  [][4]int32 `json:"bars"`
}

func (sk *skeleton) minimap() minimapData {
	n := len(sk.Facts)
	bands := min(n, minimapBands)
	order := sk.DisplayOrder()
	kindIndex := map[string]int32{}
	for k, name := range minimapKinds {
		kindIndex[name] = int32(k)
	}
	errKind := kindIndex["error"]
	type key struct{ band, kind int32 }
	spans := map[key][][2]int32{}
	axisEnd := sk.Axis0 + sk.AxisLen
	for i := range sk.Facts {
		f := &sk.Facts[i]
		end := f.EndTime
		if end == 0 {
			end = axisEnd
		}
		// A turn Genkit nested the next one in ends where that one starts, as its solid bar does.
		if at, _ := sk.NestedTurn(int32(i)); at > f.StartTime && at < end {
			end = at
		}
		kind, ok := kindIndex[sk.Kind(int32(i))]
		if !ok {
			kind = kindIndex["other"]
		}
		if sk.OwnError[i] {
			kind = errKind
		}
		band := int32(int64(order[i]) * int64(bands) / int64(n))
		x0 := int32(sk.Timeline.Pos(f.StartTime))
		x1 := max(int32(sk.Timeline.Pos(max(end, f.StartTime))+0.999), x0+1)
		k := key{band, kind}
		spans[k] = append(spans[k], [2]int32{x0, x1})
	}
	out := minimapData{Bands: bands, Kinds: minimapKinds}
	for k, iv := range spans {
		slices.SortFunc(iv, func(a, b [2]int32) int { return cmp.Compare(a[0], b[0]) })
		cur := iv[0]
		for _, x := range iv[1:] {
			if x[0] <= cur[1] {
				cur[1] = max(cur[1], x[1])
				continue
			}
			out.Bars = append(out.Bars, [4]int32{k.band, cur[0], cur[1], k.kind})
			cur = x
		}
		out.Bars = append(out.Bars, [4]int32{k.band, cur[0], cur[1], k.kind})
	}
	// Failures drawn last, over the rest; otherwise by band, so the JSON is the same each time.
	slices.SortFunc(out.Bars, func(a, b [4]int32) int {
		return cmp.Or(cmp.Compare(boolInt(a[3] == errKind), boolInt(b[3] == errKind)),
			cmp.Compare(a[0], b[0]), cmp.Compare(a[3], b[3]), cmp.Compare(a[1], b[1]))
	})
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
