package event

import (
	"bytes"
	"fmt"

	"github.com/loupe-dev/loupe/internal/store"
)

// JS is web/static/events.js: the kinds as a JavaScript module for the page scripts.
func JS() []byte {
	var b bytes.Buffer
	b.WriteString("// Generated from internal/event by `go test ./internal/event -update`; do not edit.\n")
	b.WriteString("// The kinds of Loupe's live events, as the server sends them.\n\n")
	b.WriteString("export const Kind = Object.freeze({\n")
	for _, k := range Kinds {
		fmt.Fprintf(&b, "  %s: %q,\n", k.Name, k.Kind)
	}
	b.WriteString("});\n\n")
	b.WriteString("// The types of span events (a span event's data.type).\n")
	fmt.Fprintf(&b, "export const SpanType = Object.freeze({ Started: %q, Ended: %q });\n\n", SpanStarted, SpanEnded)
	b.WriteString("// The statuses of a run that is over (a run.status event's data.status).\n")
	b.WriteString("export const FinishedRunStatuses = Object.freeze([")
	for i, s := range store.FinishedRunStatuses {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", s)
	}
	b.WriteString("]);\n")
	return b.Bytes()
}
