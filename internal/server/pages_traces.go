package server

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
	"github.com/loupe-dev/loupe/web/templates"
)

// The span tree is built from a skeleton of the trace: ids, parents, names, times and the few
// attributes that say what a span is, read in SQL, never the payloads. Only the expanded part is
// rendered; a node's children come as an HTML fragment when it is opened, a page at a time, and a
// span's payloads only when it is selected. That keeps a 10,000-span run page small and fast.

// childPage is how many children of one node are rendered before a "show more" row.
const childPage = 200

// focusContext is how many siblings are shown before the selected span (or its ancestor) when it is
// past a page of its parent's children: the page shows the first page, a "show more" row for the
// gap, then a page from a little before it.
const focusContext = 10

// staleAfter is how long a trace may go without any span starting or ending before its spans that
// never ended are taken as abandoned (the process sending them crashed, or their end was lost)
// rather than running.
const staleAfter = 15 * time.Minute

// previewRunes is how long a span's input preview in the tree may be.
const previewRunes = 80

// payloadPreview is how much of a large payload is shown before "load all".
const payloadPreview = 16 << 10

// skeleton is the trace's span tree (trace.Skeleton), with the server's mapping of it to the
// tree's rows (rows, rowsWindow), their bars (place, in timeline.go) and previews.
// skeleton is a trace's skeleton as the pages render it; turnBase numbers its turns on from a
// resumed trace's (resumeOrigin), set per request on a copy, never on a cached skeleton.
type skeleton struct {
	*trace.Skeleton
	turnBase int
}

func buildSkeleton(traceID string, facts []store.SpanTurnFacts, now int64) *skeleton {
	return &skeleton{Skeleton: trace.BuildSkeleton(traceID, facts, now, staleAfter)}
}

// numberedFrom is the skeleton with its turns numbered from o's base (o may be nil).
func (sk *skeleton) numberedFrom(o *resumeOrigin) *skeleton {
	if o == nil || o.TurnBase == 0 {
		return sk
	}
	return &skeleton{Skeleton: sk.Skeleton, turnBase: o.TurnBase}
}

// withPreviews says, on each tool row, what the tool was asked (trace.Preview of its input). The
// inputs are read for the rendered tool rows only: a page shows a few hundred rows of a trace
// that may have 10,000 spans, whose skeleton never reads a payload.
func (s *Server) withPreviews(ctx context.Context, sk *skeleton, rows []templates.SpanRow) error {
	var ids []string
	for _, r := range rows {
		if i, ok := sk.Index[r.ID]; ok && r.More == 0 && trace.SpanKind(&sk.Facts[i]) == trace.KindTool {
			ids = append(ids, r.ID)
		}
	}
	inputs, err := s.reads.SpanToolInputs(ctx, sk.TraceID, ids)
	if err != nil {
		return err
	}
	for i := range rows {
		if in, ok := inputs[rows[i].ID]; ok {
			rows[i].Preview = trace.Preview(in, previewRunes)
		}
	}
	return nil
}

// rows renders parent's children (the roots for -1) from offset, depth-first through the expanded
// nodes, with a "more" row when a page of children is cut. When selected is a span, the path to it
// is shown even where it is past a page of children (see rowsWindow).
func (sk *skeleton) rows(parent int32, depth, offset int, open map[int32]bool, selected int32) []templates.SpanRow {
	return sk.rowsWindow(parent, depth, offset, 0, open, selected)
}

