package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// checkReplay validates the request against the original run and normalises it.
// The action and an overriding model may be another program's, announced in the catalogue: the
// worker that executes the replay has them.
func (s *Service) checkReplay(ctx context.Context, orig *store.Run, p *ReplayParams) error {
	switch p.Mode {
	case store.ReplayExact, store.ReplayRerun, store.ReplayFork:
	default:
		return &ValidationError{Field: "mode", Message: fmt.Sprintf("%q is not one of exact, rerun, fork", p.Mode)}
	}
	if orig.Status == store.RunQueued || orig.Status == store.RunRunning {
		return fmt.Errorf("run %s is still %s: replay it once it has ended or waits for a reviewer: %w", orig.ID, orig.Status, ErrConflict)
	}
	if d, found, err := s.lookupAction(ctx, orig.Action); err != nil {
		return err
	} else if !found {
		return &ValidationError{Field: "run", Message: fmt.Sprintf("action %s is no longer registered", orig.Action)}
	} else if external, _ := d.Metadata[MetaExternal].(bool); external && p.Mode != store.ReplayRerun {
		// Exact playback and forks work on the engine's generate loop; an external action's loop
		// runs in its own program, which would call the model and run the tools again.
		return &ValidationError{Field: "mode", Message: fmt.Sprintf("%s runs in another program (a Genkit app): it can be re-run (mode rerun), not replayed exactly or forked", orig.Action)}
	}
	switch p.Tools {
	case "":
		p.Tools = store.ReplayToolsLive
		if p.Mode == store.ReplayExact {
			p.Tools = store.ReplayToolsCassette // never repeat an effect unless asked to
		}
	case store.ReplayToolsLive:
	case store.ReplayToolsCassette:
		if p.Mode != store.ReplayExact {
			return &ValidationError{Field: "tools", Message: "cassette tools need mode exact: a live model makes new tool calls (tools recorded serves them by tool and input)"}
		}
	case store.ReplayToolsRecorded:
		if p.Mode != store.ReplayRerun {
			return &ValidationError{Field: "tools", Message: "recorded tools need mode rerun (an exact replay serves its tools with tools cassette)"}
		}
		p.ApplyResolutions = true // the recorded decisions are what lets a recorded call run
	default:
		return &ValidationError{Field: "tools", Message: fmt.Sprintf("%q is not one of live, cassette, recorded", p.Tools)}
	}
	if p.ApplyResolutions && p.Mode != store.ReplayExact && p.Tools != store.ReplayToolsRecorded {
		return &ValidationError{Field: "apply_resolutions", Message: "recorded resolutions are applied by exact replays (and re-runs with tools recorded) only; other modes offer them as defaults"}
	}
	if p.Turn != nil && p.Mode != store.ReplayFork {
		return &ValidationError{Field: "turn", Message: "turn applies to mode fork only"}
	}
	if p.Mode == store.ReplayFork && p.Turn == nil {
		return &ValidationError{Field: "turn", Message: "a fork needs the turn to fork from"}
	}
	if len(p.Edits) > 0 && p.Mode != store.ReplayFork {
		return &ValidationError{Field: "edits", Message: "edits apply to mode fork only"}
	}
	return s.checkOverrides(ctx, p.Mode, p.Overrides)
}

// checkOverrides validates and normalises the overrides of a derived run of the given mode.
func (s *Service) checkOverrides(ctx context.Context, mode string, o *Overrides) error {
	if o != nil {
		if mode == store.ReplayExact {
			return &ValidationError{Field: "overrides", Message: "an exact replay serves the recorded responses; use mode rerun or fork to override"}
		}
		if o.Model != "" {
			d, found, err := s.lookupAction(ctx, engine.ModelKeys(o.Model)...)
			if err != nil {
				return err
			}
			if !found || d.Type != engine.ActionTypeModel {
				return &ValidationError{Field: "overrides/model", Message: fmt.Sprintf("model %q is not registered", o.Model)}
			}
			// Asked for by key (/model/demo/travel, as the run page's menu does) or by name, it
			// is stored by name: the run records the model it calls under the name given, and
			// its own model is recorded by name.
			if d.Name != "" {
				o.Model = d.Name
			}
		}
		if string(bytes.TrimSpace(o.Config)) == "null" {
			o.Config = nil // "config": null overrides nothing
		}
		if len(o.Config) > 0 {
			var cfg map[string]any
			if err := json.Unmarshal(o.Config, &cfg); err != nil {
				return &ValidationError{Field: "overrides/config", Message: "must be a JSON object of model settings, such as {\"temperature\": 0.2}", Cause: err}
			}
		}
		if o.MaxTurns != nil && *o.MaxTurns < 1 {
			return &ValidationError{Field: "overrides/max_turns", Message: fmt.Sprintf("must be 1 or more, not %d; omit it to keep the flow's turn limit", *o.MaxTurns)}
		}
		if o.System != nil && mode == store.ReplayFork {
			return &ValidationError{Field: "overrides/system", Message: "a fork keeps its copied system message; edit that message instead"}
		}
		if o.System != nil && strings.TrimSpace(*o.System) == "" {
			return &ValidationError{Field: "overrides/system", Message: "an empty system prompt is not an override: omit system to keep the flow's own"}
		}
	}
	return nil
}
