package templates

// DiffPage is the turn-aligned comparison of two runs.
type DiffPage struct {
	Page
	A, B           string
	RunA, RunB     DiffRun
	Equal          bool
	First          string // the first difference, in words
	StatusA        string
	StatusB        string
	TurnsA, TurnsB int
	TokensDelta    string
	LatencyDelta   string
	Run            []DiffGroup // input, output and error of the runs as wholes
	Turns          []DiffTurn
	Truncated      bool
}

// DiffRun is what the compare page's header says of one run.
type DiffRun struct {
	Action, Model, Mode string
}

// ActionsDiffer is true when the two runs are of different actions, which the page warns of.
func (d DiffPage) ActionsDiffer() bool { return d.RunA.Action != d.RunB.Action }

// DiffTurn is one turn of a comparison.
type DiffTurn struct {
	Turn    int
	Equal   bool
	OnlyIn  string
	Groups  []DiffGroup // messages, model request, model response
	Tools   []DiffTool
	Tokens  string
	Latency string
}

// DiffTool is one tool call of a turn, matched by ref.
type DiffTool struct {
	Ref, Tool string
	Equal     bool
	OnlyIn    string
	Status    string
	Groups    []DiffGroup // input, output, error
	Duration  string
}

// DiffGroup is the changes of one part.
type DiffGroup struct {
	Part    string
	Changes []DiffChange
	// ID anchors the group, for a repeated change to link to.
	ID string
}

// DiffChange is one JSON change: what A has at Path and what B has there.
type DiffChange struct {
	Op, Path string
	A, B     DiffValue
	// SameAs, when set, names where the page already shows this very change (the same value
	// replaced by the same other value): the row points there instead of repeating it.
	SameAs, SameAsID string
}

// DiffValue is one side of a change: its text, or for a long one a preview, its size and the full
// text when it is not too large to put in the page.
type DiffValue struct {
	Text string
	// Size is the full text's size in words ("3.1 MB"); empty when Text is all of it.
	Size string
	// Full is the whole text, shown on demand; empty when it is too large for the page.
	Full string
	// Spans, for a string changed into another string, are its text with what the other side
	// lacks marked: the change inside the string.
	Spans []DiffSpan
}

// DiffSpan is a piece of a changed string: kept, or only on this side (Changed).
type DiffSpan struct {
	Text    string
	Changed bool
}