// rowsWindow is rows whose first page of parent's children stops at end when end > 0: a "show
// more" row for a gap asks for the rows up to the next ones already on the page. A child on the way
// to the selected span that is past its page is shown with a page of its siblings from a little
// before it, after a "show more" row for the siblings between.
func (sk *skeleton) rowsWindow(parent int32, depth, offset, end int, open map[int32]bool, selected int32) []templates.SpanRow {
	var focus map[int32]int
	if selected >= 0 {
		focus = sk.PathTo(selected)
	}
	axisEnd := sk.Axis0 + sk.AxisLen
	var out []templates.SpanRow
	var walk func(parent int32, depth, offset, end int)
	emit := func(c int32, depth int) {
		f := &sk.Facts[c]
		row := templates.SpanRow{ID: f.SpanID, Name: f.Name, Label: sk.LabelFrom(c, sk.turnBase), Depth: depth,
			Children: len(sk.Children[c]), Expanded: open[c] && len(sk.Children[c]) > 0,
			Error: sk.OwnError[c], ContainsError: sk.InnerError[c], Selected: c == selected,
			Interrupted:   deref(f.State) == "interrupted" && f.StatusCode != store.StatusError,
			MissingParent: sk.Missing[c]}
		endT := f.EndTime
		switch {
		case f.EndTime != 0:
			row.Duration = fmtNanos(f.EndTime - f.StartTime)
		case sk.Stale:
			row.Stale, row.Duration, endT = true, "no end received", axisEnd
		default:
			row.Running, row.Duration, endT = true, "running", axisEnd
		}
		sk.place(&row, c, endT)
		out = append(out, row)
		if row.Expanded {
			walk(c, depth+1, 0, 0)
		}
	}
	walk = func(parent int32, depth, offset, end int) {
		kids := sk.Roots
		p := ""
		if parent >= 0 {
			kids = sk.Children[parent]
			p = sk.Facts[parent].SpanID
		}
		lo := min(offset, len(kids))
		hi := min(len(kids), lo+childPage)
		if end > 0 {
			hi = min(hi, max(end, lo))
		}
		// The window of siblings around the child on the way to the selected span, when it is
		// past this page: [ws, we), after a gap [hi, ws) behind a "show more" row.
		ws, we := -1, -1
		if k, ok := focus[parent]; ok && k >= hi && end == 0 {
			if k-focusContext <= hi+focusContext {
				hi = min(len(kids), k+1+focusContext)
			} else {
				ws = k - focusContext
				we = min(len(kids), ws+childPage)
			}
		}
		for _, c := range kids[lo:hi] {
			emit(c, depth)
		}
		if ws >= 0 {
			out = append(out, templates.SpanRow{More: hi, End: ws, Parent: p, Depth: depth})
			for _, c := range kids[ws:we] {
				emit(c, depth)
			}
			hi = we
		}
		switch {
		case end > 0 && hi < end:
			out = append(out, templates.SpanRow{More: hi, End: end, Parent: p, Depth: depth})
		case end == 0 && hi < len(kids):
			out = append(out, templates.SpanRow{More: hi, Parent: p, Depth: depth})
		}
	}
	walk(parent, depth, offset, end)
	return out
}

// treeState is which nodes of a tree a page had open, sent back by the live script when it reloads
// the tree (?open=a,b&closed=c): the user's expanded and collapsed nodes survive the reload.
type treeState struct {
	explicit     bool // open was given: no ancestors of the selected span are opened for it
	open, closed map[string]bool
}

// maxTreeState caps the span ids read from ?open= and ?closed=.
const maxTreeState = 2000

func treeStateFrom(c echo.Context) treeState {
	q := c.QueryParams()
	_, explicit := q["open"]
	ids := func(key string) map[string]bool {
		m := map[string]bool{}
		for _, v := range q[key] {
			for id := range strings.SplitSeq(v, ",") {
				if id != "" && len(m) < maxTreeState {
					m[id] = true
				}
			}
		}
		return m
	}
	return treeState{explicit: explicit, open: ids("open"), closed: ids("closed")}
}

