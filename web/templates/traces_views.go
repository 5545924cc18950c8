package templates

import (
	"fmt"
	"strconv"
	"time"
)

// SpanRow is one rendered row of the span tree and waterfall.
type SpanRow struct {
	ID       string
	Name     string
	Label    string
	Depth    int
	Children int
	Expanded bool
	Running  bool
	// Stale is a span whose end never came: it has none, and the trace has been quiet for long.
	Stale bool
	// Interrupted is a tool span that raised an interrupt (genkit:state interrupted).
	Interrupted bool
	// Error is a span where an error starts; ContainsError one with a failed span below it.
	Error, ContainsError bool
	Selected             bool
	Duration             string
	// X and W place the waterfall bar on the trace's folded axis (its long idle stretches folded),
	// in thousandths; S and E are the bar's start and end in ns from the trace's start, from which
	// timeline.js places it again when the timeline is zoomed.
	X, W float64
	S, E int64
	// Kind colours the bar: model, tool, turn, flow or other.
	Kind string
	// Self is the span's own time (not in any span inside it), when it has spans inside it.
	Self string
	// Waits are a tool's waits for a reviewer after it interrupted, to the end of the folded gap.
	Waits []WaitBar
	// Tail is the part of a turn's bar after the next turn, which Genkit nests in it, started.
	Tail *WaitBar
	// More is set on a "show more" row: the offset of the next children page of Parent; End, when
	// set, is where the rows already on the page resume (the row stands for a gap).
	More   int
	End    int
	Parent string
	// MissingParent is the id of a span's parent that is not in the trace (not yet, or never).
	MissingParent string
	// Preview says what the span did, from its input: a tool's arguments in a few words.
	Preview string
}

// WaitBar is a wait drawn on a row's waterfall: X and W on the folded axis, S and E in ns from
// the trace's start.
type WaitBar struct {
	X, W  float64
	S, E  int64
	Label string
}

// TimelineView is the waterfall's axis: JSON holds its breakpoints for timeline.js ({"len",
// "points": [[unit, ns]…]}); Gaps are its folded idle stretches.
type TimelineView struct {
	JSON string
	Gaps []TimelineGap
	// Minimap is every span of the trace, loaded or not, as the minimap over the waterfall draws
	// it (see the server's minimap): JSON, empty for a trace without spans.
	Minimap string
}

// TimelineGap is a folded stretch of the axis in which nothing ran, labelled "waited 17 s for a
// reviewer" after an interrupt.
type TimelineGap struct {
	S, E     int64
	X, W     float64
	Reviewer bool
	Label    string
}

// maxIndent is the deepest indentation class: deeper rows share it, so that a deep span's name is
// never squeezed to nothing.
const maxIndent = 12

// DepthClass is the row's indentation class; deeper rows share the last one.
func (r SpanRow) DepthClass() string { return fmt.Sprintf("d%d", min(r.Depth, maxIndent)) }

// NameTitle is the tooltip of the row's name: the full name, which a deep row may cut, and the
// depth when the indentation no longer shows it.
func (r SpanRow) NameTitle() string {
	name := r.Name
	if r.Preview != "" {
		name += ": " + r.Preview
	}
	if r.Depth > maxIndent {
		return name + " (depth " + strconv.Itoa(r.Depth) + ")"
	}
	return name
}

// Payload is one large attribute value of a span, shown collapsed.
type Payload struct {
	Key       string
	Text      string
	Size      int
	Truncated bool
	URL       string
	// Tree is the payload as a collapsible JSON tree, when it is JSON and small enough.
	Tree *JSONNode
}

// JSONNode is one node of a collapsible JSON tree: an object, an array or a value, with its path
// from the payload's root and its value as compact JSON, for the copy buttons.
type JSONNode struct {
	Key, Path string
	Kind      string // object, array, string or scalar
	Summary   string // "{…} 3 keys", "[…] 2 items"
	Value     string // a string's text or a scalar's JSON
	Copy      string
	Depth     int
	Children  []*JSONNode
}

