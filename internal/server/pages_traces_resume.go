package server

import (
	"context"
	"slices"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// maxResumeChain bounds how many resumes back a trace's turn numbering is followed.
const maxResumeChain = 16

// resumeOrigin is where a trace that resumes an interrupted one (a Genkit app's resume is a
// trace of its own) comes from: the interrupted tool call's span and its turn in that trace, and
// turnBase, the number of the resuming trace's first turn: the turn after the interrupted one,
// counted across the whole chain of resumes, so that a run's turns number on from execution to
// execution as they do in a trace that Loupe continues itself.
type resumeOrigin struct {
	TraceID, SpanID, Tool string
	Turn                  int
	TurnBase              int
}

// resumeOrigin finds the interrupted call that traceID resumes (store.TraceResumedCalls) in the
// interrupted trace's turns; ok is false when the trace resumes nothing, or when the interrupted
// trace holds no such interrupted call (its spans not stored).
func (s *Server) resumeOrigin(ctx context.Context, traceID string) (_ *resumeOrigin, ok bool, _ error) {
	seen := map[string]bool{traceID: true}
	var chain []*resumeOrigin
	for id := traceID; len(chain) < maxResumeChain; {
		o, err := s.resumedCall(ctx, id)
		if err != nil || o == nil || seen[o.TraceID] {
			if err != nil {
				return nil, false, err
			}
			break
		}
		seen[o.TraceID] = true
		chain = append(chain, o)
		id = o.TraceID
	}
	if len(chain) == 0 {
		return nil, false, nil
	}
	// From the first execution on: each trace's turns start after the turn its resume came from.
	base := 0
	for i := len(chain) - 1; i >= 0; i-- {
		chain[i].Turn += base
		base = chain[i].Turn + 1
		chain[i].TurnBase = base
	}
	return chain[0], true, nil
}

// resumedCall is one step of resumeOrigin: the interrupted call traceID resumes, its turn
// counted within the interrupted trace.
func (s *Server) resumedCall(ctx context.Context, traceID string) (*resumeOrigin, error) {
	calls, err := s.reads.TraceResumedCalls(ctx, traceID)
	if err != nil || len(calls) == 0 {
		return nil, err
	}
	from := calls[0].InterruptedTrace
	sk, err := s.loadSkeleton(ctx, from)
	if err != nil {
		return nil, err
	}
	return interruptedCallIn(sk.Skeleton, from, calls), nil
}

// interruptedCallIn finds, in the skeleton of the interrupted trace, the interrupted tool call
// among calls (by its call id when the span has one, else by the tool's name), the latest one.
func interruptedCallIn(sk *trace.Skeleton, from string, calls []store.ResumedCall) *resumeOrigin {
	for ti := len(sk.Turns) - 1; ti >= 0; ti-- {
		t := sk.Turns[ti]
		for _, c := range slices.Backward(t.ToolCalls) {
			if c.State != "interrupted" {
				continue
			}
			for _, rc := range calls {
				if rc.InterruptedTrace == from && rc.Tool == c.Name && (c.CallID == "" || c.CallID == rc.Ref) {
					return &resumeOrigin{TraceID: from, SpanID: c.SpanID, Tool: c.Name, Turn: t.Index}
				}
			}
		}
	}
	return nil
}