// traceView builds the tree for a page: the roots open, and, for a deep link, the selected span's
// ancestors; or, for a live reload, the nodes the page had open.
func (s *Server) traceView(ctx context.Context, traceID, link, selectedID, toolName string, toolTurn int, st treeState) (*templates.TraceView, error) {
	tr, err := s.reads.TraceGet(ctx, traceID)
	if err != nil {
		return nil, err
	}
	sk, err := s.loadSkeleton(ctx, traceID)
	if err != nil {
		return nil, err
	}
	v := &templates.TraceView{TraceID: traceID, Name: tr.DisplayName, Source: tr.Source, SpanCount: len(sk.Facts),
		Running: sk.Running, Stale: sk.Stale, Base: "/traces/" + traceID, Link: link}
	if tr.Service != "" {
		v.Source = tr.Service + " (" + tr.Source + ")"
	}
	if sk.Stale {
		v.LastActivity = time.Unix(0, sk.Latest)
	}
	if tr.RunID != nil && !strings.HasPrefix(link, "/runs/") {
		v.RunURL = "/runs/" + tr.RunID.String()
	}
	if strings.HasPrefix(link, "/runs/") {
		v.TraceURL = "/traces/" + traceID
	}
	if s.deps.Traces != nil {
		v.DownloadURL = "/api/v1/traces/" + traceID
	}
	if sk.Running {
		v.Duration = "running"
	} else {
		v.Duration = fmtNanos(sk.AxisLen)
	}
	open := map[int32]bool{}
	for _, r := range sk.Roots {
		open[r] = true
	}
	for id := range st.open {
		if i, ok := sk.Index[id]; ok {
			open[i] = true
		}
	}
	for id := range st.closed {
		if i, ok := sk.Index[id]; ok {
			delete(open, i)
		}
	}
	selected := int32(-1)
	if selectedID == "" && toolName != "" {
		selectedID = sk.FindTool(toolName, toolTurn)
	}
	if i, ok := sk.Index[selectedID]; ok && selectedID != "" {
		selected = i
		if !st.explicit {
			for _, a := range sk.Ancestors(i) {
				open[a] = true
			}
		}
		d, err := s.spanDetail(ctx, traceID, selectedID, link)
		if err != nil {
			return nil, err
		}
		d.MarkStale(sk.Stale)
		v.Selected = d
	}
	if v.Resumes, v.ResumedBy, err = s.reads.TraceResumeLinks(ctx, traceID); err != nil {
		return nil, err
	}
	if len(v.Resumes) > 0 {
		o, ok, err := s.resumeOrigin(ctx, traceID)
		if err != nil {
			return nil, err
		}
		sk = sk.numberedFrom(o)
		if ok {
			v.ResumedFrom = &templates.ResumedFrom{TraceID: o.TraceID, SpanID: o.SpanID, Tool: o.Tool, Turn: o.Turn,
				URL: resumedFromURL(link, o)}
		}
	}
	if i, text := sk.Failure(); i >= 0 {
		id := sk.Facts[i].SpanID
		v.Failure = &templates.TraceFailure{Text: text, SpanID: id, URL: link + id + "#span-" + id}
	}
	v.Rows = sk.rows(-1, 0, 0, open, selected)
	v.Timeline = sk.timelineView()
	if err := s.withPreviews(ctx, sk, v.Rows); err != nil {
		return nil, err
	}
	v.Turns = turnRows(sk.Turns, sk.turnBase, link, sk.Stale)
	return v, nil
}

// turnRows renders the per-turn summary; link is the deep-link prefix a span id completes.
// A turn still running in a stale trace never ended. A generate span that called no model and no
// tool (a resume that found nothing left to do) is no turn a person would count: it gets no row,
// rather than "turn 3 — 0 0 — 0µs".
func turnRows(turns []trace.Turn, base int, link string, stale bool) []templates.TurnRow {
	rows := make([]templates.TurnRow, 0, len(turns))
	for _, t := range turns {
		if emptyTurn(t) {
			continue
		}
		// Tool names in first-call order, counted, and marked when a call interrupted or failed:
		// "search ×6, approve (interrupted), book (failed)".
		var tools []string
		count := map[string]int{}
		interrupted, failed := map[string]bool{}, map[string]bool{}
		for _, c := range t.ToolCalls {
			if count[c.Name] == 0 {
				tools = append(tools, c.Name)
			}
			count[c.Name]++
			interrupted[c.Name] = interrupted[c.Name] || c.State == "interrupted"
			failed[c.Name] = failed[c.Name] || c.State == "error"
		}
		for j, name := range tools {
			if n := count[name]; n > 1 {
				tools[j] = fmt.Sprintf("%s ×%d", name, n)
			}
			if interrupted[name] {
				tools[j] += " (interrupted)"
			}
			if failed[name] {
				tools[j] += " (failed)"
			}
		}
		r := templates.TurnRow{Index: base + t.Index, Model: t.Model, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
			Tools: strings.Join(tools, ", "), Running: t.Running, Error: t.State == "error", Link: link + t.SpanID,
			Duration: "running"}
		switch {
		case !t.Running:
			r.Duration = fmtNanos(t.DurationNS)
		case stale:
			r.Running, r.Stale, r.Duration = false, true, "no end received"
		}
		rows = append(rows, r)
	}
	return rows
}