// AttrRow is one attribute of the span panel's key/value table; Group orders Genkit's keys first,
// then the GenAI conventions', Loupe's, and the others.
type AttrRow struct {
	Key, Value string
	Group      int
}

// InterruptOutcome is how an interrupted tool span's interrupt was resolved.
type InterruptOutcome struct {
	Status, ResolvedBy, Comment string
	ResolvedAt                  *time.Time
	URL                         string
}

// SpanDetail is the selected span's panel.
type SpanDetail struct {
	TraceID   string
	ID        string
	Name      string
	Kind      string
	Status    string
	StatusMsg string
	// Interrupt is the question an interrupted span asks (its metadata, as JSON), when known, and
	// InterruptTree the same as a tree, when it is an object or a list.
	Interrupt     string
	InterruptTree *JSONNode
	// AsSent is what Genkit sent for an interrupted span that Loupe reads otherwise, when it sent
	// any: shown folded, after the interrupt itself.
	AsSent   *SpanAsSent
	Start    time.Time
	Duration string
	Running  bool
	// Stale is a span without an end in a trace that has been quiet for long: its end never came.
	Stale bool
	Link  string
	// Input and Output are a model call's request and response messages (Genkit's, or the GenAI
	// conventions' gen_ai.input.messages and gen_ai.output.messages), when the span has them.
	Input      []ConvMessage
	Output     []ConvMessage
	Payloads   []Payload
	Attributes string
	// AttrRows are the attributes as a key/value table (Attributes is them as JSON).
	AttrRows []AttrRow
	// Outcome is how the interrupt of an interrupted tool span was resolved, when Loupe holds it.
	Outcome *InterruptOutcome
	// EventList is the span's events; Events is them as JSON when they could not be read so.
	EventList []SpanEvent
	Events    string
	Links     string
	Resource  string
	// Logs are the log records written in the span (OTLP logs).
	Logs []LogLine
}

// SpanAsSent is the data of an interrupted span as Genkit recorded it, an error: its error
// message, the attributes ingest rewrote or that only say "failure" (the original genkit:state,
// genkit:isFailureSource), and the exception event with its stack.
type SpanAsSent struct {
	Message string
	Attrs   []AttrRow
	Events  []SpanEvent
}

// MarkStale marks a span without an end as stale when its trace is: not running, its end never came.
func (d *SpanDetail) MarkStale(stale bool) {
	if d.Running && stale {
		d.Running, d.Stale = false, true
	}
}

// SpanEvent is one event of a span, its time as an offset from the span's start.
type SpanEvent struct {
	// Interrupt marks the exception event with which Genkit recorded a tool's interrupt.
	Interrupt bool
	Name      string
	Offset    string // "+12.3ms"
	At        time.Time
	Attrs     []EventAttr
}

// EventAttr is one attribute of an event; a multi-line value (a stack trace) is shown as lines.
type EventAttr struct {
	Key       string
	Value     string
	Multiline bool
}

// TraceRef names one trace of a run (a run resumed after an interrupt has one per execution).
type TraceRef struct {
	ID      string
	Label   string
	Current bool
	URL     string
}

