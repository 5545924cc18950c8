package runs

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/store"
)

// RunDiff is a turn-aligned comparison of run A (usually the original) with run B (its replay or
// fork, or any run). Equal ignores latencies, which differ between any two executions.
type RunDiff struct {
	A     uuid.UUID `json:"a"`
	B     uuid.UUID `json:"b"`
	Equal bool      `json:"equal"`
	// First is the first difference, in turn order, or nil.
	First   *Location `json:"first_difference"`
	StatusA string    `json:"status_a"`
	StatusB string    `json:"status_b"`
	TurnsA  int       `json:"turns_a"`
	TurnsB  int       `json:"turns_b"`
	Input   Changes   `json:"input"`
	Output  Changes   `json:"output"`
	Error   Changes   `json:"error"`

	InputTokensDelta  int64   `json:"input_tokens_delta"`
	OutputTokensDelta int64   `json:"output_tokens_delta"`
	LatencyMsDelta    float64 `json:"latency_ms_delta"`

	Turns     []*TurnDiff `json:"turns"`
	Truncated bool        `json:"truncated,omitempty"`
}

// Location names a difference: a turn (-1 for the run as a whole), a part and a JSON pointer in it.
type Location struct {
	Turn int    `json:"turn"`
	Part string `json:"part"`
	Ref  string `json:"ref,omitempty"`
	Path string `json:"path,omitempty"`
}

// TurnDiff compares one turn of the two runs: its history messages, the model request (the
// messages new since the previous turn, and every other field) and response, each tool call, and
// the usage and latency of the model call.
type TurnDiff struct {
	Turn  int  `json:"turn"`
	Equal bool `json:"equal"`
	// OnlyIn is "a" or "b" when only one run reached this turn.
	OnlyIn        string          `json:"only_in,omitempty"`
	Messages      Changes         `json:"messages"`
	ModelRequest  Changes         `json:"model_request"`
	ModelResponse Changes         `json:"model_response"`
	ToolCalls     []*ToolCallDiff `json:"tool_calls"`

	InputTokensA      int     `json:"input_tokens_a"`
	InputTokensB      int     `json:"input_tokens_b"`
	InputTokensDelta  int     `json:"input_tokens_delta"`
	OutputTokensA     int     `json:"output_tokens_a"`
	OutputTokensB     int     `json:"output_tokens_b"`
	OutputTokensDelta int     `json:"output_tokens_delta"`
	LatencyMsA        float64 `json:"latency_ms_a"`
	LatencyMsB        float64 `json:"latency_ms_b"`
	LatencyMsDelta    float64 `json:"latency_ms_delta"`
}

// ToolCallDiff compares one tool call, matched by ref within its turn.
type ToolCallDiff struct {
	Ref             string  `json:"ref"`
	Tool            string  `json:"tool"`
	Equal           bool    `json:"equal"`
	OnlyIn          string  `json:"only_in,omitempty"`
	StatusA         string  `json:"status_a,omitempty"`
	StatusB         string  `json:"status_b,omitempty"`
	Input           Changes `json:"input"`
	Output          Changes `json:"output"`
	Error           Changes `json:"error"`
	DurationMsA     float64 `json:"duration_ms_a"`
	DurationMsB     float64 `json:"duration_ms_b"`
	DurationMsDelta float64 `json:"duration_ms_delta"`
}

// runRecord is what a diff reads of one run.
type runRecord struct {
	run      *store.Run
	messages map[int][]*store.RunMessage
	calls    map[int]*store.ModelCall
	tools    map[int][]*store.ToolCall
	turns    int
}