// emptyTurn reports a finished turn with nothing in it: no model, no tokens, no tool call, no
// error.
func emptyTurn(t trace.Turn) bool {
	return !t.Running && t.Model == "" && t.InputTokens == 0 && t.OutputTokens == 0 && len(t.ToolCalls) == 0 && t.State != "error"
}

// spanDetail reads one span in full and splits its attributes into payloads (large values and
// Genkit's input and output, pretty-printed) and the rest.
func (s *Server) spanDetail(ctx context.Context, traceID, spanID, link string) (*templates.SpanDetail, error) {
	sp, err := s.getSpan(ctx, traceID, spanID)
	if err != nil {
		return nil, err
	}
	d := &templates.SpanDetail{TraceID: traceID, ID: sp.SpanID, Name: sp.Name, Kind: spanKind(sp.Kind),
		Start: time.Unix(0, sp.StartTime), Running: sp.EndTime == 0, StatusMsg: sp.StatusMessage, Link: link + sp.SpanID}
	var attrs map[string]json.RawMessage
	_ = json.Unmarshal(sp.Attributes, &attrs)
	var state string
	_ = json.Unmarshal(attrs["genkit:state"], &state)
	// A tool that raised an interrupt is not an error, and not done either.
	d.Status = trace.StatusName(sp.StatusCode, state)
	if d.Status == "interrupted" {
		d.Interrupt = s.spanInterrupt(ctx, sp, attrs)
		if t := jsonTree(d.Interrupt); t != nil && len(t.Children) > 0 {
			d.InterruptTree = t
		}
		d.Outcome = s.spanInterruptOutcome(ctx, sp, attrs)
	}
	if !d.Running {
		d.Duration = fmtNanos(sp.EndTime - sp.StartTime)
	}
	if f := trace.FactsOf(sp); trace.SpanKind(&f) == trace.KindModel || trace.SpanKind(&f) == trace.KindTurn {
		in, out := trace.ModelMessages(attrs)
		d.Input, d.Output = spanConversation(in), spanConversation(out)
	}
	var asSent *templates.SpanAsSent
	if d.Status == "interrupted" {
		asSent = takeAsSent(attrs, sp.StatusMessage)
	}
	rest := map[string]json.RawMessage{}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := attrs[k]
		text := payloadText(raw)
		if !payloadKeys[k] && len(text) < 240 {
			rest[k] = raw
			continue
		}
		p := templates.Payload{Key: k, Text: text, Size: len(text)}
		if len(text) > payloadPreview {
			p.Text, p.Truncated = text[:payloadPreview]+"\n…", true
			p.URL = fmt.Sprintf("/traces/%s/spans/%s/payload?key=%s", traceID, sp.SpanID, url.QueryEscape(k))
		} else {
			p.Tree = jsonTree(text)
		}
		d.Payloads = append(d.Payloads, p)
	}
	if len(rest) > 0 {
		d.Attributes = prettyJSON(mustJSON(rest))
		d.AttrRows = attributeRows(rest)
	}
	d.EventList, d.Events = spanEvents(sp.Events, sp.StartTime)
	if asSent != nil {
		// Genkit's exception event for the interrupt, its stack with it, reads as what Genkit
		// sent, after the interrupt, rather than first in the panel.
		kept := d.EventList[:0:0]
		for _, e := range d.EventList {
			if e.Interrupt {
				asSent.Events = append(asSent.Events, e)
			} else {
				kept = append(kept, e)
			}
		}
		d.EventList = kept
		if asSent.Message != "" || len(asSent.Attrs) > 0 || len(asSent.Events) > 0 {
			d.AsSent = asSent
		}
	}
	d.Links = nonEmptyJSON(sp.Links)
	d.Resource = nonEmptyJSON(sp.Resource)
	d.Logs = s.logLines(ctx, traceID, sp.SpanID)
	return d, nil
}

