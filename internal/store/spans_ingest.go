package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SpanIngestResult counts what an ingest did.
type SpanIngestResult struct {
	Inserted int64 // spans that were new
	Updated  int64 // spans that replaced a stored copy (a running span that ended, a resend)
	Skipped  int64 // spans ignored because the stored copy is newer (a start that arrived after its end)
	// Ended are the spans this ingest stored ended for the first time: new and ended, or ended
	// over a running copy. A span is in one ingest's Ended only, however often it is sent, which
	// is what lets TraceUsageFold count each span's share once without a record per span.
	Ended []SpanKey
}

func (r *SpanIngestResult) add(o SpanIngestResult) {
	r.Inserted += o.Inserted
	r.Updated += o.Updated
	r.Skipped += o.Skipped
	r.Ended = append(r.Ended, o.Ended...)
}

// fastThreshold is the batch size from which SpanIngest takes the fast path (spanIngestFast) when
// the batch holds spans stored before (knownSpans): below it, one round trip of the arrays merge is
// cheaper than the fast path's lookup and merge. A batch of new spans takes the fast path at any
// size: its COPY and fold cost PostgreSQL less than the merge's 25-node plan (realtime ingest with
// 8 senders into one trace, alternately: 4,352 / 4,448 spans/s against 3,768 / 3,697, PostgreSQL
// 110-112 against 162-164 µs a span), and since copyFoldCommit they take one round trip too. From there
// up, the merge's array parameters and upsert cost more CPU than the round trips save: at load 8,
// 20-span requests (groups of 20 to 160 spans) spent 116-122 µs of CPU per span (server and
// PostgreSQL) at 64 against 83-86 µs at 16; on a quiet machine the two were within each other's
// noise (BENCHMARKS.md, "OTLP ingest against Jaeger").
const fastThreshold = 16

// copyThreshold is the batch size from which SpanIngest stages rows with COPY instead of sending
// them as arrays: COPY costs a temporary table per transaction but streams large batches faster.
const copyThreshold = 256

// SpanIngest stores spans and keeps the traces summary rows up to date, in one statement (one
// transaction). Batches without run ids take spanIngestFast when they hold fastThreshold spans or
// more, or none this process stored lately. A span
// already stored is merged, never duplicated: the incoming copy wins unless the
// stored copy has ended and the incoming one has not, which is how Genkit JS's realtime mode (a
// span sent at start and again at end, in either order) ends up as one finished span. A run id that
// names no run is stored as NULL. Batches of copyThreshold spans or more are staged with COPY.
//
// Duplicate (trace, span) keys within spans are merged by the same rule before anything is sent.
func (s *Store) SpanIngest(ctx context.Context, spans []Span) (SpanIngestResult, error) {
	return s.spanIngest(ctx, spans, false, nil)
}

// SpanIngestCopy is SpanIngest staging every batch with COPY, whatever its size.
func (s *Store) SpanIngestCopy(ctx context.Context, spans []Span) (SpanIngestResult, error) {
	return s.spanIngest(ctx, spans, true, nil)
}

// UsageFunc gives the shares and services to fold (see TraceUsageFold) for an ingest's spans. It
// is given the keys of the spans that carry an end; the ingest folds, in the statement that stores
// them, the share of each span it stores ended for the first time (SpanIngestResult.Ended), and
// the services of the traces it changes. A share for any other key is dropped.
type UsageFunc func(ended []SpanKey) ([]SpanUsage, []TraceService)

// SpanIngestCopyFold is SpanIngestCopy that also folds usage(ended) into the traces' totals in
// the same transaction, so that no reader sees a trace's spans without their totals: the span
// exporter's path, whose traces a page lists as soon as their run ends.
func (s *Store) SpanIngestCopyFold(ctx context.Context, spans []Span, usage UsageFunc) (SpanIngestResult, error) {
	return s.spanIngest(ctx, spans, true, usage)
}

// SpanIngestFold is SpanIngest that also folds usage into the traces' totals (see UsageFunc) in
// the same transaction, and the same statement: one commit and one round trip per ingest, and no
// reader sees the spans without their totals.
func (s *Store) SpanIngestFold(ctx context.Context, spans []Span, usage UsageFunc) (SpanIngestResult, error) {
	return s.spanIngest(ctx, spans, false, usage)
}

func (s *Store) spanIngest(ctx context.Context, spans []Span, forceCopy bool, usage UsageFunc) (SpanIngestResult, error) {
	spans = dedupeSpans(spans)
	if len(spans) == 0 {
		return SpanIngestResult{}, nil
	}
	var (
		res SpanIngestResult
		err error
	)
	// A batch none of whose spans this process stored lately is copied without a lookup, whatever
	// its size; one with a known span is looked up, through the fast path when it is large and
	// the arrays merge (one round trip) when it is small.
	known := s.known == nil || s.known.anyKnown(spans)
	fast := !forceCopy && s.Tx() == nil && (len(spans) >= fastThreshold || !known) && !slices.ContainsFunc(spans, hasRunID)
	lookUp := fast && known
	// Up to two tries of the fast path (without the lookup, then with it) and two of a merge (a
	// deadlock with a concurrent ingest is tried once more).
	for attempt := 0; attempt < 4; attempt++ {
		switch {
		case fast:
			res, err = s.spanIngestFast(ctx, spans, usage, lookUp)
			if isUniqueViolation(err) {
				if !lookUp && len(spans) >= fastThreshold {
					// Stored before all the same (by another process, or before a restart): look
					// them up this time.
					lookUp = true
				} else {
					// A concurrent ingest stored one of our new spans between the check and the
					// COPY: merge everything instead.
					fast = false
				}
				continue
			}
		case forceCopy || len(spans) >= copyThreshold:
			err = s.WithTx(ctx, func(tx *Store) error {
				if s.Tx() == nil {
					if _, err := tx.db.Exec(ctx, asyncCommit); err != nil {
						return err
					}
				}
				res, err = tx.spanIngestCopy(ctx, spans, usage)
				return err
			})
		default:
			res, err = s.spanIngestArrays(ctx, spans, usage)
		}
		if isUndefinedTable(err) && s.Tx() == nil && s.parts != nil {
			// A partition the merge wrote directly was dropped since the store listed them.
			s.parts.forget()
			continue
		}
		if !retryable(err) || s.Tx() != nil {
			break
		}
	}
	if err != nil {
		return SpanIngestResult{}, fmt.Errorf("ingest %d spans: %w", len(spans), err)
	}
	if s.known != nil {
		s.known.add(spans)
	}
	return res, nil
}