func (s *Service) loadRecord(ctx context.Context, id uuid.UUID) (*runRecord, error) {
	run, err := s.store.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	r := &runRecord{run: run, messages: map[int][]*store.RunMessage{}, calls: map[int]*store.ModelCall{}, tools: map[int][]*store.ToolCall{}}
	msgs, err := s.store.MessageList(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		r.messages[m.Turn] = append(r.messages[m.Turn], m)
		r.turns = max(r.turns, m.Turn+1)
	}
	calls, err := s.store.ModelCallList(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, c := range calls {
		r.calls[c.Turn] = c
		r.turns = max(r.turns, c.Turn+1)
	}
	tools, err := s.store.ToolCallList(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		r.tools[t.Turn] = append(r.tools[t.Turn], t)
		r.turns = max(r.turns, t.Turn+1)
	}
	return r, nil
}

// Diff compares two runs turn by turn. The diff of a run with itself is Equal, with no change
// anywhere and zero deltas.
func (s *Service) Diff(ctx context.Context, a, b uuid.UUID) (*RunDiff, error) {
	ra, err := s.loadRecord(ctx, a)
	if err != nil {
		return nil, err
	}
	rb, err := s.loadRecord(ctx, b)
	if err != nil {
		return nil, err
	}
	return diffRecords(ra, rb), nil
}

func diffRecords(ra, rb *runRecord) *RunDiff {
	d := &RunDiff{
		A: ra.run.ID, B: rb.run.ID, StatusA: ra.run.Status, StatusB: rb.run.Status, TurnsA: ra.turns, TurnsB: rb.turns,
		InputTokensDelta:  rb.run.InputTokens - ra.run.InputTokens,
		OutputTokensDelta: rb.run.OutputTokens - ra.run.OutputTokens,
		Turns:             []*TurnDiff{},
	}
	var trunc bool
	d.Input = diffRaw(ra.run.Input, rb.run.Input, &trunc)
	d.Output = diffRaw(ra.run.Output, rb.run.Output, &trunc)
	d.Error = diffRaw(ra.run.Error, rb.run.Error, &trunc)
	if len(d.Input) > 0 {
		d.First = &Location{Turn: -1, Part: "input", Path: d.Input[0].Path}
	}
	for t := range max(ra.turns, rb.turns) {
		td := diffTurn(t, ra, rb, &trunc)
		d.LatencyMsDelta += td.LatencyMsDelta
		d.Turns = append(d.Turns, td)
		if d.First == nil && !td.Equal {
			d.First = td.firstDifference()
		}
	}
	if d.First == nil {
		switch {
		case d.StatusA != d.StatusB:
			d.First = &Location{Turn: -1, Part: "status"}
		case len(d.Output) > 0:
			d.First = &Location{Turn: -1, Part: "output", Path: d.Output[0].Path}
		case len(d.Error) > 0:
			d.First = &Location{Turn: -1, Part: "error", Path: d.Error[0].Path}
		case d.InputTokensDelta != 0 || d.OutputTokensDelta != 0:
			d.First = &Location{Turn: -1, Part: "usage"}
		}
	}
	d.Equal = d.First == nil
	d.Truncated = trunc
	return d
}

func diffTurn(t int, ra, rb *runRecord, trunc *bool) *TurnDiff {
	td := &TurnDiff{Turn: t, ToolCalls: []*ToolCallDiff{}}
	switch {
	case t >= ra.turns:
		td.OnlyIn = "b"
	case t >= rb.turns:
		td.OnlyIn = "a"
	}
	td.Messages = diffMessages(ra.messages[t], rb.messages[t], trunc)
	ca, cb := ra.calls[t], rb.calls[t]
	td.ModelRequest = diffRequests(ca, ra.calls[t-1], cb, rb.calls[t-1], trunc)
	td.ModelResponse = diffRaw(rawOf(ca, func(c *store.ModelCall) json.RawMessage { return c.Response }),
		rawOf(cb, func(c *store.ModelCall) json.RawMessage { return c.Response }), trunc)
	if ca != nil {
		td.LatencyMsA = ca.LatencyMs
		td.InputTokensA, td.OutputTokensA = usageOf(ca.Response)
	}
	if cb != nil {
		td.LatencyMsB = cb.LatencyMs
		td.InputTokensB, td.OutputTokensB = usageOf(cb.Response)
	}
	td.InputTokensDelta = td.InputTokensB - td.InputTokensA
	td.OutputTokensDelta = td.OutputTokensB - td.OutputTokensA
	td.LatencyMsDelta = td.LatencyMsB - td.LatencyMsA

	byRef := map[string]*ToolCallDiff{}
	var order []string
	add := func(c *store.ToolCall, side string) {
		tc := byRef[c.Ref]
		if tc == nil {
			tc = &ToolCallDiff{Ref: c.Ref, Tool: c.Tool}
			byRef[c.Ref] = tc
			order = append(order, c.Ref)
		}
		if side == "a" {
			tc.StatusA, tc.DurationMsA = c.Status, durationMs(c)
		} else {
			tc.StatusB, tc.DurationMsB = c.Status, durationMs(c)
		}
	}
	find := func(list []*store.ToolCall, ref string) *store.ToolCall {
		for _, c := range list {
			if c.Ref == ref {
				return c
			}
		}
		return nil
	}
	for _, c := range ra.tools[t] {
		add(c, "a")
	}
	for _, c := range rb.tools[t] {
		add(c, "b")
	}
	for _, ref := range order {
		tc := byRef[ref]
		a, b := find(ra.tools[t], ref), find(rb.tools[t], ref)
		switch {
		case a == nil:
			tc.OnlyIn = "b"
		case b == nil:
			tc.OnlyIn = "a"
		}
		get := func(c *store.ToolCall, f func(*store.ToolCall) json.RawMessage) json.RawMessage {
			if c == nil {
				return nil
			}
			return f(c)
		}
		tc.Input = diffRaw(get(a, func(c *store.ToolCall) json.RawMessage { return c.Input }), get(b, func(c *store.ToolCall) json.RawMessage { return c.Input }), trunc)
		tc.Output = diffRaw(get(a, func(c *store.ToolCall) json.RawMessage { return c.Output }), get(b, func(c *store.ToolCall) json.RawMessage { return c.Output }), trunc)
		tc.Error = diffRaw(get(a, func(c *store.ToolCall) json.RawMessage { return c.Error }), get(b, func(c *store.ToolCall) json.RawMessage { return c.Error }), trunc)
		tc.DurationMsDelta = tc.DurationMsB - tc.DurationMsA
		tc.Equal = tc.OnlyIn == "" && tc.StatusA == tc.StatusB && len(tc.Input) == 0 && len(tc.Output) == 0 && len(tc.Error) == 0
		td.ToolCalls = append(td.ToolCalls, tc)
	}
	td.Equal = td.OnlyIn == "" && len(td.Messages) == 0 && len(td.ModelRequest) == 0 && len(td.ModelResponse) == 0 &&
		td.InputTokensDelta == 0 && td.OutputTokensDelta == 0
	for _, tc := range td.ToolCalls {
		td.Equal = td.Equal && tc.Equal
	}
	return td
}

// firstDifference names the earliest part of a turn that differs, in the order things happen in a
// turn: the request, the response, the tools, then the messages they made.
func (td *TurnDiff) firstDifference() *Location {
	switch {
	case td.OnlyIn != "":
		return &Location{Turn: td.Turn, Part: "turn"}
	case len(td.ModelRequest) > 0:
		return &Location{Turn: td.Turn, Part: "model_request", Path: td.ModelRequest[0].Path}
	case len(td.ModelResponse) > 0:
		return &Location{Turn: td.Turn, Part: "model_response", Path: td.ModelResponse[0].Path}
	}
	for _, tc := range td.ToolCalls {
		switch {
		case tc.Equal:
		case tc.OnlyIn != "" || tc.StatusA != tc.StatusB:
			return &Location{Turn: td.Turn, Part: "tool_call", Ref: tc.Ref}
		case len(tc.Input) > 0:
			return &Location{Turn: td.Turn, Part: "tool_input", Ref: tc.Ref, Path: tc.Input[0].Path}
		case len(tc.Output) > 0:
			return &Location{Turn: td.Turn, Part: "tool_output", Ref: tc.Ref, Path: tc.Output[0].Path}
		default:
			return &Location{Turn: td.Turn, Part: "tool_error", Ref: tc.Ref, Path: tc.Error[0].Path}
		}
	}
	if len(td.Messages) > 0 {
		return &Location{Turn: td.Turn, Part: "messages", Path: td.Messages[0].Path}
	}
	return &Location{Turn: td.Turn, Part: "usage"}
}

func rawOf(c *store.ModelCall, f func(*store.ModelCall) json.RawMessage) json.RawMessage {
	if c == nil {
		return nil
	}
	return f(c)
}

func durationMs(c *store.ToolCall) float64 {
	if c.FinishedAt == nil {
		return 0
	}
	return float64(c.FinishedAt.Sub(c.StartedAt).Microseconds()) / 1000
}

func usageOf(resp json.RawMessage) (in, out int) {
	var r struct {
		Usage *struct {
			InputTokens  int `json:"inputTokens"`
			OutputTokens int `json:"outputTokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(resp, &r) != nil || r.Usage == nil {
		return 0, 0
	}
	return r.Usage.InputTokens, r.Usage.OutputTokens
}

// diffMessages compares the history messages of one turn, by position; paths start with the
// message's seq in the history.
func diffMessages(a, b []*store.RunMessage, trunc *bool) Changes {
	var out Changes
	for i := range max(len(a), len(b)) {
		var ra, rb json.RawMessage
		seq := 0
		if i < len(a) {
			ra, seq = a[i].Content, a[i].Seq
		}
		if i < len(b) {
			rb, seq = b[i].Content, b[i].Seq
		}
		out = appendChanges(out, "/"+strconv.Itoa(seq), ra, rb, trunc)
	}
	return out
}

// diffRequests compares the model requests of a turn: every field but the messages as a whole,
// and of the messages only those the request adds to the previous turn's request and response,
// so that a difference is reported at the turn where it appears rather than in every later one.
func diffRequests(a, prevA, b, prevB *store.ModelCall, trunc *bool) Changes {
	ma, msgsA, startA := splitRequest(a, prevA)
	mb, msgsB, startB := splitRequest(b, prevB)
	var out Changes
	diffValue("", ma, mb, &out, trunc)
	for i := range max(len(msgsA)-startA, len(msgsB)-startB) {
		var va, vb any = missing{}, missing{}
		idx := startB + i
		if startA+i < len(msgsA) {
			va = msgsA[startA+i]
			if startB+i >= len(msgsB) {
				idx = startA + i
			}
		}
		if startB+i < len(msgsB) {
			vb = msgsB[startB+i]
		}
		diffValue("/messages/"+strconv.Itoa(idx), va, vb, &out, trunc)
	}
	return out
}

// splitRequest decodes a recorded request into its fields without messages, its messages, and the
// index of the first message that is new in this turn.
func splitRequest(c, prev *store.ModelCall) (any, []any, int) {
	if c == nil {
		return missing{}, nil, 0
	}
	v, err := decode(c.Request)
	if err != nil {
		return string(c.Request), nil, 0
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v, nil, 0
	}
	msgs, _ := m["messages"].([]any)
	rest := make(map[string]any, len(m))
	for k, x := range m {
		if k != "messages" {
			rest[k] = x
		}
	}
	start := 0
	if prev != nil {
		if pv, err := decode(prev.Request); err == nil {
			if pm, ok := pv.(map[string]any); ok {
				if pmsgs, ok := pm["messages"].([]any); ok {
					start = min(len(pmsgs)+1, len(msgs))
				}
			}
		}
	}
	return rest, msgs, start
}
