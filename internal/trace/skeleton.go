package trace

import (
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// Skeleton is a trace's span tree as the trace and run pages show it, built from span facts
// (BuildSkeleton; no payload is read): the display parents and children, the roots, the turns
// (BuildTurns), the spans whose parent is missing, where errors start, whether the trace is
// running or stale, and the waterfall's axis and own times. Generate turns nest in Genkit's traces
// (turn 1 is a child of turn 0); here a turn nested in a turn is lifted beside it, so that a long
// run reads as a list of turns instead of a staircase. The server only maps it to view models.
type Skeleton struct {
	TraceID string
	Facts   []store.SpanTurnFacts
	// Index is a span's position in Facts by its id.
	Index map[string]int32
	// Children are each span's display children in start order; Parent its display parent (-1
	// for a root); Roots the spans without one.
	Children [][]int32
	Parent   []int32
	Roots    []int32
	// Turn is a span's turn index, -1 for spans that are not turns.
	Turn []int
	// Turns is the per-turn summary (BuildTurns), which also says which spans are turns.
	Turns []Turn
	// Missing is, for a span whose parent is not in the trace (not yet, or never), that parent's id.
	Missing []string
	// Axis0 and AxisLen are the waterfall's axis: from the first start, over the trace's extent (to
	// now while it runs).
	Axis0   int64
	AxisLen int64
	// Running is true when a span has no end yet and the trace is active; Stale, when a span has no
	// end but nothing in the trace has happened for the stale delay: its end will not come.
	Running bool
	Stale   bool
	// Latest is the trace's last known time: the latest start or end of any span.
	Latest int64
	// OwnError marks the spans where an error starts: failed, with no failed span below them.
	// InnerError marks the spans with one below them (a failed ancestor, whose red only repeats
	// its child's, or a span that did not fail itself).
	OwnError, InnerError []bool
	// Timeline is the waterfall's axis, its long idle stretches folded; Self is each span's own time.
	Timeline *Timeline
	Self     []int64
	// Open is true when a span of the trace has no end yet (it runs, or it is stale). A skeleton
	// without one depends on nothing but its facts, and may be kept for as long as they are.
	Open bool
	// nested maps a turn to the first turn nested in it (see NestedTurn). A skeleton is not
	// changed once built, so requests may share one.
	nested map[int32]int32
	// traceParent is each span's parent in the trace (parentsInTrace), before turns are lifted.
	traceParent []int32
}

// BuildSkeleton builds the tree from span facts in start order, at time now; a trace with a span
// that has no end and nothing new for staleAfter is stale rather than running.
func BuildSkeleton(traceID string, facts []store.SpanTurnFacts, now int64, staleAfter time.Duration) *Skeleton {
	n := len(facts)
	sk := &Skeleton{TraceID: traceID, Facts: facts, Index: make(map[string]int32, n),
		Children: make([][]int32, n), Parent: make([]int32, n), Turn: make([]int, n), Missing: make([]string, n)}
	for i := range facts {
		sk.Index[facts[i].SpanID] = int32(i)
	}
	for i := range facts {
		if p := facts[i].ParentSpanID; p != nil && *p != "" {
			if _, ok := sk.Index[*p]; !ok {
				sk.Missing[i] = *p
			}
		}
		sk.Turn[i] = -1
	}
	sk.Turns = BuildTurns(facts)
	for _, t := range sk.Turns {
		sk.Turn[sk.Index[t.SpanID]] = t.Index
	}
	sk.traceParent = parentsInTrace(n, sk.Index, func(i int) *string { return facts[i].ParentSpanID })
	// A turn whose parent is a turn hangs from that turn's own display parent: the first ancestor
	// that is not a turn. Each chain of nested turns is walked once (Genkit nests every turn in the
	// one before, so walking it from each turn would be quadratic in the turns); a chain that loops
	// ends at the turn where the loop closes, and the orphan pass below places it.
	lifted := make([]int32, n)
	state := make([]uint8, n) // 0: not yet, 1: on the chain being walked, 2: lifted
	var chain []int32
	for i := range facts {
		sk.Parent[i] = sk.traceParent[i]
		if sk.Turn[i] < 0 || state[i] == 2 {
			continue
		}
		chain = chain[:0]
		to := int32(-1)
		for x := int32(i); ; {
			if state[x] == 2 {
				to = lifted[x]
				break
			}
			if state[x] == 1 {
				to = x
				break
			}
			state[x] = 1
			chain = append(chain, x)
			p := sk.traceParent[x]
			if p < 0 || sk.Turn[p] < 0 {
				to = p
				break
			}
			x = p
		}
		for _, c := range chain {
			lifted[c], state[c] = to, 2
		}
	}
	for i := range facts {
		if sk.Turn[i] >= 0 {
			sk.Parent[i] = lifted[i]
		}
	}
	// Roots first, then everything reachable from them; what is not (a missing parent, a loop) is
	// an orphan under the first root.
	var min0, latest int64
	open := false
	for i := range facts {
		f := &facts[i]
		if sk.Parent[i] < 0 {
			sk.Roots = append(sk.Roots, int32(i))
		}
		open = open || f.EndTime == 0
		if min0 == 0 || f.StartTime < min0 {
			min0 = f.StartTime
		}
		latest = max(latest, f.StartTime, f.EndTime)
	}
	sk.Latest = latest
	max1 := latest
	if open {
		if now-latest > int64(staleAfter) {
			// Nothing has happened for a while: the axis ends at the last thing that did, so that
			// a span whose end never came does not squeeze every other bar to a sliver.
			sk.Stale = true
		} else {
			sk.Running = true
			max1 = max(now, latest)
		}
	}
	for i := range facts {
		if p := sk.Parent[i]; p >= 0 {
			sk.Children[p] = append(sk.Children[p], int32(i))
		}
	}
	seen := make([]bool, n)
	stack := slices.Clone(sk.Roots)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[i] {
			continue
		}
		seen[i] = true
		stack = append(stack, sk.Children[i]...)
	}
	for i := range facts {
		if seen[i] {
			continue
		}
		// Part of a loop: cut it loose and hang it from the first root, or make it a root.
		if p := sk.Parent[i]; p >= 0 {
			sk.Children[p] = slices.DeleteFunc(sk.Children[p], func(c int32) bool { return c == int32(i) })
		}
		if len(sk.Roots) == 0 {
			sk.Parent[i] = -1
			sk.Roots = append(sk.Roots, int32(i))
		} else {
			r := sk.Roots[0]
			sk.Parent[i] = r
			sk.Children[r] = append(sk.Children[r], int32(i))
			sort.SliceStable(sk.Children[r], func(a, b int) bool {
				return facts[sk.Children[r][a]].StartTime < facts[sk.Children[r][b]].StartTime
			})
		}
		seen[i] = true
	}
	sk.Axis0, sk.AxisLen = min0, max(max1-min0, 1)
	sk.Open = open
	sk.markErrors()
	sk.nested = map[int32]int32{}
	for c := range facts {
		p := sk.traceParent[c]
		if sk.Turn[c] < 0 || p < 0 || sk.Turn[p] < 0 {
			continue
		}
		if old, seen := sk.nested[p]; !seen || facts[c].StartTime < facts[old].StartTime {
			sk.nested[p] = int32(c)
		}
	}
	sk.Timeline = BuildTimeline(facts, sk.Axis0, sk.Axis0+sk.AxisLen)
	sk.Self = SelfTimes(facts, sk.Axis0+sk.AxisLen)
	return sk
}

