package templates

import (
	"strconv"
	"strings"
)

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

// ChangedTools are the turn's tool calls that differ, or that one run only has: each gets a
// heading of its own.
func (t DiffTurn) ChangedTools() []DiffTool {
	var out []DiffTool
	for _, tc := range t.Tools {
		if !tc.Equal || tc.OnlyIn != "" {
			out = append(out, tc)
		}
	}
	return out
}

// SameTools names the turn's tool calls that are the same in both runs, on one line, by tool in
// first-call order with their refs ("search ×3 (r0-0, r0-1, r0-2), fetch (r0-3)"), rather than a
// heading each that says "same".
func (t DiffTurn) SameTools() string {
	var names []string
	refs := map[string][]string{}
	for _, tc := range t.Tools {
		if !tc.Equal || tc.OnlyIn != "" {
			continue
		}
		if refs[tc.Tool] == nil {
			names = append(names, tc.Tool)
		}
		refs[tc.Tool] = append(refs[tc.Tool], tc.Ref)
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n
		if k := len(refs[n]); k > 1 {
			parts[i] += " ×" + strconv.Itoa(k)
		}
		parts[i] += " (" + strings.Join(refs[n], ", ") + ")"
	}
	return strings.Join(parts, ", ")
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
