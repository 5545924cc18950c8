package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SpanSearchLimit caps the spans SpanSearch returns: past it a reader refines the words.
const SpanSearchLimit = 1000

// SpanSearch returns the ids of a trace's spans whose name, status message, attributes (keys and
// values, so Genkit's input and output and GenAI's messages too) or events contain text, ignoring
// case, at most SpanSearchLimit of them. Attributes are matched as their stored JSON text, so a
// quote inside a value reads as \" there.
func (s *Store) SpanSearch(ctx context.Context, traceID, text string) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		SELECT span_id FROM spans
		WHERE trace_id = $1 AND (strpos(lower(name), lower($2)) > 0
			OR strpos(lower(status_message), lower($2)) > 0
			OR strpos(lower(attributes::text), lower($2)) > 0
			OR strpos(lower(events::text), lower($2)) > 0)
		ORDER BY start_time_unix_nano, span_id
		LIMIT $3`, traceID, text, SpanSearchLimit)
	if err != nil {
		return nil, fmt.Errorf("search spans of trace %s: %w", traceID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("search spans of trace %s: %w", traceID, err)
	}
	return ids, nil
}
