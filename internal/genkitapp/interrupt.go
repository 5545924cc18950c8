package genkitapp

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/loupe-dev/loupe/internal/engine"
)

// goInterruptMarker is in the error message of a Genkit Go tool that called tc.Interrupt; its
// metadata follows as JSON.
const goInterruptMarker = "tool execution interrupted:"

// interrupt reads the error an app answered as a tool's interrupt, outside a generate (a tool run
// on its own, or a flow that calls one and lets its interrupt through). Genkit JS answers code 13
// with an empty message and a ToolInterruptError stack, and its reflection API drops the
// interrupt's metadata (known is false); Genkit Go writes the metadata into the message.
func (e *ActionError) interrupt() (md map[string]any, known, ok bool) {
	stack, _ := e.Details["stack"].(string)
	if first, _, _ := strings.Cut(stack, "\n"); strings.HasPrefix(strings.TrimSpace(first), "ToolInterruptError") {
		return nil, false, true
	}
	i := strings.Index(e.Message, goInterruptMarker)
	if i < 0 {
		return nil, false, false
	}
	rest := strings.TrimSpace(e.Message[i+len(goInterruptMarker):])
	if rest == "" || json.Unmarshal([]byte(rest), &md) != nil {
		return nil, false, true
	}
	return md, md != nil, true
}

// interruptedError is the error of an app's action that stopped at a tool's interrupt with no
// generate around it to pause: FAILED_PRECONDITION, as Loupe's own tools answer, saying that the
// tool asked a person, with the interrupt (errors.As finds the *engine.InterruptError, whose
// metadata the run's stored error carries).
type interruptedError struct {
	status *engine.Error
	ie     *engine.InterruptError
	// TraceID is the app's trace of the call.
	TraceID string
}

func (e *interruptedError) Error() string   { return e.status.Error() }
func (e *interruptedError) Unwrap() []error { return []error{e.status, e.ie} }

// asInterrupted turns an app's error that is a tool's interrupt into an *interruptedError; any
// other error comes back as it is.
func asInterrupted(key string, err error) error {
	ae, isAction := err.(*ActionError)
	if !isAction {
		return err
	}
	md, known, ok := ae.interrupt()
	if !ok {
		return err
	}
	_, name := splitGenkitKey(key)
	what := name + " interrupted to ask a person"
	if q, _ := md["message"].(string); q != "" {
		what += fmt.Sprintf(" (%q)", q)
	}
	if !known {
		what += "; the app's reflection API does not pass on the interrupt's metadata, its trace shows the interrupted tool"
	}
	msg := what + ". Run on its own, outside a generate, nobody can answer it: run a flow or prompt that calls the tool to answer it in the inbox"
	return &interruptedError{
		status:  &engine.Error{Status: engine.StatusFailedPrecondition, Message: msg},
		ie:      &engine.InterruptError{Metadata: md},
		TraceID: ae.TraceID,
	}
}

// UnresumableError is the error of a flow whose output says it stopped at interrupts that Loupe
// cannot resume: a generate response that ended interrupted but lacks what its resume needs, or
// the flow's own object holding interrupted tool requests. Such a run is not a success that
// nobody hears of: it fails FAILED_PRECONDITION, naming what is missing, and keeps the output.
type UnresumableError struct {
	// Missing names what Loupe would need: "model", "request", or "generate response".
	Missing string
	// Interrupts are the interrupted tool requests found in the output.
	Interrupts []*engine.Part
	message    string
}

func (e *UnresumableError) Error() string {
	return string(engine.StatusFailedPrecondition) + ": " + e.message
}

// Unwrap gives the error its status.
func (e *UnresumableError) Unwrap() error {
	return &engine.Error{Status: engine.StatusFailedPrecondition, Message: e.message}
}