// asSentAttrs are the attributes of an interrupted Genkit span that describe it as the error
// Genkit recorded: the span panel shows them under "as Genkit sent it".
var asSentAttrs = []string{trace.AttrOriginalState, "genkit:isFailureSource"}

// takeAsSent takes out of an interrupted span's attributes those that describe it as an error
// (asSentAttrs; the original state shown as the genkit:state Genkit sent), with its status
// message, which for an interrupt is the exception's.
func takeAsSent(attrs map[string]json.RawMessage, statusMessage string) *templates.SpanAsSent {
	a := &templates.SpanAsSent{Message: statusMessage}
	taken := map[string]json.RawMessage{}
	for _, k := range asSentAttrs {
		raw, ok := attrs[k]
		if !ok {
			continue
		}
		delete(attrs, k)
		if k == trace.AttrOriginalState {
			k = "genkit:state"
		}
		taken[k] = raw
	}
	a.Attrs = attributeRows(taken)
	return a
}

// payloadKeys are the attributes the span panel always shows as payloads, however short: Genkit's
// input and output, and the GenAI conventions' messages and tool call arguments and result.
var payloadKeys = map[string]bool{"genkit:input": true, "genkit:output": true,
	"gen_ai.system_instructions": true, "gen_ai.input.messages": true, "gen_ai.output.messages": true,
	"gen_ai.tool.call.arguments": true, "gen_ai.tool.call.result": true}

// spanConversation renders a model call's messages (trace.ModelMessages) part by part, as the run
// page's conversation does.
func spanConversation(msgs []trace.Message) []templates.ConvMessage {
	out := make([]templates.ConvMessage, 0, len(msgs))
	for _, m := range msgs {
		cm := templates.ConvMessage{Role: m.Role}
		for _, raw := range m.Content {
			cm.Parts = append(cm.Parts, convPart(raw, -1, nil))
		}
		out = append(out, cm)
	}
	return out
}

// spanEvents reads a span's stored events ([{time_unix_nano, name, attributes}]), their times as
// offsets from the span's start; what cannot be read so comes back as pretty JSON instead.
func spanEvents(raw []byte, start int64) ([]templates.SpanEvent, string) {
	text := nonEmptyJSON(raw)
	if text == "" {
		return nil, ""
	}
	var evs []struct {
		Time       int64                      `json:"time_unix_nano"`
		Name       string                     `json:"name"`
		Attributes map[string]json.RawMessage `json:"attributes"`
	}
	if json.Unmarshal(raw, &evs) != nil {
		return nil, text
	}
	out := make([]templates.SpanEvent, 0, len(evs))
	for _, e := range evs {
		ev := templates.SpanEvent{Name: e.Name, Offset: fmtOffset(e.Time - start), At: time.Unix(0, e.Time)}
		keys := make([]string, 0, len(e.Attributes))
		for k := range e.Attributes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var long []templates.EventAttr
		for _, k := range keys {
			a := templates.EventAttr{Key: k}
			var str string
			if json.Unmarshal(e.Attributes[k], &str) == nil {
				a.Value = str
			} else {
				a.Value = string(compactRaw(e.Attributes[k]))
			}
			if strings.Contains(a.Value, "\n") || len(a.Value) > 120 {
				// A stack trace or a long message reads as lines of its own, after the short ones.
				a.Multiline = true
				long = append(long, a)
				continue
			}
			ev.Attrs = append(ev.Attrs, a)
		}
		ev.Attrs = append(ev.Attrs, long...)
		if string(e.Attributes[trace.EventAttrInterrupt]) == "true" {
			// Genkit sent the interrupt as this exception; ingest kept it, marked.
			ev.Name += " (an interrupt, not an error)"
			ev.Interrupt = true
		}
		out = append(out, ev)
	}
	return out, ""
}