// markErrors finds where errors start. Genkit (and most tracers) mark every ancestor of a failed
// span failed too; only the deepest failed spans are where something went wrong, and the others
// merely contain them.
func (sk *Skeleton) markErrors() {
	n := len(sk.Facts)
	sk.OwnError, sk.InnerError = make([]bool, n), make([]bool, n)
	// The trace's own parents, not the display's: a turn lifted beside the turn it is nested in is
	// still what made that turn fail.
	up := func(i int32) int32 { return sk.traceParent[i] }
	for i := range sk.Facts {
		if sk.Facts[i].StatusCode != store.StatusError {
			continue
		}
		for p, hops := up(int32(i)), 0; p >= 0 && !sk.InnerError[p] && hops < n; p, hops = up(p), hops+1 {
			sk.InnerError[p] = true
		}
	}
	for i := range sk.Facts {
		sk.OwnError[i] = sk.Facts[i].StatusCode == store.StatusError && !sk.InnerError[i]
	}
}

// Failure is what failed in a trace, for its header: the first span (by start) where an error
// starts, said as "tool lookupOrder failed: …" or "turn limit 3 reached".
func (sk *Skeleton) Failure() (int32, string) {
	first := int32(-1)
	for i := range sk.Facts {
		if sk.OwnError[i] && (first < 0 || sk.Facts[i].StartTime < sk.Facts[first].StartTime) {
			first = int32(i)
		}
	}
	if first < 0 {
		return -1, ""
	}
	f := &sk.Facts[first]
	msg := strings.TrimSpace(f.StatusMessage)
	if m := turnLimitMessage.FindStringSubmatch(msg); m != nil {
		return first, "turn limit " + m[1] + " reached"
	}
	what := sk.Label(first)
	if what == "" {
		what = "span"
	}
	switch {
	case strings.HasPrefix(what, "turn "):
		what = "the generate of " + what
	case f.ToolName != nil && *f.ToolName != "":
		what += " " + *f.ToolName // a GenAI tool span is named "execute_tool <tool>"
	default:
		what += " " + f.Name
	}
	if msg == "" {
		return first, what + " failed"
	}
	return first, what + " failed: " + store.Shorten(msg, 200)
}

