package templates

import (
	"fmt"
	"strconv"
	"time"
)

// RunFilter is the runs list's filter form, as typed.
type RunFilter struct {
	Status  string
	Action  string
	Query   string
	Since   string
	Until   string
	Session string
}

// RunListRow is one run of the runs table.
type RunListRow struct {
	ID     string
	Action string
	Status string
	Model  string
	Turns  int
	Tokens int64
	// Duration is how long the run ran, its waits for reviewers left out ("ran for"); Waited is
	// how long it waited for them, empty when it never did.
	Duration  string
	Waited    string
	CreatedAt time.Time
	Pending   int
	// Input is a one-line preview of the run's input.
	Input string
	// Lineage is "replay" or "fork" for a derived run, empty for an original.
	Lineage string
	// Session is the conversation the run's traces belong to, when they name one.
	Session string
}

// RunGroup is the runs of one session (conversation), for the runs list grouped by session.
type RunGroup struct {
	Session string // "" for the runs that name none
	URL     string // the runs list filtered on the session
	Rows    []RunListRow
}

// RunSortLink is a sortable column header of the runs table.
type RunSortLink struct {
	Label string
	URL   string
	// Dir is "asc" or "desc" on the column the table is sorted by, empty on the others.
	Dir string
}

// RunsPage is the runs list's view model.
type RunsPage struct {
	Page
	Filter   RunFilter
	Statuses []string
	Actions  []string
	Rows     []RunListRow
	// NextURL is the next page's URL, empty on the last page.
	NextURL string
	// Live is true on the first page without filters, where new runs are added as they start.
	Live bool
	// Sorts are the sortable column headers, by column.
	Sorts map[string]RunSortLink
	// FieldError names a filter that was not understood, shown beside it; Error says why.
	FieldError string
	Error      string
	// Groups are the page's runs by session, when the list is grouped (?group=session);
	// GroupURL toggles the grouping; Sessions says whether any run of the page has one.
	Groups   []RunGroup
	GroupURL string
	Grouped  bool
	Sessions bool
}

// RunHeader is the run page's header.
type RunHeader struct {
	ID           string
	Action       string
	Status       string
	Finished     bool // the run is over: see Ended
	Model        string
	Duration     string
	Turns        int
	InputTokens  int64
	OutputTokens int64
	CreatedBy    string
	CreatedAt    time.Time
	ReplayOf     string
	ReplayMode   string
	ForkOf       string
	ForkTurn     string
	// ForkEdits say what a fork changed at its fork point, one line an edit.
	ForkEdits  []string
	InputJSON  string
	OutputJSON string
	ErrorJSON  string
	// ErrorMessage is the run's error message ("STATUS: message"), shown before its details.
	ErrorMessage string
	// TickFrom is, while the run runs, the moment its "ran for" counts from (its start moved on by
	// its waits): the page ticks the duration from it. Waited is the time it waited for people.
	TickFrom *time.Time
	Waited   string
	Resumes  int
	// CanCancel is true when the run is not finished and the user may cancel it.
	CanCancel bool
	// CanReplay is true when the run has settled (finished or waiting for a reviewer) and the user
	// may replay or fork it.
	CanReplay bool
	// WaitingSince is when an interrupted run stopped to wait for a reviewer; Duration is then the
	// time it ran until that moment.
	WaitingSince *time.Time
	// WaitingReason says why a queued run is not executing: no live worker has its action.
	WaitingReason string
	// CompareWith is the run this one replays or forks ("" for an original): the compare page's A.
	CompareWith string
	// Divergence is the first difference an exact replay found from its original, nil when none
	// is recorded.
	Divergence *DivergenceView
	// Matches is true for a finished exact replay that found no divergence.
	Matches bool
	// Derived are the replays and forks of this run, oldest first.
	Derived []DerivedRun
}

// DivergenceView is a replay's first difference from its original, values shortened.
type DivergenceView struct {
	Turn     int
	Part     string
	Ref      string
	Tool     string
	Path     string
	Original string
	Replay   string
	Message  string
}

// DerivedRun is one replay or fork of a run.
type DerivedRun struct {
	ID       string
	Relation string // replay or fork
	Mode     string // exact, rerun or fork
	ForkTurn string
	Status   string
	// Diverged is "diverged at turn N", "matches" or "" (not checked: a re-run or fork, or an
	// exact replay still going).
	Diverged string
}