// ingestSettings sets up an ingest transaction. It commits without waiting for its WAL flush:
// spans are telemetry, a PostgreSQL crash may lose the last few hundred milliseconds of
// acknowledged spans (at most three wal_writer_delay periods) but never corrupts anything, and in
// exchange a commit costs no fsync, which is what lets one hot trace take thousands of single-span
// POSTs a second. Runs, interrupts and everything else keep full durability. And it plans without
// sequential scans: every ingest statement reads spans, traces and runs by key, but pgx prepares
// them, and PostgreSQL keeps a generic plan made from the statistics of the moment it settles on
// one; on a fresh store that is a sequential scan of each (empty then), kept until autovacuum
// analyzes them, so that every group would read every span stored so far
// (TestIngestOfSmallGroupsNeverScansATable). Neither applies when the caller passes its own
// transaction. It is set_config rather than SET LOCAL, which works the same in the implicit
// transaction of a pipelined batch but logs a warning there on every ingest.
//
// And it plans each statement once per connection (plan_cache_mode): its bounds on spans' start
// times are parameters (spanStartBounds), which a generic plan prunes to their partitions when the
// statement starts; left to choose, PostgreSQL would plan the merge afresh for each batch, since
// a plan made for the values at hand prunes at planning and so looks cheaper, and planning the
// merge costs 2 ms with 4 partitions of spans kept and 55 ms with 404, ten times its execution.
//
// And it never JIT-compiles (see SessionDefaults, which Loupe's pools apply to every statement):
// a generic plan over hundreds of partitions is estimated to cost enough for PostgreSQL to compile
// it on every execution, 2.7 s to merge one span's end beside ten days of hour partitions, whatever
// pool the Store was given.
const ingestSettings = `SELECT set_config('synchronous_commit', 'off', true), set_config('enable_seqscan', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true), set_config('jit', 'off', true)`

// asyncCommit is ingestSettings without the planner settings, for the merge of a batch staged in a
// temporary table (COPY staging): that table has neither an index nor statistics, and with
// sequential scans off PostgreSQL planned the merge's join of it with spans so badly that one
// batch of 20 spans ran for minutes against 20,000 stored (bench-smoke's BenchmarkSpanIngest).
const asyncCommit = `SELECT set_config('synchronous_commit', 'off', true), set_config('jit', 'off', true)`

// isUniqueViolation reports a duplicate key, which the fast path meets only when it races another
// ingest of the same span.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

func hasRunID(sp Span) bool { return sp.RunID != nil }

// retryable reports a deadlock or serialization failure, which a retry resolves.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// dedupeSpans sorts spans by key, so that concurrent ingests lock rows in the same order, and
// merges repeated keys by the ingest rule.
func dedupeSpans(spans []Span) []Span {
	sorted := slices.IsSortedFunc(spans, compareSpanKeys)
	if !sorted {
		spans = slices.Clone(spans)
		slices.SortStableFunc(spans, compareSpanKeys)
	}
	dup := false
	for i := 1; i < len(spans) && !dup; i++ {
		dup = compareSpanKeys(spans[i-1], spans[i]) == 0
	}
	if !dup {
		return spans // the caller's, when sorted already: never written to
	}
	out := make([]Span, 0, len(spans))
	for i := range spans {
		if n := len(out); n > 0 && compareSpanKeys(out[n-1], spans[i]) == 0 {
			if out[n-1].EndTime == 0 || spans[i].EndTime != 0 {
				prev := out[n-1]
				out[n-1] = spans[i]
				if out[n-1].ParentSpanID == nil {
					out[n-1].ParentSpanID = prev.ParentSpanID
				}
				if out[n-1].RunID == nil {
					out[n-1].RunID = prev.RunID
				}
			}
			continue
		}
		out = append(out, spans[i])
	}
	return out
}

func compareSpanKeys(a, b Span) int {
	if c := strings.Compare(a.TraceID, b.TraceID); c != 0 {
		return c
	}
	return strings.Compare(a.SpanID, b.SpanID)
}

// traceFoldSQL folds one batch's per-trace aggregate (EXCLUDED) into a stored summary row (t): the
// root's name, times and status once a root has arrived, else the span-wide extremes; span_count
// adds the batch's new spans, and the failed, interrupted and resuming counts add what the batch
// changed (its new spans', less the replaced copies'). The usage totals and the service, session
// and thread fold as TraceUsageFold folds them, so that a batch can bring its usage along (the fast
// path's new spans do); a batch that brings none leaves them as they are. Folding a batch in parts gives the same row as folding it whole (bar
// the root fields of a trace with two roots), which is what lets the fast path fold its new spans
// and its merged spans separately.
const traceFoldSQL = `
	ON CONFLICT (trace_id) DO UPDATE SET
		display_name = CASE WHEN EXCLUDED.root_span_id IS NOT NULL THEN EXCLUDED.display_name
			ELSE t.display_name END,
		root_span_id = COALESCE(EXCLUDED.root_span_id, t.root_span_id),
		start_time_unix_nano = CASE
			WHEN EXCLUDED.root_span_id IS NOT NULL THEN EXCLUDED.start_time_unix_nano
			WHEN t.root_span_id IS NOT NULL THEN t.start_time_unix_nano
			ELSE COALESCE(LEAST(NULLIF(t.start_time_unix_nano, 0), NULLIF(EXCLUDED.start_time_unix_nano, 0)), 0) END,
		end_time_unix_nano = CASE
			WHEN EXCLUDED.root_span_id IS NOT NULL THEN EXCLUDED.end_time_unix_nano
			WHEN t.root_span_id IS NOT NULL THEN t.end_time_unix_nano
			ELSE GREATEST(t.end_time_unix_nano, EXCLUDED.end_time_unix_nano) END,
		status_code = CASE WHEN EXCLUDED.root_span_id IS NOT NULL THEN EXCLUDED.status_code
			ELSE t.status_code END,
		span_count = t.span_count + EXCLUDED.span_count,
		last_end_time_unix_nano = GREATEST(t.last_end_time_unix_nano, EXCLUDED.last_end_time_unix_nano),
		error_spans       = t.error_spans + EXCLUDED.error_spans,
		interrupted_spans = t.interrupted_spans + EXCLUDED.interrupted_spans,
		resume_spans      = t.resume_spans + EXCLUDED.resume_spans,
		model         = CASE WHEN t.model = '' THEN EXCLUDED.model ELSE t.model END,
		model_calls   = t.model_calls + EXCLUDED.model_calls,
		input_tokens  = t.input_tokens + EXCLUDED.input_tokens,
		output_tokens = t.output_tokens + EXCLUDED.output_tokens,
		tool_calls    = t.tool_calls + EXCLUDED.tool_calls,
		tool_errors   = t.tool_errors + EXCLUDED.tool_errors,
		service       = CASE WHEN t.service = '' THEN EXCLUDED.service ELSE t.service END,
		session       = COALESCE(t.session, EXCLUDED.session),
		thread        = COALESCE(t.thread, CASE WHEN COALESCE(t.session, EXCLUDED.session, '') = COALESCE(EXCLUDED.session, '')
			THEN EXCLUDED.thread END),
		span_start_min_unix_nano = LEAST(t.span_start_min_unix_nano, EXCLUDED.span_start_min_unix_nano),
		span_start_max_unix_nano = GREATEST(t.span_start_max_unix_nano, EXCLUDED.span_start_max_unix_nano),
		run_id     = COALESCE(t.run_id, EXCLUDED.run_id),
		updated_at = now()
`

