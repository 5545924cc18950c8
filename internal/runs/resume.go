package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// resumeOptions are the engine's options for resume parts.
func resumeOptions(respond, restart []*engine.Part) []engine.GenerateOption {
	var opts []engine.GenerateOption
	if len(restart) > 0 {
		opts = append(opts, engine.WithRestart(restart...))
	}
	if len(respond) > 0 {
		opts = append(opts, engine.WithRespond(respond...))
	}
	return opts
}

// resumeParts rebuilds Genkit's resume.respond and resume.restart from the decisions stored on
// the interrupts of the history's last model message, for a generate that runs here (through
// resumeOptions) or in another process (external.go). A history that does not end in tool requests
// needs none: the execution continues with the next model call. history is one Generate call's,
// whose turns start at turnBase in the run's.
func (s *Service) resumeParts(ctx context.Context, run *store.Run, l *lease, history []*engine.Message, turnBase int) (respond, restart []*engine.Part, err error) {
	last := history[len(history)-1]
	if last.Role != engine.RoleModel || len(last.ToolRequests()) == 0 {
		return nil, nil, nil
	}
	turn := turnBase + engine.CountModelMessages(history) - 1
	interrupts, err := s.store.InterruptListByRun(ctx, run.ID)
	if err != nil {
		return nil, nil, err
	}
	latest := map[string]*store.Interrupt{} // by ref: the newest round of this turn
	for _, i := range interrupts {
		if i.Turn == turn {
			latest[i.Ref] = i
		}
	}
	for _, p := range last.ToolRequests() {
		if _, ok := p.Metadata[engine.MetaPendingOutput]; ok {
			continue // answered before; the engine reuses it
		}
		tr := p.ToolRequest
		it, ok := latest[tr.Ref]
		if !ok {
			return nil, nil, fmt.Errorf("resume run %s: tool request %s (ref %s) of turn %d has no interrupt to resume from", run.ID, tr.Name, tr.Ref, turn)
		}
		var res resolution
		if len(it.Resolution) > 0 {
			if err := json.Unmarshal(it.Resolution, &res); err != nil {
				return nil, nil, fmt.Errorf("decode resolution of interrupt %s: %w", it.ID, err)
			}
		}
		resumed := map[string]any{"decision": it.Status}
		if it.ResolvedBy != nil {
			resumed["by"] = *it.ResolvedBy
		}
		if it.Comment != nil {
			resumed["comment"] = *it.Comment
		}
		switch it.Status {
		case store.InterruptApproved:
			restart = append(restart, engine.RestartPart(tr.Name, tr.Ref, nil, resumed))
		case store.InterruptEdited:
			restart = append(restart, engine.RestartPart(tr.Name, tr.Ref, res.Input, resumed))
		case store.InterruptResponded:
			respond = append(respond, engine.RespondPart(tr.Name, tr.Ref, res.Output))
			if err := s.answerLedger(ctx, l, it, res.Output); err != nil {
				return nil, nil, err
			}
		case store.InterruptDenied:
			if res.Output == nil {
				// Denied by a program that lacks the tool (resolve.go): the standard denial, or the
				// tool's own.
				res.Output = s.denial(tr.Name, deref(it.ResolvedBy), deref(it.Comment))
			}
			respond = append(respond, engine.DenyPart(tr.Name, tr.Ref, res.Output))
			if err := s.answerLedger(ctx, l, it, res.Output); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, fmt.Errorf("resume run %s: interrupt %s of %s is %s: %w", run.ID, it.ID, tr.Name, it.Status, ErrConflict)
		}
	}
	return respond, restart, nil
}

// answerLedger marks a call answered by a reviewer in the tool-call ledger.
func (s *Service) answerLedger(ctx context.Context, l *lease, it *store.Interrupt, output any) error {
	raw, err := json.Marshal(engine.ToolOutput{Output: output})
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	return s.store.ToolCallAnswer(ctx, l.fence, it.Turn, it.Ref, raw)
}

// resolution is what an interrupt's resolution column holds.
type resolution struct {
	Action string `json:"action"`
	Input  any    `json:"input,omitempty"`
	Output any    `json:"output,omitempty"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