// Ended reports whether the run is over (store.RunFinished). An interrupted run is not: it waits
// for a reviewer.
func (h RunHeader) Ended() bool { return h.Finished }

// AuditRow is one audit log entry shown on an interrupt.
type AuditRow struct {
	At      time.Time
	Actor   string
	Action  string
	Details string
}

// InterruptView is one interrupt: on its run's page, inline in the conversation, and in the inbox.
type InterruptView struct {
	ID           string
	RunID        string
	Action       string
	Turn         int
	Tool         string
	Ref          string
	Status       string
	Prompt       string
	InputJSON    string
	MetadataJSON string
	InputSchema  string
	OutputSchema string
	CreatedAt    time.Time
	Age          string
	Version      int64
	ResolvedBy   string
	ResolvedAt   *time.Time
	Comment      string
	Resolution   string
	Audit        []AuditRow
	// SpanURL deep-links the run's tool span, when the trace has one.
	SpanURL string
	// Conversation is the history up to the interrupt, for the inbox.
	Conversation []ConvMessage
	// Suggested is the original run's decision, for an interrupt that a replay raised again: offered
	// to the reviewer, never applied on its own.
	Suggested *SuggestedDecision
}

// SuggestedDecision is how the original run's reviewer resolved the interrupt a replay raised again.
type SuggestedDecision struct {
	SourceRunID string
	Status      string
	By          string
	At          *time.Time
	Comment     string
	Resolution  string // JSON
}

// Pending reports whether the interrupt still waits for a decision.
func (i InterruptView) Pending() bool { return i.Status == "pending" }

// ConvPart is one part of a message, by kind: text, media, toolRequest, toolResponse, data,
// reasoning or custom.
type ConvPart struct {
	Kind string
	Text string
	Name string
	Ref  string
	JSON string
	// MediaURL is set only for http(s) URLs; others are shown as text.
	MediaURL    string
	MediaType   string
	Interrupt   *InterruptView
	Interrupted bool
	Metadata    string
}

// ConvMessage is one message of a run's history.
type ConvMessage struct {
	Seq   int
	Turn  int
	Role  string
	Parts []ConvPart
}

// LedgerRow is one entry of the tool-call ledger.
type LedgerRow struct {
	Turn     int
	Ref      string
	Tool     string
	Status   string
	Source   string
	Label    string
	Attempt  int
	Input    string
	Output   string
	Error    string
	Duration string
}

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
	// Interrupt is the question an interrupted span asks (its metadata, as JSON), when known.
	Interrupt string
	Start     time.Time
	Duration  string
	Running   bool
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
}

// MarkStale marks a span without an end as stale when its trace is: not running, its end never came.
func (d *SpanDetail) MarkStale(stale bool) {
	if d.Running && stale {
		d.Running, d.Stale = false, true
	}
}

