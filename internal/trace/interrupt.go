package trace

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/loupe-dev/loupe/internal/store"
)

// Attributes and event attributes that markInterrupt adds to an ingested span.
const (
	// AttrOriginalState keeps the genkit:state that the SDK sent ("error") when Loupe reads the span
	// as interrupted.
	AttrOriginalState = "loupe.genkit.original_state"
	// EventAttrInterrupt marks the exception event that was an interrupt, not a failure.
	EventAttrInterrupt = "loupe.interrupt"
	// EventAttrInterruptMetadata is the interrupt's metadata, as Loupe's own "interrupt" events
	// carry it.
	EventAttrInterruptMetadata = "interrupt.metadata"
)

// interruptExceptionTypes are the exception types with which Genkit records a tool's interrupt as
// an error: JS's ToolInterruptError and Go's *ai.toolInterruptError.
var interruptExceptionTypes = map[string]bool{"ToolInterruptError": true, "*ai.toolInterruptError": true}

// goInterruptPrefix starts the error message of a Genkit Go tool that called tc.Interrupt; the
// metadata follows as indented JSON.
const goInterruptPrefix = "tool execution interrupted:"

// markInterrupt reads a span that Genkit recorded as an error because a tool interrupted as what
// it is: genkit:state "interrupted" and no error status, like Loupe's own interrupted spans. That
// holds for the tool span and for any span whose error is the interrupt (a flow that calls a tool
// directly and lets its interrupt through), so a trace whose only errors are interrupts is not an
// error trace: the trace's status is its root span's. The
// data sent is kept: the original state in AttrOriginalState, the status message, and the
// exception event, marked with EventAttrInterrupt. The metadata, when the span carries it (Go puts
// it in the error message), is added as an "interrupt" event. It reports whether the span was an
// interrupt.
func markInterrupt(sp *store.Span) bool {
	if len(sp.Events) == 0 {
		return false
	}
	var events []storedEvent
	if json.Unmarshal(sp.Events, &events) != nil {
		return false
	}
	found, message := -1, ""
	for i, e := range events {
		if e.Name != "exception" {
			continue
		}
		var attrs map[string]json.RawMessage
		if json.Unmarshal(e.Attributes, &attrs) != nil {
			continue
		}
		var typ, msg string
		_ = json.Unmarshal(attrs["exception.type"], &typ)
		_ = json.Unmarshal(attrs["exception.message"], &msg)
		// The type, or Go's message when an error type of the program's own wraps it at the
		// front (a flow returning its tool's interrupt as its error).
		if interruptExceptionTypes[typ] || strings.HasPrefix(msg, goInterruptPrefix) {
			found, message = i, msg
			attrs[EventAttrInterrupt] = json.RawMessage("true")
			events[i].Attributes = mustJSON(attrs)
			break
		}
	}
	if found < 0 {
		return false
	}
	var attrs map[string]json.RawMessage
	if json.Unmarshal(sp.Attributes, &attrs) != nil || attrs == nil {
		attrs = map[string]json.RawMessage{}
	}
	if orig, ok := attrs["genkit:state"]; ok {
		attrs[AttrOriginalState] = orig
	}
	attrs["genkit:state"] = json.RawMessage(`"interrupted"`)
	sp.Attributes = mustJSON(attrs)
	if md := interruptMetadata(message, sp.StatusMessage); md != nil {
		ev := storedEvent{TimeUnixNano: events[found].TimeUnixNano, Name: "interrupt",
			Attributes: mustJSON(map[string]string{EventAttrInterruptMetadata: string(md)})}
		events = append(events, ev)
	}
	sp.Events = mustJSON(events)
	sp.StatusCode = store.StatusUnset
	return true
}

// interruptMetadata is the JSON metadata in Genkit Go's "tool execution interrupted: {…}" message
// (from the exception event, or else the status message), compacted; nil when there is none.
func interruptMetadata(messages ...string) json.RawMessage {
	for _, m := range messages {
		rest, ok := strings.CutPrefix(m, goInterruptPrefix)
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		var buf bytes.Buffer
		if rest != "" && json.Compact(&buf, []byte(rest)) == nil && buf.String() != "null" {
			return buf.Bytes()
		}
	}
	return nil
}
