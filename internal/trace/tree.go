package trace

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/loupe-dev/loupe/internal/store"
)

// Node is one span of a trace tree.
type Node struct {
	store.Span
	// DurationNS is 0 while the span runs.
	DurationNS int64 `json:"duration_ns"`
	// Running marks a span that has started and not ended (end time 0).
	Running bool `json:"running"`
	// Orphan marks a span whose parent is not in the trace (not arrived yet, dropped, or in another
	// program); it is kept under the root rather than lost.
	Orphan bool `json:"orphan,omitempty"`
	// Status is the span's outcome as Loupe reads it (see StatusName): ok, error, interrupted or
	// unset.
	Status   string  `json:"status"`
	Children []*Node `json:"children"`
}

// StatusName is a span's outcome from its status code and genkit:state: an error, an interrupt
// (a tool that asked a question, which is not an error; ingest reads Genkit's interrupts so, see
// markInterrupt), ok, or unset.
func StatusName(code int16, state string) string {
	switch {
	case code == store.StatusError:
		return "error"
	case state == "interrupted":
		return "interrupted"
	case code == store.StatusOK:
		return "ok"
	}
	return "unset"
}

// spanState is a stored span's genkit:state, read without decoding its attributes.
func spanState(attrs json.RawMessage) string {
	if len(attrs) == 0 || attrs[0] != '{' {
		return ""
	}
	raw, _ := objectMembers(attrs, "genkit:state", "genkit:state")
	return jsonString(raw)
}

// Tree is a trace assembled for display.
type Tree struct {
	Trace *store.Trace `json:"trace"`
	// Roots holds the root span, normally one. A trace whose root has not arrived has its orphans
	// here instead, each marked.
	Roots     []*Node `json:"roots"`
	SpanCount int     `json:"span_count"`
}

// Tree fetches a trace and assembles it.
func (s *Service) Tree(ctx context.Context, traceID string) (*Tree, error) {
	traceID, err := ParseTraceID(traceID)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	tr, err := s.store.TraceGet(ctx, traceID)
	if err != nil {
		return nil, err
	}
	spans, err := s.store.SpansByTrace(ctx, traceID, tr.SpanCount)
	if err != nil {
		return nil, err
	}
	return &Tree{Trace: tr, Roots: BuildTree(spans), SpanCount: len(spans)}, nil
}

// BuildTree links spans to their parents in O(n). Spans must be in start order; children keep
// it. A span whose parent is missing, or whose parent chain loops back to itself, is an orphan:
// it goes under the first root, marked, or becomes a root itself when there is none.
func BuildTree(spans []store.Span) []*Node {
	nodes := make([]Node, len(spans))
	byID := make(map[string]int32, len(spans))
	for i := range spans {
		nodes[i].Span = spans[i]
		nodes[i].Running = spans[i].EndTime == 0
		nodes[i].Status = StatusName(spans[i].StatusCode, spanState(spans[i].Attributes))
		if !nodes[i].Running {
			nodes[i].DurationNS = spans[i].EndTime - spans[i].StartTime
		}
		byID[spans[i].SpanID] = int32(i)
	}
	// Union-find over parent edges detects cycles without walking chains.
	uf := make([]int32, len(spans))
	for i := range uf {
		uf[i] = int32(i)
	}
	find := func(x int32) int32 {
		for uf[x] != x {
			uf[x] = uf[uf[x]]
			x = uf[x]
		}
		return x
	}
	var roots, orphans []*Node
	for i := range nodes {
		n := &nodes[i]
		if n.ParentSpanID == nil {
			roots = append(roots, n)
			continue
		}
		p, ok := byID[*n.ParentSpanID]
		if ok {
			a, b := find(int32(i)), find(p)
			if a != b {
				uf[a] = b
				nodes[p].Children = append(nodes[p].Children, n)
				continue
			}
		}
		n.Orphan = true
		orphans = append(orphans, n)
	}
	if len(orphans) == 0 {
		return nonNil(roots)
	}
	if len(roots) == 0 {
		return orphans
	}
	root := roots[0]
	root.Children = append(root.Children, orphans...)
	slices.SortStableFunc(root.Children, func(a, b *Node) int {
		switch {
		case a.StartTime < b.StartTime:
			return -1
		case a.StartTime > b.StartTime:
			return 1
		}
		return 0
	})
	return roots
}

func nonNil(n []*Node) []*Node {
	if n == nil {
		return []*Node{}
	}
	return n
}

// Turn summarises one turn of the generate loop: the model call and the tool calls it led to.
type Turn struct {
	Index        int        `json:"index"`
	SpanID       string     `json:"span_id"`
	Model        string     `json:"model,omitempty"`
	InputTokens  int64      `json:"input_tokens"`
	OutputTokens int64      `json:"output_tokens"`
	ToolCalls    []ToolCall `json:"tool_calls"`
	StartTime    int64      `json:"start_time_unix_nano"`
	EndTime      int64      `json:"end_time_unix_nano"` // its span's end
	// DurationNS is the turn's own time: Genkit runs the next turn inside the span of the one
	// before, so a turn's own time ends where the next turn starts.
	DurationNS int64  `json:"duration_ns"`
	Running    bool   `json:"running"`         // its own part is still running
	State      string `json:"state,omitempty"` // genkit:state: success, error, interrupted
}