// spanMergeSQL upserts the rows of the relation src into spans, then folds what changed into
// traces, usage included. %[1]s is the source relation, with the columns of spanColumns; from
// parameter %[2]d on come the usage shares (spanMergeShareArgs: trace, span, model, start time,
// model calls, input and output tokens, tool calls and errors, a column array each) and the
// traces' services (trace, service, session, thread). A share is folded only when its span is
// stored ended for the first time by this statement (ended), so that a span's share counts once
// however often it is sent; the services fold into the traces this statement changes. It answers
// the spans inserted and updated, the traces folded, and the keys of the spans stored ended for
// the first time (see SpanIngestResult.Ended), read against the statement's snapshot of spans
// (old), which is also where the replaced copies' status and flags are taken back from the
// trace's counts. One statement, one round trip: the usage used to take a second, after the
// merge had said which spans ended, and the realtime load's writer waited on both.
//
// spans is partitioned by start time and its key holds the start (migration 00060), so a copy of a
// span with another start time than the stored one (a sender whose clock moved between a span's
// two sends) would conflict with nothing. old finds the stored copies of the batch's spans along
// the key's (trace_id, span_id) prefix, within parameters %[15]d and %[16]d, the batch's start
// times widened by spanStartSlack (storedCopiesSQL); a span with none is new (RETURNING cannot
// read xmax on a partitioned table). moved deletes the copies with another start that the
// incoming copy replaces (keeping their parent and run id); its uncorrelated EXISTS gates the
// whole delete, which would otherwise start a scan of a partition even when there is nothing to
// move. The insert skips an incoming running copy of a span stored as ended with another start,
// as the conflict rule does for the same start.
var spanMergeSQL = `
WITH src AS (%[1]s),
old AS MATERIALIZED (
	SELECT d.trace_id, d.span_id, d.start_time_unix_nano, d.end_time_unix_nano, d.status_code, d.flags,
		d.start_time_unix_nano <> s.start_time_unix_nano AS elsewhere,
		(d.end_time_unix_nano <> 0 AND s.end_time_unix_nano = 0) AS keep
	FROM src s CROSS JOIN LATERAL (` + fmt.Sprintf(storedCopiesSQL, "%[17]s", "%[15]d", "%[16]d") + `) d
),
moved AS (
	DELETE FROM %[17]s d USING old p
	WHERE p.elsewhere AND NOT p.keep AND d.trace_id = p.trace_id AND d.span_id = p.span_id
		AND d.start_time_unix_nano = p.start_time_unix_nano
		AND d.start_time_unix_nano BETWEEN $%[15]d AND $%[16]d
		AND EXISTS (SELECT 1 FROM old q WHERE q.elsewhere AND NOT q.keep)
	RETURNING d.trace_id, d.span_id, d.parent_span_id, d.run_id
),
up AS (
	INSERT INTO %[17]s AS sp (` + spanColumns + `)
	SELECT s.trace_id, s.span_id, COALESCE(s.parent_span_id, m.parent_span_id), s.name, s.kind,
		s.start_time_unix_nano, s.end_time_unix_nano, s.status_code, s.status_message,
		s.attributes, s.events, s.links, s.resource, s.scope, s.scope_version, s.source,
		COALESCE(r.id, m.run_id), s.flags
	FROM src s LEFT JOIN runs r ON r.id = s.run_id
		LEFT JOIN moved m ON m.trace_id = s.trace_id AND m.span_id = s.span_id
	WHERE NOT EXISTS (SELECT 1 FROM old p WHERE p.elsewhere AND p.keep AND p.trace_id = s.trace_id AND p.span_id = s.span_id)
	ORDER BY s.trace_id, s.span_id
	ON CONFLICT (trace_id, span_id, start_time_unix_nano) DO UPDATE SET
		parent_span_id       = COALESCE(EXCLUDED.parent_span_id, sp.parent_span_id),
		name                 = EXCLUDED.name,
		kind                 = EXCLUDED.kind,
		start_time_unix_nano = EXCLUDED.start_time_unix_nano,
		end_time_unix_nano   = EXCLUDED.end_time_unix_nano,
		status_code          = EXCLUDED.status_code,
		status_message       = EXCLUDED.status_message,
		attributes           = EXCLUDED.attributes,
		events               = EXCLUDED.events,
		links                = EXCLUDED.links,
		resource             = EXCLUDED.resource,
		scope                = EXCLUDED.scope,
		scope_version        = EXCLUDED.scope_version,
		run_id               = COALESCE(EXCLUDED.run_id, sp.run_id),
		flags                = EXCLUDED.flags
	WHERE sp.end_time_unix_nano = 0 OR EXCLUDED.end_time_unix_nano <> 0
	RETURNING sp.trace_id, sp.span_id, sp.parent_span_id, sp.name, sp.start_time_unix_nano,
		sp.end_time_unix_nano, sp.status_code, sp.source, sp.run_id, sp.flags
),
ups AS (
	SELECT u.*, NOT EXISTS (SELECT 1 FROM old p WHERE p.trace_id = u.trace_id AND p.span_id = u.span_id) AS inserted
	FROM up u
),
ended AS (
	SELECT u.trace_id, u.span_id FROM up u
	LEFT JOIN old o ON o.trace_id = u.trace_id AND o.span_id = u.span_id
	WHERE u.end_time_unix_nano <> 0 AND (o.trace_id IS NULL OR o.end_time_unix_nano = 0)
),
agg AS (
	SELECT u.trace_id,
		max(u.span_id) FILTER (WHERE u.parent_span_id IS NULL)              AS root_span_id,
		max(u.name) FILTER (WHERE u.parent_span_id IS NULL)                 AS root_name,
		min(u.start_time_unix_nano) FILTER (WHERE u.parent_span_id IS NULL) AS root_start,
		max(u.end_time_unix_nano) FILTER (WHERE u.parent_span_id IS NULL)   AS root_end,
		max(u.status_code) FILTER (WHERE u.parent_span_id IS NULL)          AS root_status,
		min(NULLIF(u.start_time_unix_nano, 0))                              AS any_start,
		max(u.end_time_unix_nano)                                           AS any_end,
		count(*) FILTER (WHERE u.inserted)                                  AS new_spans,
		min(u.source)                                                       AS source,
		(array_agg(u.run_id) FILTER (WHERE u.run_id IS NOT NULL))[1]        AS run_id,
		count(*) FILTER (WHERE u.status_code = 2) - count(*) FILTER (WHERE o.status_code = 2) AS error_spans,
		count(*) FILTER (WHERE u.flags & 1 <> 0) - count(*) FILTER (WHERE o.flags & 1 <> 0) AS interrupted_spans,
		count(*) FILTER (WHERE u.flags & 2 <> 0) - count(*) FILTER (WHERE o.flags & 2 <> 0) AS resume_spans,
		min(u.start_time_unix_nano)                                         AS span_start_min,
		max(u.start_time_unix_nano)                                         AS span_start_max
	FROM ups u LEFT JOIN old o ON o.trace_id = u.trace_id AND o.span_id = u.span_id
	GROUP BY u.trace_id
),
us AS (
	SELECT sh.trace_id,
		(array_agg(sh.model ORDER BY sh.start_time, sh.n) FILTER (WHERE sh.model <> ''))[1] AS model,
		sum(sh.model_calls) AS model_calls, sum(sh.input_tokens) AS input_tokens,
		sum(sh.output_tokens) AS output_tokens, sum(sh.tool_calls) AS tool_calls,
		sum(sh.tool_errors) AS tool_errors
	FROM unnest($%[2]d::text[], $%[3]d::text[], $%[4]d::text[], $%[5]d::int8[], $%[6]d::int4[],
		$%[7]d::int8[], $%[8]d::int8[], $%[9]d::int4[], $%[10]d::int4[]) WITH ORDINALITY
		AS sh(trace_id, span_id, model, start_time, model_calls, input_tokens, output_tokens,
			tool_calls, tool_errors, n)
	JOIN ended e ON e.trace_id = sh.trace_id AND e.span_id = sh.span_id
	GROUP BY sh.trace_id
),
sv AS (
	SELECT * FROM unnest($%[11]d::text[], $%[12]d::text[], $%[13]d::text[], $%[14]d::text[])
		AS sv(trace_id, service, session, thread)
),
tr AS (
	INSERT INTO traces AS t (trace_id, display_name, root_span_id, start_time_unix_nano,
		end_time_unix_nano, status_code, span_count, source, run_id, updated_at, last_end_time_unix_nano,
		error_spans, interrupted_spans, resume_spans, model, model_calls, input_tokens, output_tokens,
		tool_calls, tool_errors, service, session, thread, span_start_min_unix_nano, span_start_max_unix_nano)
	SELECT a.trace_id, left(COALESCE(a.root_name, ''), ` + displayNameMaxSQL + `), a.root_span_id,
		COALESCE(a.root_start, a.any_start, 0),
		CASE WHEN a.root_span_id IS NOT NULL THEN a.root_end ELSE a.any_end END,
		COALESCE(a.root_status, 0), a.new_spans, a.source, a.run_id, now(), COALESCE(a.any_end, 0),
		a.error_spans, a.interrupted_spans, a.resume_spans, COALESCE(us.model, ''),
		COALESCE(us.model_calls, 0), COALESCE(us.input_tokens, 0), COALESCE(us.output_tokens, 0),
		COALESCE(us.tool_calls, 0), COALESCE(us.tool_errors, 0), COALESCE(sv.service, ''),
		NULLIF(sv.session, ''), NULLIF(sv.thread, ''), a.span_start_min, a.span_start_max
	FROM agg a LEFT JOIN us ON us.trace_id = a.trace_id LEFT JOIN sv ON sv.trace_id = a.trace_id
	ORDER BY a.trace_id
` + traceFoldSQL + `	RETURNING 1
)
SELECT (SELECT count(*) FROM ups WHERE inserted), (SELECT count(*) FROM ups WHERE NOT inserted),
	(SELECT count(*) FROM tr),
	ARRAY(SELECT trace_id FROM ended ORDER BY trace_id, span_id),
	ARRAY(SELECT span_id FROM ended ORDER BY trace_id, span_id)`

