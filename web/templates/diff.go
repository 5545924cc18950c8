package templates

// DiffPage is the turn-aligned comparison of two runs.
type DiffPage struct {
	Page
	A, B           string
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
}

// DiffChange is one JSON change: what A has at Path and what B has there.
type DiffChange struct {
	Op, Path string
	A, B     string
}
