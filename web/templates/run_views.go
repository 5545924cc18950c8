package templates

import (
	"strconv"
	"time"
)

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
	// Cost is the run's cost ("$0.0042", "—" when a model it called has no price), empty before
	// its first model call; CostTitle names each model's tokens and price.
	Cost       string
	CostTitle  string
	CreatedBy  string
	CreatedAt  time.Time
	ReplayOf   string
	ReplayMode string
	ForkOf     string
	ForkTurn   string
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
	// Logs are the log records of the trace shown (OTLP logs).
	Logs []LogLine
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