// spanMergeSQLFor is spanMergeSQL with src as its source, whose own parameters number params,
// merging into table: spans, or the one partition of it that holds the batch (spanMergeSQLOn).
func spanMergeSQLFor(src string, params int, table string) string {
	p := params + 1
	return fmt.Sprintf(spanMergeSQL, src, p, p+1, p+2, p+3, p+4, p+5, p+6, p+7, p+8, p+9, p+10, p+11, p+12, p+13, p+14,
		pgx.Identifier{table}.Sanitize())
}

// spanMergeTailArgs are spanMergeSQL's parameters after its source's, for spans: the usage shares,
// the services (the first of each trace's, as TraceUsageFold's join would pick one), and the
// bounds of the stored copies' start times (spanStartBounds).
func spanMergeTailArgs(spans []Span, shares []SpanUsage, services []TraceService) []any {
	n := len(shares)
	traceIDs, spanIDs, models := make([]string, n), make([]string, n), make([]string, n)
	starts, inputs, outputs := make([]int64, n), make([]int64, n), make([]int64, n)
	modelCalls, toolCalls, toolErrors := make([]int32, n), make([]int32, n), make([]int32, n)
	for i, u := range shares {
		traceIDs[i], spanIDs[i], starts[i] = u.TraceID, u.SpanID, u.StartTime
		switch u.Kind {
		case "model":
			modelCalls[i], models[i], inputs[i], outputs[i] = 1, u.Model, u.InputTokens, u.OutputTokens
		case "tool":
			toolCalls[i] = 1
			if u.Failed {
				toolErrors[i] = 1
			}
		}
	}
	var svTraces, names, sessions, threads []string
	seen := make(map[string]struct{}, len(services))
	for _, sv := range services {
		if _, ok := seen[sv.TraceID]; ok {
			continue
		}
		seen[sv.TraceID] = struct{}{}
		svTraces, names = append(svTraces, sv.TraceID), append(names, sv.Service)
		sessions, threads = append(sessions, sv.Session), append(threads, sv.Thread)
	}
	lo, hi := spanStartBounds(spans)
	return []any{traceIDs, spanIDs, models, starts, modelCalls, inputs, outputs, toolCalls, toolErrors,
		svTraces, names, sessions, threads, lo, hi}
}