// TraceView is a trace as a collapsible span tree beside a waterfall.
type TraceView struct {
	TraceID   string
	Name      string
	Source    string
	SpanCount int
	Duration  string
	Running   bool
	// Stale is a trace with spans whose end never came: nothing has happened in it for long.
	// LastActivity is then its last known time, where the waterfall ends.
	Stale        bool
	LastActivity time.Time
	Rows         []SpanRow
	Timeline     TimelineView
	Selected     *SpanDetail
	// Base is the tree's fragment URL prefix (/traces/{id}); Link is the deep-link prefix, to which
	// a span id is appended.
	Base   string
	Link   string
	Others []TraceRef
	// Turns is the per-turn summary: model, tokens, tool calls and time of each generate turn.
	Turns []TurnRow
	// RunURL links the run this trace records, when it records one and the page is not the run's.
	RunURL string
	// TraceURL is the trace's own page, linked from the run page.
	TraceURL string
	// DownloadURL is the trace's JSON in Loupe's shape (GET /api/v1/traces/{id}); DownloadURL +
	// "/otlp" is it in OTLP's. Empty when the server has no trace API.
	DownloadURL string
	// Failure says what failed in the trace, with a link to the span where it starts.
	Failure *TraceFailure
	// Resumes are the interrupted traces this trace resumes, ResumedBy the traces that resume it
	// (a Genkit app resumes in a trace of its own).
	Resumes, ResumedBy []string
	// ResumedFrom is the interrupted call this trace resumes, when found in the interrupted trace:
	// its turns number on from it.
	ResumedFrom *ResumedFrom
}

// TraceFailure is what failed in a trace: the first span where an error starts.
type TraceFailure struct {
	Text, SpanID, URL string
}

// TurnRow is one turn of a trace's per-turn summary.
type TurnRow struct {
	Index        int
	Model        string
	InputTokens  int64
	OutputTokens int64
	Tools        string // tool calls by name, in first-call order, counted ("search ×6, fetch")
	Duration     string
	Running      bool
	Stale        bool
	Error        bool
	// Link selects the turn's span.
	Link string
}

// TurnTokens totals the summary's tokens.
func (t TraceView) TurnTokens() (in, out int64) {
	for _, r := range t.Turns {
		in += r.InputTokens
		out += r.OutputTokens
	}
	return in, out
}

// InboxPage, the interrupt inbox's view model, is in inbox_views.go.

// TraceListRow is one trace of the traces list.
type TraceListRow struct {
	ID       string
	Name     string
	Source   string
	Spans    int
	Duration string
	Start    time.Time
	Error    bool
	Running  bool
	// Stale is a trace that never ended and has had no news for long.
	Stale     bool
	RunID     string
	StartNano int64
	// Service is the service.name of the program that sent the trace, when known.
	Service string
	// Model is the first model called; the counts are the trace's model calls, tokens and tool
	// calls (ToolErrors of them failed).
	Model        string
	ModelCalls   int
	InputTokens  int64
	OutputTokens int64
	ToolCalls    int
	ToolErrors   int
	// ErrorSpans counts its failed spans; Error is set when there is one (or the root failed).
	ErrorSpans int
	// Interrupted is a trace that stopped at a tool's interrupt (store.Trace.Interrupted).
	Interrupted bool
	// Input is a preview of the trace's input (its root span's).
	Input string
}

// Status is the row's status: running, failed, interrupted, ok, or no end received.
func (r TraceListRow) Status() string {
	switch {
	case r.Running:
		return "running"
	case r.Error:
		return "failed"
	case r.Stale:
		return "no end received"
	case r.Interrupted:
		return "interrupted"
	}
	return "ok"
}

// Tokens is the row's tokens for the list: "120 in / 30 out", or "" when no model was called.
func (r TraceListRow) Tokens() string {
	if r.ModelCalls == 0 && r.InputTokens == 0 && r.OutputTokens == 0 {
		return ""
	}
	return strconv.FormatInt(r.InputTokens, 10) + " in / " + strconv.FormatInt(r.OutputTokens, 10) + " out"
}

// Tools is the row's tool calls for the list: "3", "3 (1 failed)", or "" for none.
func (r TraceListRow) Tools() string {
	switch {
	case r.ToolCalls == 0:
		return ""
	case r.ToolErrors > 0:
		return strconv.Itoa(r.ToolCalls) + " (" + strconv.Itoa(r.ToolErrors) + " failed)"
	}
	return strconv.Itoa(r.ToolCalls)
}