func (s *Server) getSpan(ctx context.Context, traceID, spanID string) (*store.Span, error) {
	spans, err := s.reads.SpansGet(ctx, []store.SpanKey{{TraceID: traceID, SpanID: spanID}})
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, Errorf(http.StatusNotFound, "not_found", "span %s of trace %s not found", spanID, traceID)
	}
	return &spans[0], nil
}

// payloadText pretty-prints an attribute: a string holding JSON is shown as that JSON.
func payloadText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t := strings.TrimSpace(s)
		if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
			return prettyJSON([]byte(t))
		}
		return s
	}
	return prettyJSON(raw)
}

func spanKind(k int16) string {
	switch k {
	case 1:
		return "internal"
	case 2:
		return "server"
	case 3:
		return "client"
	case 4:
		return "producer"
	case 5:
		return "consumer"
	}
	return "unspecified"
}

// traceChildren is GET /traces/{trace}/children?parent=&offset=&depth=&link=: tree rows of one
// node's children, as an HTML fragment.
func (s *Server) traceChildren(c echo.Context) error {
	traceID, err := traceParam(c, "trace")
	if err != nil {
		return err
	}
	sk, err := s.loadSkeleton(c.Request().Context(), traceID)
	if err != nil {
		return err
	}
	parent := int32(-1)
	if p := c.QueryParam("parent"); p != "" {
		i, ok := sk.Index[p]
		if !ok {
			return Errorf(http.StatusNotFound, "not_found", "span %s is not in trace %s", p, traceID)
		}
		parent = i
	}
	offset, _ := strconv.Atoi(c.QueryParam("offset"))
	end, _ := strconv.Atoi(c.QueryParam("end"))
	depth, _ := strconv.Atoi(c.QueryParam("depth"))
	link := safeNext(c.QueryParam("link"))
	if link == "/" {
		link = "/traces/" + traceID + "?span="
	}
	var open map[int32]bool
	if c.QueryParam("expand") == "all" {
		open = sk.OpenAll(parent, expandAllRows, childPage)
	}
	o, _, err := s.resumeOrigin(c.Request().Context(), traceID)
	if err != nil {
		return err
	}
	sk = sk.numberedFrom(o)
	rows := sk.rowsWindow(parent, max(depth, 0), max(offset, 0), max(end, 0), open, -1)
	if err := s.withPreviews(c.Request().Context(), sk, rows); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.SpanRows(rows, link))
}

// resumedFromURL links to the interrupted call a trace resumes: within the run page (the other
// execution's trace) when link is a run page's, else on the interrupted trace's own page.
func resumedFromURL(link string, o *resumeOrigin) string {
	if strings.HasPrefix(link, "/runs/") {
		base, _, _ := strings.Cut(link, "?")
		return base + "?trace=" + o.TraceID + "&span=" + o.SpanID
	}
	return "/traces/" + o.TraceID + "?span=" + o.SpanID
}

// expandAllRows is about how many rows "expand all" renders: past it, deeper nodes stay closed, to
// be opened one by one, so that a 10,000-span trace does not become a 10,000-row page.
const expandAllRows = 2000

// spanMatch is one span a search found, with the display ancestors to open to show it, top down.
type spanMatch struct {
	ID   string   `json:"id"`
	Path []string `json:"path"`
}