// spanStartSlack is how far from a batch's own start times ingest looks for stored copies of its
// spans with another start (a sender whose clock moved between two sends of a span): a copy
// further off is not found, and the span is then stored twice.
const spanStartSlack = int64(time.Hour)

// spanStartBounds bounds the start times of spans' stored copies: the batch's own, widened by
// spanStartSlack. Ingest reads and deletes stored spans only within them, given as parameters so
// that PostgreSQL prunes to the partitions that hold them when it starts the statement; bounds
// read from the trace summaries in the statement would prune only while it runs, after every
// partition's plan was initialised (55 ms a merge at 404 partitions).
func spanStartBounds(spans []Span) (lo, hi int64) {
	lo, hi = math.MaxInt64, math.MinInt64
	for i := range spans {
		lo, hi = min(lo, spans[i].StartTime), max(hi, spans[i].StartTime)
	}
	if lo > hi {
		return 0, 0
	}
	return satAdd(lo, -spanStartSlack), satAdd(hi, spanStartSlack)
}

// satAdd is a+b, held within int64's range.
func satAdd(a, b int64) int64 {
	c := a + b
	if b < 0 && c > a {
		return math.MinInt64
	}
	if b > 0 && c < a {
		return math.MaxInt64
	}
	return c
}

const spanArraysSource = `SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
	$5::int2[], $6::int8[], $7::int8[], $8::int2[], $9::text[], $10::text[], $11::text[], $12::text[],
	$13::text[], $14::text[], $15::text[], $16::text[], $17::uuid[], $18::int2[])
	AS s(trace_id, span_id, parent_span_id, name, kind, start_time_unix_nano, end_time_unix_nano,
		status_code, status_message, attributes_text, events_text, links_text, resource_text, scope,
		scope_version, source, run_id, flags)`

// spanArraysSrc casts the JSON columns, sent as text so that pgx needs no json[] encoding.
const spanArraysSrc = `SELECT trace_id, span_id, parent_span_id, name, kind,
	start_time_unix_nano, end_time_unix_nano, status_code, status_message,
	attributes_text::json AS attributes, events_text::json AS events, links_text::json AS links,
	resource_text::json AS resource, scope, scope_version, source, run_id, flags FROM (` + spanArraysSource + `) a`

// spanArraysSQL merges spans given as column arrays (spanArraysArgs, spanMergeTailArgs) through
// the partitioned table.
var spanArraysSQL = spanMergeSQLFor(spanArraysSrc, 18, "spans")

// spanArraysSQLOn is spanArraysSQL merging into table, a partition of spans, kept once made.
var spanArraysSQLOn sync.Map

// spanMergeSQLOn returns the merge of spans as column arrays, into the one partition that holds
// every start time of the batch's stored copies (spanStartBounds) when there is one and the store
// is not in its caller's transaction, else through spans. Into the partition, PostgreSQL neither
// routes each row nor sets the conflict rule up for the partition on every execution: realtime
// groups ran about a tenth slower through the partitioned table. It returns the table it chose.
func (s *Store) spanMergeSQLOn(ctx context.Context, spans []Span) (sql, table string) {
	if s.Tx() != nil || s.parts == nil {
		return spanArraysSQL, "spans"
	}
	lo, hi := spanStartBounds(spans)
	table = s.parts.tableFor(ctx, s, lo, hi)
	if table == "spans" {
		return spanArraysSQL, table
	}
	if q, ok := spanArraysSQLOn.Load(table); ok {
		return q.(string), table
	}
	q := spanMergeSQLFor(spanArraysSrc, 18, table)
	spanArraysSQLOn.Store(table, q)
	return q, table
}

// isUndefinedTable reports a statement on a table that does not exist: a partition dropped since
// the store listed them (spanPartitionCache).
func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

var spanCopySQL = spanMergeSQLFor(`SELECT * FROM spans_stage`, 0, "spans")

func (s *Store) spanIngestArrays(ctx context.Context, spans []Span, usage UsageFunc) (SpanIngestResult, error) {
	var res SpanIngestResult
	shares, services := endedUsage(spans, usage)
	args := append(spanArraysArgs(spans), spanMergeTailArgs(spans, shares, services)...)
	scan := func(row pgx.Row) error { return scanMerge(row, &res) }
	if s.Tx() != nil {
		if err := scan(s.db.QueryRow(ctx, spanArraysSQL, args...)); err != nil {
			return SpanIngestResult{}, err
		}
	} else {
		// One round trip, one implicit transaction: the settings apply to the ingest only.
		b := &pgx.Batch{}
		b.Queue(ingestSettings)
		q, _ := s.spanMergeSQLOn(ctx, spans)
		b.Queue(q, args...).QueryRow(scan)
		if err := s.db.SendBatch(ctx, b).Close(); err != nil {
			return SpanIngestResult{}, err
		}
	}
	res.Skipped = int64(len(spans)) - res.Inserted - res.Updated
	return res, nil
}

// endedUsage asks usage for the shares and services of the spans that carry an end: those an
// ingest may store ended for the first time (spanMergeSQL folds the shares of those it does). A
// nil usage has none. A span's share counts once, however often the batch holds it.
func endedUsage(spans []Span, usage UsageFunc) ([]SpanUsage, []TraceService) {
	if usage == nil {
		return nil, nil
	}
	var ended []SpanKey
	for i := range spans {
		if spans[i].EndTime != 0 {
			ended = append(ended, SpanKey{spans[i].TraceID, spans[i].SpanID})
		}
	}
	shares, services := usage(ended)
	if len(shares) > 1 {
		seen := make(map[SpanKey]struct{}, len(shares))
		kept := shares[:0:0]
		for _, u := range shares {
			k := SpanKey{u.TraceID, u.SpanID}
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				kept = append(kept, u)
			}
		}
		shares = kept
	}
	return shares, services
}

