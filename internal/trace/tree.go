package trace

import (
	"context"
	"encoding/json"
	"fmt"
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
	Status string `json:"status"`
	// PayloadBytes is, in a skeleton, the size of the span's attributes, events, links and
	// resource as stored: what fetching the span in full (GET /api/v1/traces/{id}/spans/{span})
	// would add.
	PayloadBytes int64   `json:"payload_bytes,omitempty"`
	Children     []*Node `json:"children"`
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
	// Skeleton marks a tree read without its spans' payloads (attributes, events, links and
	// resource): see Service.Skeleton.
	Skeleton bool `json:"skeleton,omitempty"`
}

// Tree fetches a trace and assembles it.
func (s *Service) Tree(ctx context.Context, traceID string) (*Tree, error) {
	traceID, err := ParseTraceID(traceID)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	tr, err := s.reads.TraceGet(ctx, traceID)
	if err != nil {
		return nil, err
	}
	spans, err := s.reads.SpansByTrace(ctx, traceID, tr.SpanCount)
	if err != nil {
		return nil, err
	}
	return &Tree{Trace: tr, Roots: BuildTree(spans), SpanCount: len(spans)}, nil
}

// Skeleton fetches a trace without its spans' payloads and assembles it: the tree's shape, names,
// times and statuses, with each span's payload size, for a client that fetches payloads on demand.
func (s *Service) Skeleton(ctx context.Context, traceID string) (*Tree, error) {
	traceID, err := ParseTraceID(traceID)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	tr, err := s.reads.TraceGet(ctx, traceID)
	if err != nil {
		return nil, err
	}
	sks, err := s.reads.SpanSkeletonsByTrace(ctx, traceID, tr.SpanCount)
	if err != nil {
		return nil, err
	}
	spans := make([]store.Span, len(sks))
	for i := range sks {
		spans[i] = sks[i].Span
	}
	nodes := make([]Node, len(spans))
	for i := range nodes {
		nodes[i].PayloadBytes = sks[i].PayloadBytes
		nodes[i].Status = StatusName(sks[i].StatusCode, "")
		if sks[i].Interrupted {
			nodes[i].Status = StatusName(sks[i].StatusCode, "interrupted")
		}
	}
	return &Tree{Trace: tr, Roots: linkTree(spans, nodes), SpanCount: len(spans), Skeleton: true}, nil
}

// Span fetches one span of a trace in full, as a tree node without children.
func (s *Service) Span(ctx context.Context, traceID, spanID string) (*Node, error) {
	traceID, err := ParseTraceID(traceID)
	if err != nil {
		return nil, err
	}
	spanID, err = ParseSpanID(spanID)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	spans, err := s.reads.SpansGet(ctx, []store.SpanKey{{TraceID: traceID, SpanID: spanID}})
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("span %s of trace %s: %w", spanID, traceID, store.ErrNotFound)
	}
	sp := spans[0]
	n := &Node{Span: sp, Running: sp.EndTime == 0, Status: StatusName(sp.StatusCode, spanState(sp.Attributes))}
	if !n.Running {
		n.DurationNS = sp.EndTime - sp.StartTime
	}
	return n, nil
}

// parentsInTrace is each span's parent in the trace, by position: -1 for a root, for a span whose
// parent is not in the trace, and for one that names itself. Every tree of a trace starts from
// it (BuildTree, BuildTurns, BuildSkeleton); what each makes of a missing parent or a loop is said
// where it is built.
func parentsInTrace(n int, index map[string]int32, parentOf func(i int) *string) []int32 {
	parent := make([]int32, n)
	for i := range parent {
		parent[i] = -1
		if p := parentOf(i); p != nil {
			if j, ok := index[*p]; ok && j != int32(i) {
				parent[i] = j
			}
		}
	}
	return parent
}

// BuildTree links spans to their parents in O(n). Spans must be in start order; children keep
// it. A span whose parent is missing, or whose parent chain loops back to itself, is an orphan:
// it goes under the first root, marked, or becomes a root itself when there is none.
func BuildTree(spans []store.Span) []*Node {
	nodes := make([]Node, len(spans))
	for i := range spans {
		nodes[i].Status = StatusName(spans[i].StatusCode, spanState(spans[i].Attributes))
	}
	return linkTree(spans, nodes)
}