// TracesPage is the traces list's view model.
type TracesPage struct {
	Page
	Filters TraceFilters
	// Sort is the list's order (start, duration, spans, tokens), Asc its direction; SortURLs
	// link each order, the current one reversed.
	Sort     string
	Asc      bool
	SortURLs map[string]string
	Rows     []TraceListRow
	NextURL  string
}

// TraceFilters are the traces list's filters, as the form sends them.
type TraceFilters struct {
	Source, Query, Text, Status, Service, Since, Attr string
	// MinDuration and MaxDuration bound how long a trace lasted, as typed (250ms, 1.5s, or a
	// number of milliseconds).
	MinDuration, MaxDuration string
}

// Any reports whether a filter is set.
func (f TraceFilters) Any() bool { return f != TraceFilters{} }

// SortMark is the arrow after a column heading: the list's order and its direction.
func (p TracesPage) SortMark(col string) string {
	switch {
	case col != p.Sort:
		return ""
	case p.Asc:
		return " ▴"
	}
	return " ▾"
}

// TracePage shows one trace.
type TracePage struct {
	Page
	Trace TraceView
}

// ResumedFrom is the interrupted tool call a trace resumes: its span in the interrupted trace, and
// its turn, numbered across the run's executions.
type ResumedFrom struct {
	TraceID, SpanID, Tool string
	Turn                  int
	URL                   string
}

// TraceComparePage is two traces side by side (GET /traces/compare?trace=A&trace=B), their span
// trees aligned by name path.
type TraceComparePage struct {
	Page
	A, B CompareTrace
	// DurationDelta is how B's duration differs from A's.
	DurationDelta string
	Rows          []CompareRow
	// TotalRows is how many rows there are; past compareRowCap only the first are rendered.
	TotalRows int
	// Both, OnlyA and OnlyB count the rows in both traces or in one; StatusChanged, Slower and
	// Faster the rows in both whose status or duration changed.
	Both, OnlyA, OnlyB, StatusChanged, Slower, Faster int
	// ChangesOnly shows only the rows that differ, with their ancestors.
	ChangesOnly                 bool
	ChangesURL, AllURL, SwapURL string
}

// CompareTrace is one compared trace's head.
type CompareTrace struct {
	Label, ID, Name, Source, Status, Duration, URL, RunURL string
	DurationNS                                             int64
	Spans                                                  int
	Start                                                  time.Time
}

// CompareRow is one name path of the compared trees: A's span and B's at it (either nil when only
// one trace has it).
type CompareRow struct {
	Depth int
	Name  string
	// Nth is the span's place among its siblings of the same name, from 0.
	Nth  int
	A, B *CompareSpan
	// Only is "A" or "B" when only that trace has the span.
	Only          string
	StatusChanged bool
	// Delta is how B's duration differs from A's; Slower is 1 when B took markedly longer, -1
	// when markedly shorter.
	Delta  string
	Slower int
}

// Changed reports whether the row differs between the traces.
func (r CompareRow) Changed() bool { return r.Only != "" || r.StatusChanged || r.Slower != 0 }

// DepthClass is the row's indentation class, the span tree's.
func (r CompareRow) DepthClass() string { return fmt.Sprintf("d%d", min(r.Depth, maxIndent)) }

// Label is the row's name with its place among same-named siblings past the first ("search #2").
func (r CompareRow) Label() string {
	if r.Nth == 0 {
		return r.Name
	}
	return r.Name + " #" + strconv.Itoa(r.Nth+1)
}

// CompareSpan is one trace's span in a compare row.
type CompareSpan struct {
	SpanID, Status, Duration, URL string
	DurationNS                    int64
}

// compareBadge is the badge class of a compare status.
func compareBadge(status string) string {
	switch status {
	case "failed":
		return "failed"
	case "interrupted":
		return "interrupted"
	case "running":
		return "running"
	case "no end received":
		return "stale"
	}
	return "succeeded"
}
