package runs

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/store"
)

// ReplayInfo is what the UI shows about a run's place in its lineage: where it comes from, what
// was derived from it, how it was replayed and its divergence, and the decisions offered as
// defaults for its interrupts.
type ReplayInfo struct {
	RunID uuid.UUID `json:"run_id"`
	*store.Lineage
	Replay      *store.Replay                `json:"replay"`
	Suggestions []*store.InterruptSuggestion `json:"suggested_resolutions"`
}

// Lineage returns a run's lineage, its replay settings and divergence, and its suggested
// resolutions.
func (s *Service) Lineage(ctx context.Context, id uuid.UUID) (*ReplayInfo, error) {
	l, err := s.store.RunLineage(ctx, id)
	if err != nil {
		return nil, err
	}
	info := &ReplayInfo{RunID: id, Lineage: l}
	info.Replay, err = s.store.ReplayGet(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if info.Suggestions, err = s.store.InterruptSuggestionList(ctx, id); err != nil {
		return nil, err
	}
	if info.Suggestions == nil {
		info.Suggestions = []*store.InterruptSuggestion{}
	}
	return info, nil
}

// ReplayModes lists the replay modes, for help texts and errors.
var ReplayModes = strings.Join([]string{store.ReplayExact, store.ReplayRerun, store.ReplayFork}, ", ")