// pipelinedTx runs fn on a connection of its own, in which fn sends BEGIN and COMMIT itself
// inside its batches (so that they cost no round trip of their own). A transaction fn leaves open
// (it failed midway) is rolled back before the connection goes back to the pool.
func (s *Store) pipelinedTx(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
			// Failed midway: end the transaction, so that the connection goes back to the pool
			// (released in a transaction, it would be closed).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
		conn.Release()
	}()
	return fn(conn.Conn())
}

// spanArraysArgs are spanArraysSQL's arguments for spans: a column array each.
func spanArraysArgs(spans []Span) []any {
	n := len(spans)
	var (
		traceIDs, spanIDs, names, statusMsgs, scopes, scopeVersions, sources = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		parents                                                              = make([]*string, n)
		kinds, statuses                                                      = make([]int16, n), make([]int16, n)
		starts, ends                                                         = make([]int64, n), make([]int64, n)
		attrs, events, links, resources                                      = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		runIDs                                                               = make([]*uuid.UUID, n)
		flags                                                                = make([]int16, n)
	)
	for i := range spans {
		sp := &spans[i]
		traceIDs[i], spanIDs[i], parents[i], names[i] = sp.TraceID, sp.SpanID, sp.ParentSpanID, sp.Name
		kinds[i], starts[i], ends[i], statuses[i], statusMsgs[i] = sp.Kind, sp.StartTime, sp.EndTime, sp.StatusCode, sp.StatusMessage
		attrs[i], events[i] = jsonOr(sp.Attributes, "{}"), jsonOr(sp.Events, "[]")
		links[i], resources[i] = jsonOr(sp.Links, "[]"), jsonOr(sp.Resource, "{}")
		scopes[i], scopeVersions[i], sources[i], runIDs[i] = sp.Scope, sp.ScopeVersion, sourceOr(sp.Source), sp.RunID
		flags[i] = spanFlags(sp)
	}
	return []any{traceIDs, spanIDs, parents, names, kinds, starts, ends, statuses, statusMsgs, attrs,
		events, links, resources, scopes, scopeVersions, sources, runIDs, flags}
}

// scanMerge reads spanMergeSQL's answer into res.
func scanMerge(row pgx.Row, res *SpanIngestResult) error {
	var traces int64
	var traceIDs, spanIDs []string
	if err := row.Scan(&res.Inserted, &res.Updated, &traces, &traceIDs, &spanIDs); err != nil {
		return err
	}
	if len(traceIDs) > 0 {
		res.Ended = make([]SpanKey, len(traceIDs))
		for i := range traceIDs {
			res.Ended[i] = SpanKey{traceIDs[i], spanIDs[i]}
		}
	}
	return nil
}

// storedCopiesSQL finds the stored copies of span s in table %s (spans, or the partition that holds
// the batch) that started between parameters %s and %s (spanStartBounds): PostgreSQL prunes to the partitions of those times when the statement
// starts, and probes their keys once per span. OFFSET 0 keeps the subquery apart, run once per
// span, whatever join the planner would choose for it.
const storedCopiesSQL = `SELECT d.* FROM %s d
	WHERE d.trace_id = s.trace_id AND d.span_id = s.span_id
		AND d.start_time_unix_nano BETWEEN $%s AND $%s
	OFFSET 0`

// spanExistingSQLOn returns the statement that answers which of the given keys are already stored
// in table, spans or the partition that holds the batch (see storedCopiesSQL).
func spanExistingSQLOn(table string) string {
	return `SELECT s.trace_id, s.span_id
	FROM unnest($1::text[], $2::text[]) AS s(trace_id, span_id)
	WHERE EXISTS (` + fmt.Sprintf(storedCopiesSQL, pgx.Identifier{table}.Sanitize(), "3", "4") + `)`
}

// traceFoldArraysSQL folds per-trace aggregates computed in Go (traceAggregates), usage and
// service included, into traces: one row write per trace. It is an upsert, never a join, so that no
// plan of it scans traces: TraceUsageFold's UPDATE ... FROM unnest, prepared while traces was
// small, kept a hash join over a sequential scan of traces, and a fresh store's ingest slowed with
// every trace stored until autovacuum analyzed the table.
var traceFoldArraysSQL = `
INSERT INTO traces AS t (trace_id, display_name, root_span_id, start_time_unix_nano,
	end_time_unix_nano, status_code, span_count, source, updated_at, last_end_time_unix_nano,
	error_spans, interrupted_spans, resume_spans, model, model_calls, input_tokens, output_tokens,
	tool_calls, tool_errors, service, session, thread, span_start_min_unix_nano, span_start_max_unix_nano)
SELECT trace_id, left(COALESCE(root_name, ''), ` + displayNameMaxSQL + `), root_span_id, COALESCE(root_start, any_start, 0),
	CASE WHEN root_span_id IS NOT NULL THEN root_end ELSE any_end END,
	COALESCE(root_status, 0), new_spans, source, now(), COALESCE(any_end, 0),
	error_spans, interrupted_spans, resume_spans, model, model_calls, input_tokens, output_tokens,
	tool_calls, tool_errors, service, NULLIF(session, ''), NULLIF(thread, ''), span_start_min,
	span_start_max
FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::int2[], $7::int8[],
	$8::int8[], $9::int4[], $10::text[], $11::int4[], $12::int4[], $13::int4[], $14::text[],
	$15::int4[], $16::int8[], $17::int8[], $18::int4[], $19::int4[], $20::text[], $21::text[], $22::text[],
	$23::int8[], $24::int8[])
	AS a(trace_id, root_span_id, root_name, root_start, root_end, root_status, any_start, any_end,
		new_spans, source, error_spans, interrupted_spans, resume_spans, model, model_calls,
		input_tokens, output_tokens, tool_calls, tool_errors, service, session, thread,
		span_start_min, span_start_max)
ORDER BY trace_id` + traceFoldSQL

