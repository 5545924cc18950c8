package trace

import "github.com/loupe-dev/loupe/internal/store"

// DecodeGenkitUnmarshal is DecodeGenkit without its fast path, for the tests that compare them.
func DecodeGenkitUnmarshal(body []byte) ([]store.Span, error) { return decodeGenkit(body, false) }

// DecodeTraceDataFast reports whether decodeTraceDataFast takes body.
func DecodeTraceDataFast(body []byte) bool { return decodeTraceDataFast(body, &TraceData{}) }