// ErrorDetails are the stored error's details: what is missing and the interrupts.
func (e *UnresumableError) ErrorDetails() map[string]any {
	list := make([]map[string]any, 0, len(e.Interrupts))
	for _, p := range e.Interrupts {
		list = append(list, map[string]any{"name": p.ToolRequest.Name, "ref": p.ToolRequest.Ref,
			"input": p.ToolRequest.Input, "interrupt": p.Metadata[engine.MetaInterrupt]})
	}
	return map[string]any{"unresumable": e.Missing, "interrupts": list}
}

// unresumable reads a flow's output that interruptedFlow could not resume: nil when it holds no
// interrupt, otherwise why it cannot be resumed and how to make it so.
func (c *conn) unresumable(key string, out json.RawMessage) *UnresumableError {
	var resp response
	isResponse := json.Unmarshal(out, &resp) == nil && resp.FinishReason == finishedInterrupted
	var parts []*engine.Part
	if isResponse && resp.Message != nil {
		parts = resp.engine().Interrupts()
	}
	if len(parts) == 0 {
		var v any
		if json.Unmarshal(out, &v) != nil {
			return nil
		}
		parts = interruptParts(v, nil)
	}
	if !isResponse && len(parts) == 0 {
		return nil
	}
	asks := questions(parts)
	e := &UnresumableError{Interrupts: parts}
	switch {
	case isResponse && resp.Message != nil && resp.Request != nil && len(parts) > 0:
		e.Missing = "model"
		e.message = fmt.Sprintf("%s returned a generate response that ended interrupted (%s), which Loupe cannot resume: "+
			"it names no model, and the app has no default model. Add a `model` field to the response the flow returns, "+
			"or set the app's default model (genkit({model}))", key, asks)
	case isResponse && len(parts) > 0:
		e.Missing = "request"
		e.message = fmt.Sprintf("%s returned a generate response that ended interrupted (%s), which Loupe cannot resume: "+
			"it keeps no request (the conversation). Return the whole response (response.toJSON() in JS, the *ai.ModelResponse in Go)", key, asks)
	case isResponse:
		e.Missing = "interrupts"
		e.message = fmt.Sprintf("%s returned a generate response that ended interrupted, but its message holds no interrupted tool request, so nobody can answer it", key)
	default:
		e.Missing = "generate response"
		e.message = fmt.Sprintf("%s returned interrupted tool requests (%s) in an object of its own, which Loupe cannot resume: "+
			"return the generate's whole response (response.toJSON() in JS, the *ai.ModelResponse in Go) for Loupe to resume it in the inbox", key, asks)
	}
	return e
}

// interruptParts finds the toolRequest parts with metadata.interrupt anywhere in v.
func interruptParts(v any, acc []*engine.Part) []*engine.Part {
	switch x := v.(type) {
	case map[string]any:
		if tr, ok := x["toolRequest"].(map[string]any); ok {
			if md, ok := x["metadata"].(map[string]any); ok && md[engine.MetaInterrupt] != nil && md[engine.MetaInterrupt] != false {
				raw, _ := json.Marshal(x)
				var p engine.Part
				if _, named := tr["name"].(string); named && json.Unmarshal(raw, &p) == nil && p.ToolRequest != nil {
					return append(acc, &p)
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			acc = interruptParts(x[k], acc)
		}
	case []any:
		for _, e := range x {
			acc = interruptParts(e, acc)
		}
	}
	return acc
}

// questions says what the interrupts ask: "approveTransfer asks "Send 9 to Ann?"".
func questions(parts []*engine.Part) string {
	var qs []string
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.ToolRequest.Ref+"\x00"+p.ToolRequest.Name] {
			continue
		}
		seen[p.ToolRequest.Ref+"\x00"+p.ToolRequest.Name] = true
		q := p.ToolRequest.Name + " asks"
		if md, ok := p.Metadata[engine.MetaInterrupt].(map[string]any); ok {
			if m, ok := md["message"].(string); ok && m != "" {
				q += fmt.Sprintf(" %q", m)
				qs = append(qs, q)
				continue
			}
		}
		qs = append(qs, q+" for a person")
	}
	return strings.Join(qs, "; ")
}