// Ancestors returns the display ancestors of a span, so that a deep link can open them.
func (sk *Skeleton) Ancestors(i int32) []int32 {
	var out []int32
	for p := sk.Parent[i]; p >= 0 && len(out) <= len(sk.Facts); p = sk.Parent[p] {
		out = append(out, p)
	}
	return out
}

// Label is a span's kind in the tree (SpanLabel), or its turn: "turn 2" for a generate
// span, "model · turn 2" for a GenAI model call that is a turn.
func (sk *Skeleton) Label(i int32) string { return sk.LabelFrom(i, 0) }

// LabelFrom is Label with the trace's turns numbered from base: a trace that resumes an
// interrupted one numbers on from the turn it resumes.
func (sk *Skeleton) LabelFrom(i int32, base int) string {
	f := &sk.Facts[i]
	if sk.Turn[i] >= 0 {
		if SpanKind(f) == KindModel {
			return "model · turn " + strconv.Itoa(base+sk.Turn[i])
		}
		return "turn " + strconv.Itoa(base+sk.Turn[i])
	}
	return SpanLabel(f, f.ParentSpanID == nil)
}

// PathTo maps each display ancestor of span i (-1 for the roots) to the index, among its
// children, of the child on the way to i.
func (sk *Skeleton) PathTo(i int32) map[int32]int {
	m := map[int32]int{}
	for c, hops := i, 0; c >= 0 && hops <= len(sk.Facts); hops++ {
		p := sk.Parent[c]
		kids := sk.Roots
		if p >= 0 {
			kids = sk.Children[p]
		}
		m[p] = slices.Index(kids, c)
		c = p
	}
	return m
}

// FindTool finds the span of a tool call in a turn (the last one, if the turn called it twice).
func (sk *Skeleton) FindTool(tool string, turn int) string {
	found := ""
	for i := range sk.Facts {
		f := &sk.Facts[i]
		if sk.Label(int32(i)) != "tool" || firstNonEmpty(deref(f.ToolName), deref(f.GenkitName), f.Name) != tool {
			continue
		}
		t := -1
		for p := sk.Parent[i]; p >= 0; p = sk.Parent[p] {
			if sk.Turn[p] >= 0 {
				t = sk.Turn[p]
				break
			}
		}
		if t == turn || turn < 0 {
			found = f.SpanID
		}
	}
	return found
}

// OpenAll opens the nodes under parent (the roots for -1) level by level, while the rows they
// show stay within budget; each shows at most page children.
func (sk *Skeleton) OpenAll(parent int32, budget, page int) map[int32]bool {
	open := map[int32]bool{}
	level := sk.Roots
	if parent >= 0 {
		open[parent] = true
		level = sk.Children[parent]
	}
	rows := len(level)
	for len(level) > 0 {
		var next []int32
		for _, i := range level {
			kids := sk.Children[i]
			if len(kids) == 0 {
				continue
			}
			shown := min(len(kids), page)
			if rows+shown > budget {
				return open
			}
			rows += shown
			open[i] = true
			next = append(next, kids[:shown]...)
		}
		level = next
	}
	return open
}

// DisplayOrder is each span's position in the tree read top to bottom, every node open.
func (sk *Skeleton) DisplayOrder() []int32 {
	order := make([]int32, len(sk.Facts))
	n := int32(0)
	stack := make([]int32, 0, len(sk.Roots))
	for k := len(sk.Roots) - 1; k >= 0; k-- {
		stack = append(stack, sk.Roots[k])
	}
	seen := make([]bool, len(sk.Facts))
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[i] {
			continue
		}
		seen[i] = true
		order[i] = n
		n++
		kids := sk.Children[i]
		for k := len(kids) - 1; k >= 0; k-- {
			stack = append(stack, kids[k])
		}
	}
	return order
}

// turnLimitMessage is the engine's and Genkit's error when a generate runs out of turns.
var turnLimitMessage = regexp.MustCompile(`exceeded maximum tool call iterations \((\d+)\)`)

// Kind is what the span is, for its bar's colour: model, tool, turn, flow (a flow, an agent, a
// Genkit root action), or other.
func (sk *Skeleton) Kind(i int32) string {
	f := &sk.Facts[i]
	switch k := SpanKind(f); {
	case k == KindModel:
		return "model"
	case k == KindTurn || sk.Turn[i] >= 0:
		return "turn"
	case k == KindTool:
		return "tool"
	case k == KindAgent, deref(f.Subtype) == "flow", deref(f.GenkitType) == "flow":
		return "flow"
	}
	return "other"
}

// NestedTurn is when the first turn nested in span i (a child of it in the trace that the tree
// lifts beside it) starts, and its index; 0 when there is none.
func (sk *Skeleton) NestedTurn(i int32) (int64, int) {
	if sk.Turn[i] < 0 {
		return 0, 0
	}
	c, ok := sk.nested[i]
	if !ok {
		return 0, 0
	}
	return sk.Facts[c].StartTime, sk.Turn[c]
}