// spanIngestFast stores a batch the way a raw COPY does: it looks up which spans are already
// stored, COPYs the new ones straight into spans, folds their summary and usage (computed here, in
// Go) into traces in one upsert, and merges only the stored ones through spanArraysSQL. A batch of
// new spans, the common case, thus costs the database little more than the COPY and one row write
// per trace. spans must be deduplicated and sorted,
// and carry no run ids (which COPY cannot check). A concurrent ingest of the same new span makes
// the COPY fail with a unique violation; the caller then merges instead.
//
// Round trips matter under load as much as the work (a group writer waits for a core on each).
// With lookUp it takes three: the BEGIN with the lookup, the COPY, and the fold, the merge (which
// folds the stored spans' usage itself) and the COMMIT together; two when the lookup finds none
// stored (copyFoldCommit sends the COPY, the fold and the COMMIT at once). Without lookUp (this
// process stored none of the batch's spans lately, see knownSpans) every span is taken as new and
// the BEGIN goes with the COPY: one round trip, and no index probe per span; a span stored all
// the same fails the COPY on its unique key, and the caller looks the batch up then. The
// transaction commits without waiting for its WAL flush (ingestSettings).
func (s *Store) spanIngestFast(ctx context.Context, spans []Span, usage UsageFunc, lookUp bool) (res SpanIngestResult, err error) {
	// Chosen for the whole batch, which holds the spans found stored, before the connection is
	// taken: the choice may read the catalog, on a connection of its own.
	mergeSQL, table := s.spanMergeSQLOn(ctx, spans)
	copyTable := s.spanCopyTable(ctx, spans)
	err = s.pipelinedTx(ctx, func(conn *pgx.Conn) error {
		res, err = spanIngestFastOn(ctx, conn, spans, usage, lookUp, table, copyTable, mergeSQL)
		return err
	})
	return res, err
}

// spanCopyTable is the table the fast path COPYs a batch's new spans into: the one partition that
// holds all their start times when there is one, else spans. Unlike the merge's (spanMergeSQLOn),
// it needs no slack around them, since new spans have no stored copy to find: with hour
// partitions, the hour either side would always span three of them, and every COPY would go
// through the partitioned table, routing each row.
func (s *Store) spanCopyTable(ctx context.Context, spans []Span) string {
	if s.Tx() != nil || s.parts == nil || len(spans) == 0 {
		return "spans"
	}
	lo, hi := spans[0].StartTime, spans[0].StartTime
	for i := range spans {
		lo, hi = min(lo, spans[i].StartTime), max(hi, spans[i].StartTime)
	}
	return s.parts.tableFor(ctx, s, lo, hi)
}

// spanIngestFastOn is spanIngestFast on conn, looking the batch up in table (spans, or the
// partition that holds its stored copies) and COPYing its new spans into copyTable (see
// spanCopyTable); mergeSQL merges the spans found stored into table.
func spanIngestFastOn(ctx context.Context, conn *pgx.Conn, spans []Span, usage UsageFunc, lookUp bool, table, copyTable, mergeSQL string) (SpanIngestResult, error) {
	var res SpanIngestResult
	existing := map[SpanKey]struct{}{}
	copyBefore := "BEGIN; " + ingestSettings + "; "
	if lookUp {
		copyBefore = ""
		traceIDs, spanIDs := make([]string, len(spans)), make([]string, len(spans))
		for i := range spans {
			traceIDs[i], spanIDs[i] = spans[i].TraceID, spans[i].SpanID
		}
		begin := &pgx.Batch{}
		begin.Queue("BEGIN")
		begin.Queue(ingestSettings)
		lo, hi := spanStartBounds(spans)
		begin.Queue(spanExistingSQLOn(table), traceIDs, spanIDs, lo, hi).Query(func(rows pgx.Rows) error {
			var k SpanKey
			_, err := pgx.ForEachRow(rows, []any{&k.TraceID, &k.SpanID}, func() error {
				existing[k] = struct{}{}
				return nil
			})
			return err
		})
		if err := conn.SendBatch(ctx, begin).Close(); err != nil {
			return SpanIngestResult{}, fmt.Errorf("look up stored spans: %w", err)
		}
	}
	fresh, stored := spans, []Span(nil)
	if len(existing) > 0 {
		fresh = make([]Span, 0, len(spans)-len(existing))
		for _, sp := range spans {
			if _, ok := existing[SpanKey{sp.TraceID, sp.SpanID}]; ok {
				stored = append(stored, sp)
			} else {
				fresh = append(fresh, sp)
			}
		}
	}
	// The shares of the new spans fold with their traces' summaries, in the same row write; those
	// of the stored ones with their merge, which folds them only if it stores them ended for the
	// first time.
	shares, services := endedUsage(spans, usage)
	freshShares, storedShares := shares, []SpanUsage(nil)
	if len(stored) > 0 && len(shares) > 0 {
		freshShares = make([]SpanUsage, 0, len(shares))
		for _, u := range shares {
			if _, ok := existing[SpanKey{u.TraceID, u.SpanID}]; ok {
				storedShares = append(storedShares, u)
			} else {
				freshShares = append(freshShares, u)
			}
		}
	}
	end := &pgx.Batch{}
	if len(fresh) > 0 {
		flags := spanFlagsOf(fresh) // worked out once: the COPY and the summaries both need them
		var restShares []SpanUsage
		var args []any
		args, restShares, services = traceAggregates(fresh, flags, freshShares, services)
		for i := range fresh {
			if fresh[i].EndTime != 0 {
				res.Ended = append(res.Ended, SpanKey{fresh[i].TraceID, fresh[i].SpanID})
			}
		}
		if len(stored) == 0 && len(restShares) == 0 && len(services) == 0 {
			// Every span new, and only their own traces to fold: the COPY, the fold and the
			// COMMIT in one round trip.
			n, err := copyFoldCommit(ctx, conn, !lookUp, copyTable, fresh, flags, args)
			if err != nil {
				return SpanIngestResult{}, fmt.Errorf("copy spans: %w", err)
			}
			res.Inserted = n
			return res, nil
		}
		n, err := copySpans(ctx, conn.PgConn(), copyBefore, copyTable, fresh, flags)
		if err != nil {
			return SpanIngestResult{}, fmt.Errorf("copy spans: %w", err)
		}
		res.Inserted = n
		end.Queue(traceFoldArraysSQL, args...)
		if len(stored) == 0 {
			queueUsageFold(end, restShares, services)
		}
	}
	var merged SpanIngestResult
	if len(stored) > 0 {
		// The services of traces that have no new span fold with the merge.
		args := append(spanArraysArgs(stored), spanMergeTailArgs(stored, storedShares, services)...)
		end.Queue(mergeSQL, args...).QueryRow(func(row pgx.Row) error { return scanMerge(row, &merged) })
	}
	end.Queue("COMMIT")
	if err := conn.SendBatch(ctx, end).Close(); err != nil {
		return SpanIngestResult{}, fmt.Errorf("fold trace summaries and commit: %w", err)
	}
	if len(stored) > 0 {
		merged.Skipped = int64(len(stored)) - merged.Inserted - merged.Updated
		res.add(merged)
	}
	return res, nil
}

