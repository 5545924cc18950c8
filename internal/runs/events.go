package runs

import (
	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/event"
)

// Publisher receives run events for live views (the kinds and payloads of package event). The
// database stays the source of truth: an event only says what changed, and a subscriber reads the
// rows. Publish must not block.
type Publisher interface {
	Publish(runID uuid.UUID, p event.Payload)
}

// SetPublisher connects the live event hub. Without one, events are dropped.
func (s *Service) SetPublisher(p Publisher) { s.publisher = p }

func (s *Service) publish(runID uuid.UUID, p event.Payload) {
	if s.publisher != nil {
		s.publisher.Publish(runID, p)
	}
}
