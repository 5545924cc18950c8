package runs

import "github.com/google/uuid"

// Event kinds published while runs change.
const (
	EventStatus    = "run.status"
	EventMessage   = "run.message"
	EventChunks    = "run.chunks"
	EventToolCall  = "run.tool_call"
	EventInterrupt = "interrupt.changed"
)

// Publisher receives run events for live views. The database stays the source of truth: an event
// only says what changed, and a subscriber reads the rows. Publish must not block.
type Publisher interface {
	Publish(runID uuid.UUID, kind string, data map[string]any)
}

// SetPublisher connects the live event hub. Without one, events are dropped.
func (s *Service) SetPublisher(p Publisher) { s.publisher = p }

func (s *Service) publish(runID uuid.UUID, kind string, data map[string]any) {
	if s.publisher != nil {
		s.publisher.Publish(runID, kind, data)
	}
}
