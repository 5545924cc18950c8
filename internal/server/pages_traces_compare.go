package server

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/trace"
	"github.com/loupe-dev/loupe/web/templates"
)

// Two traces are compared span by span, each span found by its name path: the names from its root
// down to it, each with its place among the siblings of the same name ("agent/generate#2/tool
// search#0"). Two runs of one flow line up so even where one called a tool more often, and a span
// that only one trace has is shown at its place in the other's tree.

// compareRowCap is how many rows the compare page renders; past it the page says so.
const compareRowCap = 2000

// compareSlower is how much longer (or shorter) a span must take, as a ratio and in time, for its
// duration to be marked as changed: small jitter is not a difference a person should chase.
const (
	compareSlowerRatio = 0.25
	compareSlowerMin   = int64(time.Millisecond)
)

// comparedSpan is one trace's side of a compare row.
type comparedSpan struct {
	sk *skeleton
	i  int32
}

// alignedRow is a row of the aligned trees: the spans of A and B at one name path (either may be
// missing), at a depth.
type alignedRow struct {
	depth int
	name  string
	nth   int
	a, b  *comparedSpan
}

// alignTraces walks the two display trees together: at each level the children of A's node come
// in A's order, and a child only B has comes after the sibling it follows in B.
func alignTraces(a, b *skeleton) []alignedRow {
	var out []alignedRow
	type child struct {
		name string
		nth  int
	}
	keyed := func(sk *skeleton, kids []int32) ([]child, map[child]int32) {
		seen := map[string]int{}
		keys := make([]child, len(kids))
		at := make(map[child]int32, len(kids))
		for j, c := range kids {
			name := sk.Facts[c].Name
			keys[j] = child{name, seen[name]}
			seen[name]++
			at[keys[j]] = c
		}
		return keys, at
	}
	var walk func(ak, bk []int32, depth int)
	walk = func(ak, bk []int32, depth int) {
		aKeys, aAt := keyed(a, ak)
		bKeys, bAt := keyed(b, bk)
		// B's own children go after the last child before them in B that A has too (in B's
		// order), or first: one pass, however many siblings.
		var head []child
		after := map[child][]child{}
		anchor, anchored := child{}, false
		for _, k := range bKeys {
			if _, ok := aAt[k]; ok {
				anchor, anchored = k, true
				continue
			}
			if anchored {
				after[anchor] = append(after[anchor], k)
			} else {
				head = append(head, k)
			}
		}
		order := make([]child, 0, len(aKeys)+len(bKeys))
		order = append(order, head...)
		for _, k := range aKeys {
			order = append(order, k)
			order = append(order, after[k]...)
		}
		for _, k := range order {
			row := alignedRow{depth: depth, name: k.name, nth: k.nth}
			var aKids, bKids []int32
			if i, ok := aAt[k]; ok {
				row.a = &comparedSpan{a, i}
				aKids = a.Children[i]
			}
			if i, ok := bAt[k]; ok {
				row.b = &comparedSpan{b, i}
				bKids = b.Children[i]
			}
			out = append(out, row)
			walk(aKids, bKids, depth+1)
		}
	}
	walk(a.Roots, b.Roots, 0)
	return out
}

// compareStatus is a span's outcome as the compare page tells them apart: an unset status on a
// span that ended is ok (Genkit sends its successes so), and a span without an end is running.
func compareStatus(sk *skeleton, i int32) string {
	f := &sk.Facts[i]
	st := trace.StatusName(f.StatusCode, deref(f.State))
	switch {
	case st == "error":
		return "failed"
	case st == "interrupted":
		return "interrupted"
	case f.EndTime == 0 && sk.Stale:
		return "no end received"
	case f.EndTime == 0:
		return "running"
	}
	return "ok"
}

// compareSide is one side of a row for the page.
func compareSide(cs *comparedSpan) *templates.CompareSpan {
	if cs == nil {
		return nil
	}
	f := &cs.sk.Facts[cs.i]
	s := &templates.CompareSpan{SpanID: f.SpanID, Status: compareStatus(cs.sk, cs.i),
		URL: "/traces/" + cs.sk.TraceID + "?span=" + f.SpanID + "#span-" + f.SpanID}
	if f.EndTime != 0 {
		s.DurationNS = f.EndTime - f.StartTime
		s.Duration = fmtNanos(s.DurationNS)
	} else {
		s.Duration = s.Status
	}
	return s
}

