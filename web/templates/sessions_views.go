package templates

import "time"

// SessionRow is one session of the sessions page: its runs, their turns, tokens and cost, and
// when the first was created and when the last changed.
type SessionRow struct {
	Session string
	Runs    int
	Turns   int64
	Tokens  int64
	// Cost is the runs' cost ("$0.0042", "—" when a model they called has no price); CostTitle
	// names each model's tokens and price.
	Cost, CostTitle string
	First, Last     time.Time
	// FirstAgo and LastAgo are First and Last relative to the render ("5m ago").
	FirstAgo, LastAgo string
	// URL is the runs list filtered on the session.
	URL string
}

// SessionsPage is the sessions page's view model.
type SessionsPage struct {
	Page
	Rows []SessionRow
	// NextURL is the next page's URL, empty on the last page.
	NextURL string
}
