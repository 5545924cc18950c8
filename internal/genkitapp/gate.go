package genkitapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
)

// Gates on an app's tools. A generate Loupe runs in an app (a prompt's, /util/generate's, a flow's
// resumed one) runs its tools inside the app, past any gate of Loupe's. While a gate could apply
// (the policy in force has a gate rule, or one of the generate's tools asks for approval by its
// metadata, "loupe.requireApproval": true), Loupe asks the app's /util/generate for one model
// turn at a time instead (Genkit's returnToolRequests) and looks at each tool request before it
// runs: a gated one becomes an interrupt, the others run as the app's tool actions. The turn's
// interrupted model message carries the answers of those as Genkit's pendingOutput, so the
// resume (the app's resume.restart for an approved or edited call, resume.respond for a denial)
// runs nothing twice.

// genkitMaxTurns is Genkit's default maxTurns, the tool rounds of one generate.
const genkitMaxTurns = 5

// toolAction is the app's action that runs the tool a model's request names.
func (c *conn) toolAction(name string) *RemoteAction {
	for _, k := range []string{"/tool/" + name, "/tool.v2/" + name} {
		if a := c.actions[k]; a != nil {
			return a
		}
	}
	return nil
}

// requiresApproval reads loupe.requireApproval from an app's tool's metadata (defineTool's
// metadata in Genkit JS).
func requiresApproval(a *RemoteAction) bool {
	return a != nil && a.Metadata[engine.MetaRequireApproval] == true
}

// gating says whether the generate's tool requests must come back to Loupe before they run.
func (c *conn) gating(ctx context.Context, ext *runs.External, opts options) (bool, error) {
	if ext == nil {
		return false, nil
	}
	var own bool
	if json.Unmarshal(opts["returnToolRequests"], &own) == nil && own {
		return false, nil // the caller wants the requests themselves; nothing runs
	}
	for _, k := range opts.toolKeys() {
		if requiresApproval(c.toolAction(shortName(k))) {
			return true, nil
		}
	}
	return ext.HasGates(ctx)
}

// generateGated runs the generate one model turn at a time, gating and running each turn's tool
// requests itself, until the model answers without one or a gated (or interrupting) call stops
// the run for reviewers.
func (c *conn) generateGated(ctx context.Context, ext *runs.External, opts options, cb engine.StreamFunc, fromFlow bool) (json.RawMessage, error) {
	maxTurns := genkitMaxTurns
	if raw, ok := opts["maxTurns"]; ok {
		_ = json.Unmarshal(raw, &maxTurns)
	}
	call := options{}
	for k, v := range opts {
		call[k] = v
	}
	call["returnToolRequests"] = json.RawMessage("true")
	for round := 1; ; round++ {
		input, err := json.Marshal(call)
		if err != nil {
			return nil, err
		}
		out, err := c.call(ctx, ext, generateKey, input, cb)
		if err != nil {
			return out, err
		}
		var resp response
		if err := json.Unmarshal(out, &resp); err != nil || resp.Message == nil {
			return out, nil
		}
		history := opts
		if resp.Request == nil || len(resp.Request.Messages) == 0 {
			history = call
		}
		if resp.FinishReason == finishedInterrupted || len(resp.Message.ToolRequests()) == 0 {
			return out, c.record(ext, history, &resp, fromFlow)
		}
		if round > maxTurns {
			return nil, &engine.Error{Status: engine.StatusAborted, Message: fmt.Sprintf("Exceeded maximum tool call iterations (%d)", maxTurns)}
		}
		revised, answers, interrupted, err := c.runTools(ctx, ext, resp.Message)
		if err != nil {
			return nil, err
		}
		if interrupted {
			resp.Message, resp.FinishReason = revised, finishedInterrupted
			resp.FinishMessage = "One or more tool calls need a person before they run."
			if out, err = patchResponse(out, revised); err != nil {
				return nil, err
			}
			return out, c.record(ext, history, &resp, fromFlow)
		}
		var msgs []*engine.Message
		if resp.Request != nil && len(resp.Request.Messages) > 0 {
			msgs = resp.Request.Messages
		} else if msgs, err = call.messages(); err != nil {
			return nil, err
		}
		msgs = append(append(msgs[:len(msgs):len(msgs)], resp.Message), answers)
		if call["messages"], err = json.Marshal(msgs); err != nil {
			return nil, err
		}
		delete(call, "resume")
	}
}