// SpanEvent is one event of a span, its time as an offset from the span's start.
type SpanEvent struct {
	Name   string
	Offset string // "+12.3ms"
	At     time.Time
	Attrs  []EventAttr
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
	// Failure says what failed in the trace, with a link to the span where it starts.
	Failure *TraceFailure
	// Resumes are the interrupted traces this trace resumes, ResumedBy the traces that resume it
	// (a Genkit app resumes in a trace of its own).
	Resumes, ResumedBy []string
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

// RunPage is the run detail page's view model.
type RunPage struct {
	Page
	Run RunHeader
	// Conversation is a page of the run's history (the conversation tab's), placed by
	// ConversationPager.
	Conversation      []ConvMessage
	ConversationPager Pager
	Interrupts        []InterruptView
	// Ledger is a page of the run's tool calls (the ledger tab's), placed by LedgerPager;
	// ToolCalls counts them all.
	Ledger      []LedgerRow
	LedgerPager Pager
	ToolCalls   int
	// ForkTurns is how many turns a fork may start from (turns 0 to ForkTurns-1), and ForkCalls
	// the tool calls whose output it may edit; ForkCallsMore says there are more than listed.
	ForkTurns     int
	ForkCalls     []ForkCall
	ForkCallsMore bool
	// Stream is a page of the run's chunks (the stream tab's).
	Stream StreamView
	Trace  *TraceView
	// LiveSeq is the run's last chunk sequence when the page was read; the live stream resumes
	// after it.
	LiveSeq int64
	// Models are the registered models a live replay may override the run's with.
	Models []string
	// Tab is the view the page shows: trace, conversation, stream, ledger or lineage.
	Tab string
}

// RunTabs are the run page's views, in their order.
var RunTabs = []string{"trace", "conversation", "stream", "ledger", "lineage"}

// RunTab is one of the run page's tabs.
type RunTab struct{ Name, Label, URL string }

func runTabList(p RunPage) []RunTab {
	labels := map[string]string{"trace": "Trace", "conversation": "Conversation", "stream": "Stream", "ledger": "Ledger", "lineage": "Lineage"}
	out := make([]RunTab, 0, len(RunTabs))
	for _, t := range RunTabs {
		label := labels[t]
		switch {
		case t == "conversation" && len(p.Interrupts) > 0:
			label += " · " + strconv.Itoa(len(p.Interrupts)) + " interrupt"
			if len(p.Interrupts) > 1 {
				label += "s"
			}
		case t == "ledger" && p.ToolCalls > 0:
			label += " · " + strconv.Itoa(p.ToolCalls)
		case t == "lineage" && len(p.Run.Derived) > 0:
			label += " · " + strconv.Itoa(len(p.Run.Derived))
		}
		url := "/runs/" + p.Run.ID
		if t != "trace" {
			url += "?tab=" + t
		}
		out = append(out, RunTab{Name: t, Label: label, URL: url})
	}
	return out
}

// InboxPage, the interrupt inbox's view model, is in inbox_views.go.

// ActionView is one registered action with its schemas and run form.
type ActionView struct {
	Key          string
	Name         string
	Type         string
	Description  string
	InputSchema  string
	OutputSchema string
	Example      string
	Runnable     bool
	// RunHere is true when the page can run the action at once and show its output in place,
	// through the reflection API (a flow as a durable run, a tool, model or prompt of this
	// program in the serving process).
	RunHere bool
	// LastRuns are the action's latest runs, newest first.
	LastRuns []RunListRow
	// Fields are the input form built from the input schema, kept in step with the JSON.
	Fields []SchemaField
}

// ActionsPage is the actions catalogue's view model.
type ActionsPage struct {
	Page
	Groups   []ActionGroup
	Error    string
	ErrorFor string
	Input    string
	CanRun   bool
	// Apps are the Genkit apps Loupe attached to, each with its actions.
	Apps []AppSection
}

// AppSection is one Genkit app on the actions page: live with its actions, or gone.
type AppSection struct {
	Name    string
	Project string
	Live    bool
	Status  string
	Groups  []ActionGroup
}

// ActionGroup is the actions of one type.
type ActionGroup struct {
	Type    string
	Actions []ActionView
}

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
	// Input is a preview of the trace's input (its root span's).
	Input string
}

// Status is the row's status: running, failed, ok, or no end received.
func (r TraceListRow) Status() string {
	switch {
	case r.Running:
		return "running"
	case r.Error:
		return "failed"
	case r.Stale:
		return "no end received"
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

// UserRow is one user on the users page.
type UserRow struct {
	ID        string
	Username  string
	Role      string
	Disabled  bool
	CreatedAt time.Time
	Self      bool
}

// UsersPage is the users admin page's view model.
type UsersPage struct {
	Page
	Users      []UserRow
	Roles      []string
	Flash      string
	FlashError bool
	// NewPassword is shown once, after creating a user without a chosen password.
	NewPassword string
}

// DashboardChart is the runs and failures per time bucket over the dashboard's range.
type DashboardChart struct {
	// Bars are per bucket, oldest first, with heights in the chart's 0..100 units.
	Bars      []ChartBar
	Total     int
	Errors    int
	ErrorRate string
	// Peak is the most runs in one bucket, the y axis's top; Bucket names a bucket's width.
	Peak   int
	Bucket string
	// XLabels are the x axis's time labels; Range is the chosen range and Ranges its choices.
	XLabels []AxisLabel
	Range   string
	Ranges  []RangeLink
}

// ChartBar is one bucket of the chart.
type ChartBar struct {
	X, H, EH float64
	Title    string
}

// AxisLabel is a tick on the chart's x axis, at X in the chart's 0..600 units.
type AxisLabel struct {
	X    float64
	Text string
}

// RangeLink is one of the dashboard's time ranges.
type RangeLink struct {
	Label, URL string
	Current    bool
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