// ToolCall is one tool execution within a turn.
type ToolCall struct {
	Name       string `json:"name"`
	SpanID     string `json:"span_id"`
	DurationNS int64  `json:"duration_ns"`
	Running    bool   `json:"running"`
	State      string `json:"state,omitempty"`
}

// Turns summarises a trace turn by turn. A turn is a generate span: Loupe's carry loupe.turn.index;
// Genkit's (genkit:type util, genkit:name generate) are numbered in start order. Model and tool
// spans belong to their nearest turn ancestor. Attributes are read in SQL, so that a large trace's
// JSON is never decoded here.
func (s *Service) Turns(ctx context.Context, traceID string) ([]Turn, error) {
	traceID, err := ParseTraceID(traceID)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	if _, err := s.store.TraceGet(ctx, traceID); err != nil {
		return nil, err
	}
	facts, err := s.store.SpanTurnFactsByTrace(ctx, traceID)
	if err != nil {
		return nil, err
	}
	return BuildTurns(facts), nil
}

// BuildTurns computes the per-turn summary from span facts in start order.
func BuildTurns(facts []store.SpanTurnFacts) []Turn {
	byID := make(map[string]int, len(facts))
	for i := range facts {
		byID[facts[i].SpanID] = i
	}
	turnOf := make(map[int]int) // fact index of a turn span -> index in turns
	turns := []Turn{}
	for i := range facts {
		f := &facts[i]
		if !isTurnSpan(f) {
			continue
		}
		t := Turn{Index: len(turns), SpanID: f.SpanID, StartTime: f.StartTime, EndTime: f.EndTime,
			Running: f.EndTime == 0, State: deref(f.State), ToolCalls: []ToolCall{}}
		if f.TurnIndex != nil {
			if n, err := strconv.Atoi(*f.TurnIndex); err == nil {
				t.Index = n
			}
		}
		if !t.Running {
			t.DurationNS = f.EndTime - f.StartTime
		}
		if f.Model != nil {
			t.Model = *f.Model
		}
		turnOf[i] = len(turns)
		turns = append(turns, t)
	}
	// nearest turn ancestor, memoised; -1 for none. Depth is bounded to survive parent loops.
	memo := make(map[int]int, len(facts))
	var ancestor func(i, depth int) int
	ancestor = func(i, depth int) int {
		if v, ok := memo[i]; ok {
			return v
		}
		res := -1
		if p := facts[i].ParentSpanID; p != nil && depth < 10000 {
			if pi, ok := byID[*p]; ok {
				if _, isTurn := turnOf[pi]; isTurn {
					res = pi
				} else {
					res = ancestor(pi, depth+1)
				}
			}
		}
		memo[i] = res
		return res
	}
	for i := range turnOf {
		// A turn nested in a turn ends the outer one's own time.
		if a := ancestor(i, 0); a >= 0 {
			outer := &turns[turnOf[a]]
			if own := facts[i].StartTime - outer.StartTime; own >= 0 && (outer.Running || own < outer.DurationNS) {
				outer.DurationNS, outer.Running = own, false
			}
		}
	}
	for i := range facts {
		f := &facts[i]
		if _, isTurn := turnOf[i]; isTurn {
			continue
		}
		kind := spanRole(f)
		if kind == "" {
			continue
		}
		a := ancestor(i, 0)
		if a < 0 {
			continue
		}
		t := &turns[turnOf[a]]
		switch kind {
		case "model":
			if t.Model == "" || f.Model != nil {
				t.Model = firstNonEmpty(deref(f.Model), deref(f.GenkitName), f.Name)
			}
			in, out := tokens(f)
			t.InputTokens += in
			t.OutputTokens += out
		case "tool":
			tc := ToolCall{Name: firstNonEmpty(deref(f.ToolName), deref(f.GenkitName), f.Name), SpanID: f.SpanID,
				Running: f.EndTime == 0, State: deref(f.State)}
			if !tc.Running {
				tc.DurationNS = f.EndTime - f.StartTime
			}
			t.ToolCalls = append(t.ToolCalls, tc)
		}
	}
	return turns
}

func isTurnSpan(f *store.SpanTurnFacts) bool {
	if f.TurnIndex != nil && (deref(f.Operation) == "invoke_agent" || deref(f.GenkitType) == "util") {
		return true
	}
	return deref(f.GenkitType) == "util" && deref(f.GenkitName) == "generate"
}

func spanRole(f *store.SpanTurnFacts) string {
	switch {
	case deref(f.Operation) == "chat", deref(f.Subtype) == "model":
		return "model"
	case deref(f.Operation) == "execute_tool", deref(f.Subtype) == "tool", deref(f.Subtype) == "tool.v2":
		return "tool"
	}
	return ""
}

func tokens(f *store.SpanTurnFacts) (in, out int64) {
	if f.InputTokens != nil || f.OutputTokens != nil {
		in, _ = strconv.ParseInt(deref(f.InputTokens), 10, 64)
		out, _ = strconv.ParseInt(deref(f.OutputTokens), 10, 64)
		return in, out
	}
	if f.ModelOutput == nil {
		return 0, 0
	}
	var o struct {
		Usage struct {
			InputTokens  float64 `json:"inputTokens"`
			OutputTokens float64 `json:"outputTokens"`
		} `json:"usage"`
	}
	if json.Unmarshal([]byte(*f.ModelOutput), &o) != nil {
		return 0, 0
	}
	return int64(o.Usage.InputTokens), int64(o.Usage.OutputTokens)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