// runTools looks at each tool request of a model message: a gated one is marked interrupted with
// the gate's metadata; any other runs as the app's tool action, and one that interrupts there is
// marked so too. revised is the message with each answered request's pendingOutput and each
// interrupted one's interrupt, as Genkit's own loop marks them; answers is the tool message.
func (c *conn) runTools(ctx context.Context, ext *runs.External, m *engine.Message) (revised, answers *engine.Message, interrupted bool, err error) {
	cp := *m
	cp.Content = make([]*engine.Part, len(m.Content))
	answers = &engine.Message{Role: engine.RoleTool}
	for i, p := range m.Content {
		cp.Content[i] = p
		if p.ToolRequest == nil {
			continue
		}
		tr := p.ToolRequest
		a := c.toolAction(tr.Name)
		input, err := json.Marshal(tr.Input)
		if err != nil {
			return nil, nil, false, err
		}
		md, gated, err := ext.Gate(ctx, tr.Name, input, requiresApproval(a))
		if err != nil {
			return nil, nil, false, fmt.Errorf("gate of tool %s (ref %s): %w", tr.Name, tr.Ref, err)
		}
		var output any
		if !gated {
			if a == nil {
				return nil, nil, false, &engine.Error{Status: engine.StatusNotFound, Message: fmt.Sprintf("tool %s not found in app %s", tr.Name, c.name)}
			}
			out, err := c.call(ctx, ext, a.Key, input, nil)
			var ie *interruptedError
			switch {
			case err != nil && errors.As(asInterrupted(a.Key, err), &ie):
				gated = true
				if md = ie.ie.Metadata; md == nil {
					md = map[string]any{} // Genkit JS's reflection API drops the metadata
				}
			case err != nil:
				return nil, nil, false, fmt.Errorf("tool %s (ref %s): %w", tr.Name, tr.Ref, err)
			default:
				if output, err = toolOutput(a.Key, out); err != nil {
					return nil, nil, false, fmt.Errorf("tool %s (ref %s): %w", tr.Name, tr.Ref, err)
				}
			}
		}
		part := *p
		part.Metadata = map[string]any{}
		for k, v := range p.Metadata {
			part.Metadata[k] = v
		}
		if gated {
			part.Metadata[engine.MetaInterrupt] = md
			interrupted = true
		} else {
			part.Metadata[engine.MetaPendingOutput] = output
			answers.Content = append(answers.Content, &engine.Part{Kind: engine.PartToolResponse,
				ToolResponse: &engine.ToolResponse{Name: tr.Name, Ref: tr.Ref, Output: output}})
		}
		cp.Content[i] = &part
	}
	return &cp, answers, interrupted, nil
}

// toolOutput is what a tool action answered as the tool's output: a /tool.v2/ action answers
// {output, content}.
func toolOutput(key string, out json.RawMessage) (any, error) {
	var v any
	if len(out) > 0 {
		if err := json.Unmarshal(out, &v); err != nil {
			return nil, err
		}
	}
	if strings.HasPrefix(key, "/tool.v2/") {
		if m, ok := v.(map[string]any); ok {
			return m["output"], nil
		}
	}
	return v, nil
}

// patchResponse is the app's response with its message and finish reason replaced by an
// interrupted turn's, every other field as the app sent it.
func patchResponse(out json.RawMessage, m *engine.Message) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(out, &fields); err != nil {
		return nil, err
	}
	var err error
	if fields["message"], err = json.Marshal(m); err != nil {
		return nil, err
	}
	fields["finishReason"] = json.RawMessage(`"` + finishedInterrupted + `"`)
	return json.Marshal(fields)
}