// traceSearch is GET /traces/{trace}/search?q=: the spans whose name, attributes (keys and values:
// input, output, messages), status message or events contain q, in the tree's order, each with the
// path that opens to it, since most of them sit inside collapsed rows the page has never loaded.
func (s *Server) traceSearch(c echo.Context) error {
	traceID, err := traceParam(c, "trace")
	if err != nil {
		return err
	}
	q := strings.TrimSpace(c.QueryParam("q"))
	resp := struct {
		Query   string      `json:"q"`
		Matches []spanMatch `json:"matches"`
		// Capped is true when there are more matches than store.SpanSearchLimit.
		Capped bool `json:"capped"`
	}{Query: q, Matches: []spanMatch{}}
	if q == "" {
		return c.JSON(http.StatusOK, resp)
	}
	ctx := c.Request().Context()
	ids, err := s.reads.SpanSearch(ctx, traceID, q)
	if err != nil {
		return err
	}
	resp.Capped = len(ids) >= store.SpanSearchLimit
	if len(ids) == 0 {
		return c.JSON(http.StatusOK, resp)
	}
	sk, err := s.loadSkeleton(ctx, traceID)
	if err != nil {
		return err
	}
	order := sk.DisplayOrder()
	found := make([]int32, 0, len(ids))
	for _, id := range ids {
		if i, ok := sk.Index[id]; ok {
			found = append(found, i)
		}
	}
	slices.SortFunc(found, func(a, b int32) int { return int(order[a]) - int(order[b]) })
	for _, i := range found {
		anc := sk.Ancestors(i)
		path := make([]string, len(anc))
		for k, a := range anc {
			path[len(anc)-1-k] = sk.Facts[a].SpanID
		}
		resp.Matches = append(resp.Matches, spanMatch{ID: sk.Facts[i].SpanID, Path: path})
	}
	return c.JSON(http.StatusOK, resp)
}

// traceSpan is GET /traces/{trace}/spans/{span}: the span panel as an HTML fragment.
func (s *Server) traceSpan(c echo.Context) error {
	traceID, err := traceParam(c, "trace")
	if err != nil {
		return err
	}
	link := safeNext(c.QueryParam("link"))
	if link == "/" {
		link = "/traces/" + traceID + "?span="
	}
	ctx := c.Request().Context()
	d, err := s.spanDetail(ctx, traceID, c.Param("span"), link)
	if err != nil {
		return err
	}
	if d.Running {
		// Whether a span without an end is still running depends on the rest of the trace.
		sk, err := s.loadSkeleton(ctx, traceID)
		if err != nil {
			return err
		}
		d.MarkStale(sk.Stale)
	}
	return s.render(c, http.StatusOK, templates.SpanDetailView(*d))
}

// traceSpanPayload is GET /traces/{trace}/spans/{span}/payload?key=: one attribute in full.
func (s *Server) traceSpanPayload(c echo.Context) error {
	traceID, err := traceParam(c, "trace")
	if err != nil {
		return err
	}
	sp, err := s.getSpan(c.Request().Context(), traceID, c.Param("span"))
	if err != nil {
		return err
	}
	var attrs map[string]json.RawMessage
	_ = json.Unmarshal(sp.Attributes, &attrs)
	raw, ok := attrs[c.QueryParam("key")]
	if !ok {
		return Errorf(http.StatusNotFound, "not_found", "span %s has no attribute %q", sp.SpanID, c.QueryParam("key"))
	}
	return s.render(c, http.StatusOK, templates.PayloadText(payloadText(raw)))
}