// linkTree is BuildTree over nodes whose Status (and PayloadBytes) are already set.
func linkTree(spans []store.Span, nodes []Node) []*Node {
	byID := make(map[string]int32, len(spans))
	for i := range spans {
		nodes[i].Span = spans[i]
		nodes[i].Running = spans[i].EndTime == 0
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
	parent := parentsInTrace(len(spans), byID, func(i int) *string { return spans[i].ParentSpanID })
	var roots, orphans []*Node
	for i := range nodes {
		n := &nodes[i]
		if n.ParentSpanID == nil {
			roots = append(roots, n)
			continue
		}
		if p := parent[i]; p >= 0 {
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

// Turn summarises one turn: the model call and the tool calls it led to.
type Turn struct {
	Index        int        `json:"index"`
	SpanID       string     `json:"span_id"`
	Model        string     `json:"model,omitempty"`
	InputTokens  int64      `json:"input_tokens"`
	OutputTokens int64      `json:"output_tokens"`
	FinishReason string     `json:"finish_reason,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls"`
	StartTime    int64      `json:"start_time_unix_nano"`
	EndTime      int64      `json:"end_time_unix_nano"` // its span's end, or its last tool call's
	// DurationNS is the turn's own time: Genkit runs the next turn inside the span of the one
	// before, so a turn's own time ends where the next turn starts.
	DurationNS int64  `json:"duration_ns"`
	Running    bool   `json:"running"`         // its own part is still running
	State      string `json:"state,omitempty"` // genkit:state, or from the OTel status: success, error, interrupted
}

// ToolCall is one tool execution within a turn.
type ToolCall struct {
	Name       string `json:"name"`
	SpanID     string `json:"span_id"`
	CallID     string `json:"call_id,omitempty"` // gen_ai.tool.call.id
	DurationNS int64  `json:"duration_ns"`
	Running    bool   `json:"running"`
	State      string `json:"state,omitempty"`
	Error      string `json:"error,omitempty"` // the status message of a call that failed
}

// Turns summarises a trace turn by turn (see BuildTurns). Attributes are read in SQL, so that a
// large trace's JSON is never decoded here.
func (s *Service) Turns(ctx context.Context, traceID string) ([]Turn, error) {
	traceID, err := ParseTraceID(traceID)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	if _, err := s.reads.TraceGet(ctx, traceID); err != nil {
		return nil, err
	}
	facts, err := s.reads.SpanTurnFactsByTrace(ctx, traceID)
	if err != nil {
		return nil, err
	}
	return BuildTurns(facts), nil
}

// BuildTurns computes the per-turn summary from span facts in start order. A turn is either a
// generate span (SpanKind KindTurn: Loupe's carry loupe.turn.index, Genkit's are numbered in start
// order), whose model and tool spans are its descendants; or, in a trace that follows the OTel
// GenAI conventions, a model call outside any generate span (a chat span, usually under an
// invoke_agent span), whose tool calls are the execute_tool spans under it or, as those
// conventions nest them, after it under the same agent, up to the next model call.
func BuildTurns(facts []store.SpanTurnFacts) []Turn {
	n := len(facts)
	byID := make(map[string]int32, n)
	for i := range facts {
		byID[facts[i].SpanID] = int32(i)
	}
	parent := make([]int, n)
	for i, p := range parentsInTrace(n, byID, func(i int) *string { return facts[i].ParentSpanID }) {
		parent[i] = int(p)
	}
	kinds := make([]string, n)
	isGenkitTurn, isAgent := make([]bool, n), make([]bool, n)
	for i := range facts {
		kinds[i] = SpanKind(&facts[i])
		isGenkitTurn[i] = kinds[i] == KindTurn
		isAgent[i] = kinds[i] == KindAgent
	}
	turnAncestor := nearestAncestor(parent, isGenkitTurn)
	isChatTurn := make([]bool, n)
	for i := range facts {
		isChatTurn[i] = kinds[i] == KindModel && turnAncestor[i] < 0
	}
	chatAncestor := nearestAncestor(parent, isChatTurn)
	agentAncestor := nearestAncestor(parent, isAgent)

	turnOf := make(map[int]int) // fact index of a turn span -> index in turns
	turns := []Turn{}
	var chatTurn []bool // per turn: a GenAI model call's
	for i := range facts {
		f := &facts[i]
		if !isGenkitTurn[i] && !isChatTurn[i] {
			continue
		}
		t := Turn{Index: len(turns), SpanID: f.SpanID, StartTime: f.StartTime, EndTime: f.EndTime,
			Running: f.EndTime == 0, State: factState(f), ToolCalls: []ToolCall{}}
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
		if isChatTurn[i] {
			t.Model = modelName(f)
			t.InputTokens, t.OutputTokens = tokens(f)
			t.FinishReason = finishReason(f)
		}
		turnOf[i] = len(turns)
		turns = append(turns, t)
		chatTurn = append(chatTurn, isChatTurn[i])
	}
	for i := range turnOf {
		// A turn nested in a turn ends the outer one's own time.
		if a := turnAncestor[i]; a >= 0 && isGenkitTurn[i] {
			outer := &turns[turnOf[a]]
			if own := facts[i].StartTime - outer.StartTime; own >= 0 && (outer.Running || own < outer.DurationNS) {
				outer.DurationNS, outer.Running = own, false
			}
		}
	}
	lastChat := map[int]int{} // agent fact index (-1 for none) -> the turn of its latest model call
	for i := range facts {
		f := &facts[i]
		if isChatTurn[i] {
			lastChat[agentAncestor[i]] = turnOf[i]
			continue
		}
		if isGenkitTurn[i] {
			continue
		}
		kind := kinds[i]
		if kind != KindModel && kind != KindTool {
			continue
		}
		ti := -1
		switch {
		case turnAncestor[i] >= 0:
			ti = turnOf[turnAncestor[i]]
		case kind != KindTool:
		case chatAncestor[i] >= 0:
			ti = turnOf[chatAncestor[i]]
		default:
			if last, ok := lastChat[agentAncestor[i]]; ok {
				ti = last
			}
		}
		if ti < 0 {
			continue
		}
		t := &turns[ti]
		switch kind {
		case KindModel:
			if t.Model == "" || f.Model != nil {
				t.Model = modelName(f)
			}
			in, out := tokens(f)
			t.InputTokens += in
			t.OutputTokens += out
			if r := finishReason(f); r != "" {
				t.FinishReason = r
			}
		case KindTool:
			tc := ToolCall{Name: toolName(f), SpanID: f.SpanID, CallID: deref(f.ToolCallID),
				Running: f.EndTime == 0, State: factState(f)}
			if !tc.Running {
				tc.DurationNS = f.EndTime - f.StartTime
			}
			if tc.State == "error" {
				tc.Error = f.StatusMessage
			}
			t.ToolCalls = append(t.ToolCalls, tc)
			if !chatTurn[ti] {
				continue
			}
			// A GenAI turn lasts until its last tool call ends.
			if tc.Running {
				t.Running = true
			} else if f.EndTime > t.EndTime && t.EndTime != 0 {
				t.EndTime = f.EndTime
				t.DurationNS = t.EndTime - t.StartTime
			}
		}
	}
	return turns
}

// nearestAncestor returns, for each span, the index of its nearest proper ancestor for which is
// holds, or -1. It is O(n) whatever the depth, and a parent loop ends the search.
func nearestAncestor(parent []int, is []bool) []int {
	n := len(parent)
	res := make([]int, n)
	state := make([]uint8, n) // 0 unseen, 1 on the current path, 2 done
	var path []int
	for i := range parent {
		if state[i] == 2 {
			continue
		}
		path = path[:0]
		j := i
		for j >= 0 && state[j] == 0 {
			state[j] = 1
			path = append(path, j)
			j = parent[j]
		}
		base := -1
		if j >= 0 && state[j] == 2 {
			base = res[j]
			if is[j] {
				base = j
			}
		}
		for k := len(path) - 1; k >= 0; k-- {
			p := path[k]
			res[p], state[p] = base, 2
			if is[p] {
				base = p
			}
		}
	}
	return res
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
