package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SpanCopyRaw copies spans straight into the spans table with COPY: no merge, no traces summary,
// no run check: the baseline of the ingest benchmark (BenchmarkSpanIngest), for tests only.
// It commits as SpanIngest does, without waiting for the WAL flush, so the comparison is fair.
func (s *Store) SpanCopyRaw(ctx context.Context, spans []Span) (int64, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, asyncCommit); err != nil {
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
