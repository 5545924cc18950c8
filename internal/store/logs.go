package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
// unless the list is of a trace and not NewestFirst (then in time order).
type LogListParams struct {
	TraceID string
	SpanID  string
	// MinSeverity keeps the records at this severity number or above (Genkit's severityNumber).
	MinSeverity int16
	// SeverityText keeps the records of this severity text, in any case (Genkit's severityText).
	SeverityText string
	// NewestFirst orders a trace's records newest first too, as Genkit's log lists are.
	NewestFirst bool
	Offset      int // records skipped, for paging (Genkit's continuationToken)
	Limit       int // default 100, at most 1001 (1000 and one to tell a next page)
}

// LogList returns the log records p selects.
func (s *Store) LogList(ctx context.Context, p LogListParams) ([]Log, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	// At most 1000, and one more for a caller that asks whether there is a next page.
	limit = min(limit, 1001)
	const cols = `id, time, observed_time, severity_number, severity_text, body, attributes, resource, scope, trace_id, span_id`
	// The trace and span conditions are written out only when asked for, so that a trace's
	// records are read along logs_trace_idx and the newest of all along logs_time_idx.
	where := []string{"severity_number >= $1", "($2 = '' OR lower(severity_text) = lower($2))"}
	args := []any{p.MinSeverity, p.SeverityText, limit, max(p.Offset, 0)}
	if p.TraceID != "" {
		args = append(args, p.TraceID)
		where = append(where, fmt.Sprintf("trace_id = $%d", len(args)))
		if p.SpanID != "" {
			args = append(args, p.SpanID)
			where = append(where, fmt.Sprintf("span_id = $%d", len(args)))
		}
	}
	order := "time DESC, id DESC"
	if p.TraceID != "" && !p.NewestFirst {
		order = "time, id"
	}
	rows, err := s.db.Query(ctx, `SELECT `+cols+` FROM logs WHERE `+strings.Join(where, " AND ")+
		` ORDER BY `+order+` LIMIT $3 OFFSET $4`, args...)
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	logs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Log])
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	return logs, nil
}
