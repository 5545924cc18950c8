// Package templates renders Loupe's HTML pages with templ. Components take view models, built by
// internal/server, and return HTML; they never query anything.
package templates

import "time"

// Page is what the layout needs on every page.
type Page struct {
	Title string
	// Section is the navigation entry to mark current: dashboard, runs, inbox, traces or actions.
	Section string
	// Dev is true in local mode, where sign-in is skipped; the header says so.
	Dev bool
	// User is the signed-in user's name, empty when nobody is.
	User string
	// CSRF is the token that forms must send back.
	CSRF string
	// Admin shows the users page in the navigation.
	Admin bool
	// Live is true when the server has a live hub at /ws; pages then update as things change.
	Live bool
}

// NavItem is one entry of the top navigation.
type NavItem struct {
	Section string
	Label   string
	Href    string
}

// Nav is the top navigation, in order.
var Nav = []NavItem{
	{"dashboard", "Dashboard", "/"},
	{"runs", "Runs", "/runs"},
	{"sessions", "Sessions", "/sessions"},
	{"inbox", "Inbox", "/inbox"},
	{"traces", "Traces", "/traces"},
	{"actions", "Actions", "/actions"},
	{"policy", "Policy", "/policy"},
	{"datasets", "Datasets", "/datasets"},
}

// StatusCount is how many runs have one status.
type StatusCount struct {
	Status string
	Count  int64
}

// RunRow is one run in a list.
type RunRow struct {
	ID        string
	Action    string
	Status    string
	CreatedAt time.Time
}

// InterruptRow is one pending interrupt in a list.
type InterruptRow struct {
	ID     string
	RunID  string
	Tool   string
	Age    string
	Prompt string
}

// Dashboard is the dashboard page's view model.
type Dashboard struct {
	Page
	Counts      []StatusCount
	TotalRuns   int64
	Pending     int64
	PendingList []InterruptRow
	RecentRuns  []RunRow
	Chart       DashboardChart
	// Stats are p50/p95 running time and tokens per action and model over the chart's range.
	Stats []ActionStats
}

// ActionStats are one action and model's runs created in the dashboard's range: all of them,
// failed and aborted apart, and the percentiles of those that finished.
type ActionStats struct {
	Action, Model         string
	Runs, Failed, Aborted int
	Finished              int
	RanP50, RanP95        string
	TokensP50, TokensP95  string
	TokensSum             int64
	// Cost is the runs' cost in all ("$1.23", "—" when a model they called has no price);
	// CostTitle names each model's tokens and price.
	Cost, CostTitle string
	// CostUSD is the cost as the dashboard's JSON sends it, nil when it is unknown.
	CostUSD                *float64
	RunsURL, FailedRunsURL string
	// ModelRunsURL lists the runs of this action and model in the range; empty without a model.
	ModelRunsURL string
}

// ErrorPage is the view model of an HTML error page.
type ErrorPage struct {
	Page
	Code    int
	Message string
	// RequestID lets a user quote the failing request when reporting a bug.
	RequestID string
}

// Login is the sign-in page's view model.
type Login struct {
	Page
	Next     string
	Username string
	Error    string
}

// breakParts splits a value after each separator a person reads as a boundary (/ . _ : - , = ? &
// and space), so that breakable can let the browser wrap there. Long values past 4,000 bytes are
// left whole: the panel shows those folded.
func breakParts(v string) []string {
	if len(v) > 4000 {
		return []string{v}
	}
	var parts []string
	start := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '/', '.', '_', ':', '-', ',', '=', '?', '&', ' ':
			parts = append(parts, v[start:i+1])
			start = i + 1
		}
	}
	if start < len(v) {
		parts = append(parts, v[start:])
	}
	return parts
}