// tracesPage is GET /traces: traces newest first, or sorted by duration, span count or tokens,
// filtered as the API filters them (traceListFilters): status (a trace failed when any span in
// it did), time, source, service, name, a root attribute, text, and duration bounds.
func (s *Server) tracesPage(c echo.Context) error {
	q := c.QueryParams()
	f := templates.TraceFilters{Source: q.Get("source"), Query: q.Get("q"), Text: q.Get("text"),
		Status: q.Get("status"), Service: q.Get("service"), Since: q.Get("since"), Attr: q.Get("attr"),
		MinDuration: q.Get("min_duration"), MaxDuration: q.Get("max_duration")}
	// The page's attribute box takes key=value; the API's parameter is attr.key=value.
	if k, v, ok := strings.Cut(f.Attr, "="); ok && strings.TrimSpace(k) != "" {
		q.Set("attr."+strings.TrimSpace(k), strings.TrimSpace(v))
	} else if f.Attr != "" {
		return Errorf(http.StatusBadRequest, "bad_request", "attribute %q: write it as key=value", f.Attr)
	}
	filters, err := traceListFilters(q)
	if err != nil {
		return err
	}
	sortBy, asc, err := traceListSort(q)
	if err != nil {
		return err
	}
	p := store.TraceListParams{Limit: 50, Filters: filters, Sort: sortBy, Asc: asc, WithInput: true}
	if v := q.Get("cursor"); v != "" {
		cur, err := store.ParseTraceCursor(v)
		if err != nil {
			return Errorf(http.StatusBadRequest, "bad_request", "cursor: %v", err)
		}
		p.After = cur
	}
	items, next, err := s.reads.TraceList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	// keep is the page's query without the cursor and the order: what a sort link or the next
	// page carries over.
	keep := url.Values{}
	for k, v := range map[string]string{"source": f.Source, "q": f.Query, "text": f.Text, "status": f.Status,
		"service": f.Service, "since": f.Since, "attr": f.Attr, "min_duration": f.MinDuration, "max_duration": f.MaxDuration} {
		if v != "" {
			keep.Set(k, v)
		}
	}
	page := templates.TracesPage{Page: s.page(c, "Traces", "traces"), Filters: f,
		Sort: string(cmp.Or(sortBy, store.TraceSortStart)), Asc: asc, SortURLs: map[string]string{}}
	for _, o := range store.TraceSorts {
		v := maps.Clone(keep)
		v.Set("sort", string(o))
		if string(o) == page.Sort && !asc {
			v.Set("dir", "asc")
		}
		page.SortURLs[string(o)] = "/traces?" + v.Encode()
	}
	for _, it := range items {
		t := it.Trace
		row := templates.TraceListRow{ID: t.TraceID, Name: t.DisplayName, Source: t.Source, Spans: t.SpanCount,
			Start: time.Unix(0, t.StartTime), Error: t.Failed(), ErrorSpans: t.ErrorSpans, Running: t.EndTime == 0, StartNano: t.StartTime,
			Service: t.Service, Model: t.Model, ModelCalls: t.ModelCalls, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
			ToolCalls: t.ToolCalls, ToolErrors: t.ToolErrors, Input: trace.Preview(it.Input, 100), Interrupted: t.Interrupted}
		if row.Running && time.Since(t.UpdatedAt) > staleAfter {
			// Nothing has come for this trace for long: what has not ended will not.
			row.Running, row.Stale = false, true
		}
		if !row.Running && !row.Stale {
			row.Duration = fmtNanos(t.Duration())
		}
		if t.RunID != nil {
			row.RunID = t.RunID.String()
		}
		page.Rows = append(page.Rows, row)
	}
	if next != nil {
		v := maps.Clone(keep)
		v.Set("cursor", next.String())
		if sortBy != "" {
			v.Set("sort", string(sortBy))
		}
		if asc {
			v.Set("dir", "asc")
		}
		page.NextURL = "/traces?" + v.Encode()
	}
	return s.render(c, http.StatusOK, templates.TracesView(page))
}

// tracePageView is the trace page's view of the request's trace, span and tree state.
func (s *Server) tracePageView(c echo.Context) (*templates.TraceView, error) {
	traceID, err := traceParam(c, "trace")
	if err != nil {
		return nil, err
	}
	return s.traceView(c.Request().Context(), traceID, "/traces/"+traceID+"?span=", c.QueryParam("span"), "", -1, treeStateFrom(c))
}

// tracePage is GET /traces/{trace}[?span=]: one trace with the span tree.
func (s *Server) tracePage(c echo.Context) error {
	v, err := s.tracePageView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.TraceDetailView(templates.TracePage{
		Page: s.page(c, firstNonEmpty(v.Name, "Trace"), "traces"), Trace: *v}))
}

// traceTree is GET /traces/{trace}/tree[?span=][&open=&closed=]: the trace page's tree section as
// an HTML fragment, which the live script reloads as spans arrive.
func (s *Server) traceTree(c echo.Context) error {
	v, err := s.tracePageView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.SpanTreeView(*v))
}
