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
	lo, hi, err := s.spanStartsOf(ctx, traceID)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `
		SELECT span_id FROM spans
		WHERE trace_id = $1 AND (strpos(lower(name), lower($2)) > 0
			OR strpos(lower(status_message), lower($2)) > 0
			OR strpos(lower(attributes::text), lower($2)) > 0
			OR strpos(lower(events::text), lower($2)) > 0)`+spanStartsBetween(4)+`
		ORDER BY start_time_unix_nano, span_id
		LIMIT $3`, traceID, text, SpanSearchLimit, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("search spans of trace %s: %w", traceID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("search spans of trace %s: %w", traceID, err)
	}
	return ids, nil
}

// toolInputMax is how much of a tool's input SpanToolInputs reads: enough for a label.
const toolInputMax = 1000

// SpanToolInputs returns the start of the input of each of the given spans of a trace that has
// one (gen_ai.tool.call.arguments, else genkit:input), at most toolInputMax characters, by span
// id. The span tree asks only for the tool rows it renders, so that the input of every span of a
// 10,000-span trace is never read for a label.
func (s *Store) SpanToolInputs(ctx context.Context, traceID string, spanIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(spanIDs))
	if len(spanIDs) == 0 {
		return out, nil
	}
	lo, hi, err := s.spanStartsOf(ctx, traceID)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `
		SELECT span_id, left(COALESCE(attributes->>'gen_ai.tool.call.arguments', attributes->>'genkit:input'), $3)
		FROM spans
		WHERE trace_id = $1 AND span_id = ANY($2) AND json_typeof(attributes) = 'object'`+spanStartsBetween(4), traceID, spanIDs, toolInputMax, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("tool inputs of trace %s: %w", traceID, err)
	}
	var id string
	var in *string
	_, err = pgx.ForEachRow(rows, []any{&id, &in}, func() error {
		if in != nil {
			out[id] = *in
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tool inputs of trace %s: %w", traceID, err)
	}
	return out, nil
}
