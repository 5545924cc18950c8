package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SpanPartition is one partition of spans (a UTC day, month or hour, or part of one): the spans
// that started in [From, To), Unix nanoseconds. spans_default, which takes the spans no other
// partition covers, is not one.
type SpanPartition struct {
	Name string
	From int64
	To   int64
}

// SpanPartitionDay is the span of time one partition covers (migration 00060).
const SpanPartitionDay = 24 * time.Hour

// spanStartsBetweenSQL bounds a read of one trace's spans by the first and last span start times
// its summary keeps (spanStartsOf), given as parameters %[1]d and %[2]d, so that PostgreSQL plans
// the read on the partitions that hold them only. Bounds read by a sub-select would prune at run
// time instead, after planning every partition: 45 ms a read at 404 partitions, against 0.5 ms.
const spanStartsBetweenSQL = ` AND start_time_unix_nano BETWEEN $%[1]d AND $%[2]d`

// spanStartsOf returns the first and last span start times trace traceID's summary keeps. The
// summary's bounds never narrow (ingest folds them with LEAST and GREATEST, in the spans' own
// transaction), so they hold every span; a trace with no summary, or one whose bounds were never
// set (both 0, the columns' default), has none.
func (s *Store) spanStartsOf(ctx context.Context, traceID string) (lo, hi int64, err error) {
	err = s.db.QueryRow(ctx, `SELECT span_start_min_unix_nano, span_start_max_unix_nano FROM traces
		WHERE trace_id = $1`, traceID).Scan(&lo, &hi)
	if errors.Is(err, pgx.ErrNoRows) {
		return math.MinInt64, math.MaxInt64, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("span start times of trace %s: %w", traceID, err)
	}
	lo, hi = spanStartsOrAll(lo, hi)
	return lo, hi, nil
}

// spanStartsOrAll is a summary's span start bounds, or all times if they were never set.
func spanStartsOrAll(lo, hi int64) (int64, int64) {
	if lo == 0 && hi == 0 {
		return math.MinInt64, math.MaxInt64
	}
	return lo, hi
}

// spanStartsBetween is spanStartsBetweenSQL with its parameters numbered from n.
func spanStartsBetween(n int) string { return fmt.Sprintf(spanStartsBetweenSQL, n, n+1) }

// SpanPartitions lists the partitions of spans, oldest first, read from the catalog.
func (s *Store) SpanPartitions(ctx context.Context) ([]SpanPartition, error) {
	rows, err := s.db.Query(ctx, `
		SELECT c.relname::text,
			substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(''?(-?[0-9]+)')::bigint,
			substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''?(-?[0-9]+)')::bigint
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'spans'::regclass AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
		ORDER BY 2`)
	if err != nil {
		return nil, fmt.Errorf("list span partitions: %w", err)
	}
	parts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[SpanPartition])
	if err != nil {
		return nil, fmt.Errorf("list span partitions: %w", err)
	}
	return parts, nil
}

// SpanPartitionWidth is how much time a new partition of spans covers.
type SpanPartitionWidth int

const (
	// SpanPartitionsDaily makes a partition a UTC day: retention by age drops whole days.
	SpanPartitionsDaily SpanPartitionWidth = iota
	// SpanPartitionsMonthly makes a partition a UTC month, for a store that keeps its traces: a
	// year kept is 12 partitions, not 365 (each costs every ingest statement a lock).
	SpanPartitionsMonthly
	// SpanPartitionsHourly makes a partition a UTC hour, for a store that takes so many spans a
	// day that a day's partition would be too big to keep whole (retention then drops hours).
	SpanPartitionsHourly
)

// SpanPartitionsEnsure makes sure partitions cover from's to to's UTC hour (hourly) or day (else),
// both included, creating the missing ones width wide (the UTC hour, day or month that holds
// each uncovered instant), clipped so as not to overlap a partition that exists (a day beside a
// month or beside hours, after the retention setting or the volume changed), and returns how many
// it created. A range's spans that had gone to spans_default move into its new partition.
func (s *Store) SpanPartitionsEnsure(ctx context.Context, from, to time.Time, width SpanPartitionWidth) (int, error) {
	parts, err := s.SpanPartitions(ctx)
	if err != nil {
		return 0, err
	}
	unit := SpanPartitionDay
	if width == SpanPartitionsHourly {
		unit = time.Hour
	}
	end := to.UTC().Truncate(unit).Add(unit).UnixNano()
	created := 0
	for t := from.UTC().Truncate(unit).UnixNano(); t < end; {
		lo, hi := spanPartitionRange(t, width)
		covered, next := false, int64(0)
		for _, p := range parts {
			switch {
			case p.From <= t && t < p.To:
				covered, next = true, p.To
			case p.To <= t:
				lo = max(lo, p.To)
			case p.From > t:
				hi = min(hi, p.From)
			}
		}
		if covered {
			t = next
			continue
		}
		var ok bool
		if err := s.db.QueryRow(ctx, `SELECT spans_partition_create($1, $2)`, lo, hi).Scan(&ok); err != nil {
			return created, fmt.Errorf("create span partition from %s: %w", time.Unix(0, lo).UTC().Format(time.DateTime), err)
		}
		if ok {
			created++
		}
		// Listed again: this one, or one another process made meanwhile.
		if parts, err = s.SpanPartitions(ctx); err != nil {
			return created, err
		}
		t = hi
	}
	return created, nil
}

