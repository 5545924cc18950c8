package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SpanCopyRaw copies spans straight into the spans table with COPY: no merge, no traces summary,
// no run check: the baseline of the ingest benchmark (BenchmarkSpanIngest), for tests only.
// It commits as SpanIngest does, without waiting for the WAL flush, so the comparison is fair.
func (s *Store) SpanCopyRaw(ctx context.Context, spans []Span) (int64, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, ingestSettings); err != nil {
			return err
		}
		var err error
		n, err = tx.db.CopyFrom(ctx, pgx.Identifier{"spans"}, spanCopyColumns, spanCopySource(spans))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("copy %d spans: %w", len(spans), err)
	}
	return n, nil
}

var spanCopyColumns = strings.Fields(strings.ReplaceAll(spanColumns, ",", " "))

// SpanCopyFieldsAndColumns are the fields copySpans writes a row with, and the columns it names.
var SpanCopyFieldsAndColumns = [2]int{spanCopyFields, len(spanCopyColumns)}

// spanCopySource feeds spans to pgx's CopyFrom (binary COPY), as the raw baseline does.
func spanCopySource(spans []Span) pgx.CopyFromSource {
	return pgx.CopyFromSlice(len(spans), func(i int) ([]any, error) {
		sp := &spans[i]
		return []any{sp.TraceID, sp.SpanID, sp.ParentSpanID, sp.Name, sp.Kind, sp.StartTime,
			sp.EndTime, sp.StatusCode, sp.StatusMessage, jsonOr(sp.Attributes, "{}"),
			jsonOr(sp.Events, "[]"), jsonOr(sp.Links, "[]"), jsonOr(sp.Resource, "{}"), sp.Scope,
			sp.ScopeVersion, sourceOr(sp.Source), sp.RunID, spanFlags(sp)}, nil
	})
}

// CopySpans runs ingest's COPY of spans into table on conn.
func CopySpans(ctx context.Context, conn *pgconn.PgConn, table string, spans []Span) error {
	_, err := copySpans(ctx, conn, "", table, spans, nil)
	return err
}

// CopyRowSize is how many bytes appendSpanCopyRow writes for sp, and copySpans' estimate of it.
func CopyRowSize(sp *Span) (written, estimate int) {
	written = len(appendSpanCopyRow(nil, sp, 0))
	estimate = copyRowFixed + len(sp.Name) + len(sp.StatusMessage) + len(sp.Attributes) + len(sp.Events) + len(sp.Links) +
		len(sp.Resource) + len(sp.Scope) + len(sp.ScopeVersion) + len(sp.Source)
	return written, estimate
}
