package genkitapp

import (
	"encoding/json"
	"fmt"
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
