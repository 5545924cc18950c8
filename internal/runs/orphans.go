package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// AttrEndedByTakeover marks a span that another execution ended: its own process died (or stopped
// answering) before the span's end was recorded, and the execution that took the run over ended it
// at the moment it did so.
const AttrEndedByTakeover = "loupe.span.ended_by_takeover"

// endOrphanedSpans ends the spans an earlier execution of the run left running: its process died
// before their ends were written, so they would show as running forever. Each ends now, with an
// error status that says so, through the ordinary ingest path (the trace's summary follows). A
// process that was only paused still writes its spans' real ends when it wakes, and those replace
// these. The root span, which every execution of the run shares, is left to this execution.
func (s *Service) endOrphanedSpans(ctx context.Context, run *store.Run, took time.Time) error {
	spans, err := s.store.SpansRunningByRun(ctx, run.ID)
	if err != nil || len(spans) == 0 {
		return err
	}
	_, rootID := rootSpanIDs(run)
	ended := spans[:0]
	for _, sp := range spans {
		if sp.SpanID == rootID.String() || sp.Source != "loupe" {
			continue
		}
		var attrs map[string]any
		if len(sp.Attributes) > 0 {
			dec := json.NewDecoder(bytes.NewReader(sp.Attributes))
			dec.UseNumber() // numbers stay as written
			if err := dec.Decode(&attrs); err != nil {
				return fmt.Errorf("attributes of span %s: %w", sp.SpanID, err)
			}
		}
		if attrs == nil {
			attrs = map[string]any{}
		}
		attrs[AttrEndedByTakeover] = true
		attrs[engine.AttrState] = engine.StateError
		raw, err := json.Marshal(attrs)
		if err != nil {
			return fmt.Errorf("attributes of span %s: %w", sp.SpanID, err)
		}
		sp.Attributes = raw
		sp.EndTime = max(took.UnixNano(), sp.StartTime)
		sp.StatusCode = store.StatusError
		sp.StatusMessage = "its process stopped before the span ended; another execution took the run over at " + took.UTC().Format(time.RFC3339Nano)
		ended = append(ended, sp)
	}
	if len(ended) == 0 {
		return nil
	}
	if _, err := s.store.SpanIngest(ctx, ended); err != nil {
		return err
	}
	s.log.Info("ended the spans a lost execution left running", "run", run.ID, "spans", len(ended))
	return nil
}
