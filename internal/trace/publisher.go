package trace

import (
	"github.com/loupe-dev/loupe/internal/store"
)

// SpanEvent tells the live hub that a span started or ended. A started span has EndTime 0 and
// carries only what was known at its start (ids, name, start time, attributes passed to Start,
// and the run id, inherited from its parent when not set on it).
type SpanEvent struct {
	Type string // event.SpanStarted or event.SpanEnded
	Span store.Span
}

// Publisher receives span events as they happen: the live WebSocket hub implements it. Publish is
// called on the engine's hot path, so it must not block: buffer, or drop and let the client
// reload from the database.
type Publisher interface {
	Publish(SpanEvent)
}

// NopPublisher drops every event.
type NopPublisher struct{}

// Publish does nothing.
func (NopPublisher) Publish(SpanEvent) {}

func isNop(p Publisher) bool {
	if p == nil {
		return true
	}
	_, ok := p.(NopPublisher)
	return ok
}