// spanPartitionRange is the UTC hour, day or month, as width says, that holds t (Unix nanoseconds).
func spanPartitionRange(t int64, width SpanPartitionWidth) (lo, hi int64) {
	at := time.Unix(0, t).UTC()
	switch width {
	case SpanPartitionsHourly:
		h := at.Truncate(time.Hour)
		return h.UnixNano(), h.Add(time.Hour).UnixNano()
	case SpanPartitionsMonthly:
		first := time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
		return first.UnixNano(), first.AddDate(0, 1, 0).UnixNano()
	default:
		d := at.Truncate(SpanPartitionDay)
		return d.UnixNano(), d.Add(SpanPartitionDay).UnixNano()
	}
}

// SpanPartitionRows is about how many spans partition p holds: PostgreSQL's estimate (its
// statistics, or its last analyze), not a count, which would read the whole partition.
func (s *Store) SpanPartitionRows(ctx context.Context, p SpanPartition) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT GREATEST(c.reltuples::bigint, COALESCE(st.n_live_tup, 0), 0)
		FROM pg_class c LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
		WHERE c.oid = to_regclass($1)`, pgx.Identifier{p.Name}.Sanitize()).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rows of span partition %s: %w", p.Name, err)
	}
	return n, nil
}

// spanPartitionLockTimeout bounds how long dropping a partition waits for its locks: the drop
// takes an exclusive lock on spans, which every read of spans then queues behind. It is longer
// than PostgreSQL's deadlock_timeout (1 s), after which an autovacuum of the partition that holds
// the drop up cancels itself. A drop that times out returns ErrSpanPartitionBusy.
const spanPartitionLockTimeout = "3s"

// ErrSpanPartitionBusy is SpanPartitionDrop's answer when the partition's locks were not granted
// within spanPartitionLockTimeout: try again later.
var ErrSpanPartitionBusy = errors.New("span partition busy")

// SpanPartitionDrop drops a day's partition of spans, keeping every span in it whose trace still
// has a summary row: those are moved into spans_default (which covers the day once its partition
// is gone), so that a trace that retention keeps stays whole though some of its spans started on
// an expired day. It runs in one transaction and returns how many spans it kept.
func (s *Store) SpanPartitionDrop(ctx context.Context, p SpanPartition) (kept int64, err error) {
	ident := pgx.Identifier{p.Name}.Sanitize()
	err = s.WithTx(ctx, func(tx *Store) error {
		// Another replica's retention pass may have dropped it since it was listed.
		var exists bool
		if err := tx.db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, set_config('lock_timeout', '`+
			spanPartitionLockTimeout+`', true)`, ident).Scan(&exists, nil); err != nil || !exists {
			return err
		}
		// The parent first, as the drop will take it: ingest then waits instead of deadlocking.
		if _, err := tx.db.Exec(ctx, `LOCK TABLE ONLY spans, `+ident+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			return err
		}
		rows, err := tx.db.Query(ctx, `SELECT trace_id FROM traces
			WHERE span_start_min_unix_nano < $2 AND span_start_max_unix_nano >= $1`, p.From, p.To)
		if err != nil {
			return err
		}
		keep, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(keep) > 0 {
			if _, err := tx.db.Exec(ctx, `CREATE TEMPORARY TABLE spans_kept ON COMMIT DROP AS
				SELECT * FROM `+ident+` WHERE trace_id = ANY($1)`, keep); err != nil {
				return err
			}
		}
		if _, err := tx.db.Exec(ctx, `DROP TABLE `+ident); err != nil {
			return err
		}
		if len(keep) > 0 {
			tag, err := tx.db.Exec(ctx, `INSERT INTO spans SELECT * FROM spans_kept`)
			if err != nil {
				return err
			}
			kept = tag.RowsAffected()
		}
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return 0, fmt.Errorf("drop span partition %s: %w: %w", p.Name, ErrSpanPartitionBusy, err)
	}
	if err != nil {
		return 0, fmt.Errorf("drop span partition %s: %w", p.Name, err)
	}
	return kept, nil
}
