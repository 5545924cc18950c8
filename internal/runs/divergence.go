package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// Divergence is the first difference an exact replay found between itself and its original.
type Divergence struct {
	Turn int `json:"turn"`
	// Part is model_request, model_call (the original has no call for the turn), tool_input (a
	// reviewer of the replay edited a call's arguments), tool_output, tool_call (a call the
	// original did not make, or that ended another way), output or status.
	Part     string `json:"part"`
	Ref      string `json:"ref,omitempty"`
	Tool     string `json:"tool,omitempty"`
	Path     string `json:"path,omitempty"`
	Original any    `json:"original,omitempty"`
	Replay   any    `json:"replay,omitempty"`
	Message  string `json:"message"`
}

// diverge records the replay's first divergence; later ones are ignored.
func (p *replayer) diverge(ctx context.Context, d Divergence) error {
	p.mu.Lock()
	if p.diverged {
		p.mu.Unlock()
		return nil
	}
	p.diverged = true
	p.mu.Unlock()
	raw, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode divergence: %w", err)
	}
	first, err := p.svc.store.ReplayDiverge(context.WithoutCancel(ctx), p.rec.lease.fence, raw)
	if err != nil {
		return err
	}
	if first {
		p.svc.log.Info("exact replay diverged", "run", p.run.ID, "original", p.source, "turn", d.Turn, "part", d.Part, "path", d.Path)
		p.svc.publish(p.run.ID, event.RunDivergenceData{Turn: d.Turn, Part: d.Part})
	}
	return nil
}

// CompareOutcome compares how a derived run (an exact replay, a re-run or a fork) ended with how
// its original did: the final status and, when both succeeded, the output. It returns nil when
// they are the same, and when the derived run has not ended or waits for a reviewer (there is
// nothing to compare yet). An exact replay stores this comparison as its divergence (unless an
// earlier turn diverged first); a re-run or a fork stores none, since it is expected to call a
// live model, so callers that check one against its original (devui replay) use this.
func CompareOutcome(orig, derived *store.Run) *Divergence {
	switch derived.Status {
	case store.RunSucceeded, store.RunFailed, store.RunAborted:
	default:
		return nil
	}
	return compareOutcome(max(derived.Turns-1, 0), orig.Status, orig.Output, derived.Status, derived.Output)
}

func compareOutcome(turn int, origStatus string, origOut json.RawMessage, status string, out json.RawMessage) *Divergence {
	if status != origStatus {
		return &Divergence{Turn: turn, Part: "status", Original: origStatus, Replay: status,
			Message: fmt.Sprintf("the replay ended %s; the original ended %s", status, origStatus)}
	}
	if status == store.RunSucceeded {
		if changes := diffJSON(origOut, out); len(changes) > 0 {
			c := changes[0]
			return &Divergence{Turn: turn, Part: "output", Path: c.Path, Original: c.A, Replay: c.B,
				Message: "the replay's output differs from the original's" + pathSuffix(c.Path)}
		}
	}
	return nil
}

func pathSuffix(path string) string {
	if path == "" {
		return ""
	}
	return " at " + path
}