// compareDelta says how B's duration differs from A's ("+1.2s (+35%)"), and whether enough to
// mark: slower is 1, faster -1.
func compareDelta(a, b *templates.CompareSpan) (string, int) {
	if a == nil || b == nil || a.Duration == a.Status || b.Duration == b.Status {
		return "", 0
	}
	d := b.DurationNS - a.DurationNS
	if d == 0 {
		return "=", 0
	}
	sign := "+"
	if d < 0 {
		sign = "−"
	}
	text := sign + fmtNanos(abs64(d))
	if a.DurationNS > 0 {
		text += fmt.Sprintf(" (%s%.0f%%)", sign, 100*float64(abs64(d))/float64(a.DurationNS))
	}
	if abs64(d) < compareSlowerMin || float64(abs64(d)) < compareSlowerRatio*float64(max(a.DurationNS, 1)) {
		return text, 0
	}
	if d > 0 {
		return text, 1
	}
	return text, -1
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// traceCompareSummary is one trace's head on the compare page.
func (s *Server) traceCompareSummary(c echo.Context, label, id string, sk *skeleton) (templates.CompareTrace, error) {
	tr, err := s.reads.TraceGet(c.Request().Context(), id)
	if err != nil {
		return templates.CompareTrace{}, err
	}
	t := templates.CompareTrace{Label: label, ID: id, Name: tr.DisplayName, Source: tr.Source, Spans: len(sk.Facts),
		URL: "/traces/" + id, Status: "ok", Start: time.Unix(0, tr.StartTime)}
	if tr.Service != "" {
		t.Source = tr.Service + " (" + tr.Source + ")"
	}
	switch {
	case tr.Failed():
		t.Status = "failed"
	case sk.Stale:
		t.Status = "no end received"
	case sk.Running:
		t.Status = "running"
	case tr.Interrupted:
		t.Status = "interrupted"
	}
	if sk.Running {
		t.Duration = "running"
	} else {
		t.DurationNS = sk.AxisLen
		t.Duration = fmtNanos(sk.AxisLen)
	}
	if tr.RunID != nil {
		t.RunURL = "/runs/" + tr.RunID.String()
	}
	return t, nil
}

// traceCompare is GET /traces/compare?trace=A&trace=B[&changes=only]: two traces' span trees side
// by side, aligned by name path (alignTraces), each span's duration and status, and what differs
// marked: a span only one has, a status that changed, a duration that changed by a quarter and a
// millisecond or more. The traces list's "compare the two selected" sends here.
func (s *Server) traceCompare(c echo.Context) error {
	picked := c.QueryParams()["trace"]
	if len(picked) != 2 {
		return Errorf(http.StatusBadRequest, "bad_request", "pick exactly two traces to compare; %d picked", len(picked))
	}
	ctx := c.Request().Context()
	var ids [2]string
	var sks [2]*skeleton
	for i, v := range picked {
		id, err := trace.ParseTraceID(v)
		if err != nil {
			return Errorf(http.StatusBadRequest, "bad_id", "trace %q is not a trace id", v)
		}
		if _, err := s.reads.TraceGet(ctx, id); err != nil {
			return err
		}
		sk, err := s.loadSkeleton(ctx, id)
		if err != nil {
			return err
		}
		ids[i], sks[i] = id, sk
	}
	page := templates.TraceComparePage{Page: s.page(c, "Compare traces", "traces"), ChangesOnly: c.QueryParam("changes") == "only"}
	var err error
	if page.A, err = s.traceCompareSummary(c, "A", ids[0], sks[0]); err != nil {
		return err
	}
	if page.B, err = s.traceCompareSummary(c, "B", ids[1], sks[1]); err != nil {
		return err
	}
	if page.A.DurationNS > 0 || page.B.DurationNS > 0 {
		page.DurationDelta, _ = compareDelta(&templates.CompareSpan{DurationNS: page.A.DurationNS, Duration: page.A.Duration},
			&templates.CompareSpan{DurationNS: page.B.DurationNS, Duration: page.B.Duration})
	}
	q := url.Values{"trace": {ids[0], ids[1]}}
	page.SwapURL = "/traces/compare?" + url.Values{"trace": {ids[1], ids[0]}}.Encode()
	all := "/traces/compare?" + q.Encode()
	q.Set("changes", "only")
	page.ChangesURL, page.AllURL = "/traces/compare?"+q.Encode(), all

	aligned := alignTraces(sks[0], sks[1])
	rows := make([]templates.CompareRow, len(aligned))
	changed := make([]bool, len(aligned))
	for j, r := range aligned {
		row := templates.CompareRow{Depth: r.depth, Name: r.name, Nth: r.nth, A: compareSide(r.a), B: compareSide(r.b)}
		switch {
		case row.A == nil:
			row.Only = "B"
			page.OnlyB++
		case row.B == nil:
			row.Only = "A"
			page.OnlyA++
		default:
			page.Both++
			row.StatusChanged = row.A.Status != row.B.Status
			if row.StatusChanged {
				page.StatusChanged++
			}
			row.Delta, row.Slower = compareDelta(row.A, row.B)
			switch row.Slower {
			case 1:
				page.Slower++
			case -1:
				page.Faster++
			}
		}
		rows[j] = row
		changed[j] = row.Changed()
	}
	if page.ChangesOnly {
		// A changed row keeps its ancestors, so that it reads in its place.
		keep := make([]bool, len(rows))
		var stack []int // the ancestors of row j: the last row seen at each depth
		for j := range rows {
			d := rows[j].Depth
			if d < len(stack) {
				stack = stack[:d]
			}
			if changed[j] {
				keep[j] = true
				for _, k := range stack {
					keep[k] = true
				}
			}
			stack = append(stack, j)
		}
		kept := rows[:0]
		for j := range rows {
			if keep[j] {
				kept = append(kept, rows[j])
			}
		}
		rows = kept
	}
	page.TotalRows = len(rows)
	if len(rows) > compareRowCap {
		rows = rows[:compareRowCap]
	}
	page.Rows = rows
	return s.render(c, http.StatusOK, templates.TraceCompareView(page))
}
