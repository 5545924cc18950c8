package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Log is one log record another program sent (OTLP logs). TraceID and SpanID are empty for a
// record written outside a span.
type Log struct {
	ID             int64           `db:"id" json:"id"`
	Time           time.Time       `db:"time" json:"time"`
	ObservedTime   *time.Time      `db:"observed_time" json:"observed_time,omitempty"`
	SeverityNumber int16           `db:"severity_number" json:"severity_number"`
	SeverityText   string          `db:"severity_text" json:"severity_text"`
	Body           json.RawMessage `db:"body" json:"body"`
	Attributes     json.RawMessage `db:"attributes" json:"attributes"`
	Resource       json.RawMessage `db:"resource" json:"resource"`
	Scope          string          `db:"scope" json:"scope"`
	TraceID        string          `db:"trace_id" json:"trace_id"`
	SpanID         string          `db:"span_id" json:"span_id"`
}

// LogInsert stores log records in one COPY.
func (s *Store) LogInsert(ctx context.Context, logs []Log) error {
	if len(logs) == 0 {
		return nil
	}
	cols := []string{"time", "observed_time", "severity_number", "severity_text", "body", "attributes", "resource", "scope", "trace_id", "span_id"}
	_, err := s.db.CopyFrom(ctx, pgx.Identifier{"logs"}, cols, pgx.CopyFromSlice(len(logs), func(i int) ([]any, error) {
		l := logs[i]
		return []any{l.Time, l.ObservedTime, l.SeverityNumber, l.SeverityText, jsonOr(l.Body, "null"),
			jsonOr(l.Attributes, "{}"), jsonOr(l.Resource, "{}"), l.Scope, l.TraceID, l.SpanID}, nil
	}))
	if err != nil {
		return fmt.Errorf("insert %d logs: %w", len(logs), err)
	}
	return nil
}

// LogListParams selects log records: those of a trace, of one span of it, or all, newest first
// unless the list is of a trace (then in time order).
type LogListParams struct {
	TraceID string
	SpanID  string
	Limit   int // default 100, at most 1000
}

// LogList returns the log records p selects.
func (s *Store) LogList(ctx context.Context, p LogListParams) ([]Log, error) {
	limit := p.Limit
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	const cols = `id, time, observed_time, severity_number, severity_text, body, attributes, resource, scope, trace_id, span_id`
	var (
		rows pgx.Rows
		err  error
	)
	switch {
	case p.TraceID != "" && p.SpanID != "":
		rows, err = s.db.Query(ctx, `SELECT `+cols+` FROM logs WHERE trace_id = $1 AND span_id = $2 ORDER BY time, id LIMIT $3`, p.TraceID, p.SpanID, limit)
	case p.TraceID != "":
		rows, err = s.db.Query(ctx, `SELECT `+cols+` FROM logs WHERE trace_id = $1 ORDER BY time, id LIMIT $2`, p.TraceID, limit)
	default:
		rows, err = s.db.Query(ctx, `SELECT `+cols+` FROM logs ORDER BY time DESC, id DESC LIMIT $1`, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	logs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Log])
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	return logs, nil
}
