package templates

import (
	"time"
)

// RunFilter is the runs list's filter form, as typed.
type RunFilter struct {
	Status  string
	Action  string
	Model   string
	Query   string
	Since   string
	Until   string
	Session string
	Thread  string
}

// RunListRow is one run of the runs table.
type RunListRow struct {
	ID     string
	Action string
	Status string
	Model  string
	Turns  int
	Tokens int64
	// Cost is the run's cost ("$0.0042"), "—" when a model it called has no price; CostTitle
	// names each model's tokens and price.
	Cost      string
	CostTitle string
	// Duration is how long the run ran, its waits for reviewers left out ("ran for"); Waited is
	// how long it waited for them, empty when it never did.
	Duration  string
	Waited    string
	CreatedAt time.Time
	// Ago is CreatedAt relative to the render ("5m ago"); the absolute time is its tooltip.
	Ago string
	// Queued is how long the run waited in the queue for a worker (until it started, or until
	// now while it is queued); empty when it started at once.
	Queued string
	// Error is a failed or aborted run's error, one line; the full text is its tooltip.
	Error   string
	Pending int
	// Input is a one-line preview of the run's input.
	Input string
	// Lineage is "replay" or "fork" for a derived run, empty for an original.
	Lineage string
	// Session is the conversation the run's traces belong to, when they name one, and Thread the
	// session's thread, when they name that too (Genkit's genkit:threadName).
	Session string
	Thread  string
	// SessionURL lists the runs of the same conversation.
	SessionURL string
}

// RunGroup is the runs of one conversation (a session, or a thread of it), for the runs list
// grouped by session.
type RunGroup struct {
	Session string // "" for the runs that name none
	Thread  string // "" when the runs name no thread
	URL     string // the runs list filtered on the conversation
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