// traceAggregates computes, for spans sorted by trace, the per-trace aggregate that spanMergeSQL's
// agg computes in SQL (flags are the spans' flags), with the usage shares and services of those
// traces summed in, as the arguments of traceFoldArraysSQL. It answers apart the shares and
// services of other traces, for TraceUsageFold.
func traceAggregates(spans []Span, flags []int16, shares []SpanUsage, services []TraceService) (args []any, restShares []SpanUsage, restServices []TraceService) {
	var (
		traceIDs, sources    []string
		rootIDs, rootNames   []*string
		rootStarts, rootEnds []*int64
		rootStatuses         []*int16
		anyStarts            []*int64
		anyEnds              []int64
		counts               []int32
		errs, stops, resumes []int32 // failed, interrupted and resuming spans
		startMins, startMaxs []int64
	)
	for i := range spans {
		sp := &spans[i]
		n := len(traceIDs)
		if n == 0 || traceIDs[n-1] != sp.TraceID {
			traceIDs, sources = append(traceIDs, sp.TraceID), append(sources, sourceOr(sp.Source))
			rootIDs, rootNames = append(rootIDs, nil), append(rootNames, nil)
			rootStarts, rootEnds, rootStatuses = append(rootStarts, nil), append(rootEnds, nil), append(rootStatuses, nil)
			anyStarts, anyEnds, counts = append(anyStarts, nil), append(anyEnds, sp.EndTime), append(counts, 0)
			errs, stops, resumes = append(errs, 0), append(stops, 0), append(resumes, 0)
			startMins, startMaxs = append(startMins, sp.StartTime), append(startMaxs, sp.StartTime)
			n++
		}
		j := n - 1
		counts[j]++
		startMins[j], startMaxs[j] = min(startMins[j], sp.StartTime), max(startMaxs[j], sp.StartTime)
		if sp.StatusCode == StatusError {
			errs[j]++
		}
		if f := flags[i]; f != 0 {
			if f&spanFlagInterrupted != 0 {
				stops[j]++
			}
			if f&spanFlagResumes != 0 {
				resumes[j]++
			}
		}
		sources[j] = min(sources[j], sourceOr(sp.Source))
		anyEnds[j] = max(anyEnds[j], sp.EndTime)
		if sp.StartTime != 0 && (anyStarts[j] == nil || sp.StartTime < *anyStarts[j]) {
			anyStarts[j] = &sp.StartTime
		}
		if sp.ParentSpanID != nil {
			continue
		}
		if rootIDs[j] == nil || sp.SpanID > *rootIDs[j] {
			rootIDs[j] = &sp.SpanID
		}
		if rootNames[j] == nil || sp.Name > *rootNames[j] {
			rootNames[j] = &sp.Name
		}
		if rootStarts[j] == nil || sp.StartTime < *rootStarts[j] {
			rootStarts[j] = &sp.StartTime
		}
		if rootEnds[j] == nil || sp.EndTime > *rootEnds[j] {
			rootEnds[j] = &sp.EndTime
		}
		if rootStatuses[j] == nil || sp.StatusCode > *rootStatuses[j] {
			rootStatuses[j] = &sp.StatusCode
		}
	}
	n := len(traceIDs)
	at := func(traceID string) (int, bool) { return slices.BinarySearch(traceIDs, traceID) }
	var (
		models, svcNames, sessions, threads = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		modelCalls, toolCalls, toolErrors   = make([]int32, n), make([]int32, n), make([]int32, n)
		inputTokens, outputTokens           = make([]int64, n), make([]int64, n)
		served                              = make([]bool, n)
	)
	for _, u := range shares {
		if _, ok := at(u.TraceID); !ok {
			restShares = append(restShares, u)
		}
	}
	if len(restShares) < len(shares) {
		sums := sumUsage(shares)
		for i, id := range sums.traceIDs {
			if j, ok := at(id); ok {
				models[j], modelCalls[j], inputTokens[j], outputTokens[j] = sums.models[i], sums.modelCalls[i], sums.inputTokens[i], sums.outputTokens[i]
				toolCalls[j], toolErrors[j] = sums.toolCalls[i], sums.toolErrors[i]
			}
		}
	}
	for _, sv := range services {
		j, ok := at(sv.TraceID)
		switch {
		case !ok:
			restServices = append(restServices, sv)
		case !served[j]: // the first of a trace's, as TraceUsageFold's join would pick one
			served[j] = true
			svcNames[j], sessions[j], threads[j] = sv.Service, sv.Session, sv.Thread
		}
	}
	return []any{traceIDs, rootIDs, rootNames, rootStarts, rootEnds, rootStatuses, anyStarts, anyEnds,
		counts, sources, errs, stops, resumes, models, modelCalls, inputTokens, outputTokens, toolCalls,
		toolErrors, svcNames, sessions, threads, startMins, startMaxs}, restShares, restServices
}

// spanIngestCopy stages spans with COPY in a temporary table dropped at commit, then merges them.
// It must run in a transaction.
func (s *Store) spanIngestCopy(ctx context.Context, spans []Span, usage UsageFunc) (SpanIngestResult, error) {
	if _, err := s.db.Exec(ctx, `CREATE TEMPORARY TABLE spans_stage
		(LIKE spans INCLUDING DEFAULTS) ON COMMIT DROP`); err != nil {
		return SpanIngestResult{}, fmt.Errorf("create staging table: %w", err)
	}
	if _, err := copySpans(ctx, s.Tx().Conn().PgConn(), "", "spans_stage", spans, nil); err != nil {
		return SpanIngestResult{}, fmt.Errorf("copy spans: %w", err)
	}
	var res SpanIngestResult
	shares, services := endedUsage(spans, usage)
	if err := scanMerge(s.db.QueryRow(ctx, spanCopySQL, spanMergeTailArgs(spans, shares, services)...), &res); err != nil {
		return SpanIngestResult{}, err
	}
	res.Skipped = int64(len(spans)) - res.Inserted - res.Updated
	return res, nil
}

func jsonOr(raw json.RawMessage, empty string) string {
	if len(raw) == 0 {
		return empty
	}
	return string(raw)
}

func sourceOr(source string) string {
	if source == "" {
		return SpanSourceLoupe
	}
	return source
}
