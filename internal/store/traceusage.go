package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SpanUsage is what one ended model or tool span adds to its trace's totals in the list (see
// TraceUsageFold). Kind is "model" or "tool"; a tool's Model and tokens are empty.
type SpanUsage struct {
	TraceID      string
	SpanID       string
	Kind         string
	Model        string
	StartTime    int64
	InputTokens  int64
	OutputTokens int64
	Failed       bool
}

// TraceService names the service that sent a trace (OTLP's resource service.name).
type TraceService struct {
	TraceID string
	Service string
	// Session is the conversation the trace belongs to (genkit:sessionId, gen_ai.conversation.id),
	// "" when its spans name none; Thread is the session's chat thread (genkit:threadName), ""
	// when they name none.
	Session string
	Thread  string
}

// traceUsageFoldSQL stores each span's share and adds to its trace the difference from the share
// stored before, so that a span sent twice counts once. Spans of traces not stored are ignored.
// The old shares are read from the statement's snapshot, before the upsert.
const traceUsageFoldSQL = `
WITH src AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[],
		$7::int8[], $8::bool[])
	AS s(trace_id, span_id, kind, model, start_time_unix_nano, input_tokens, output_tokens, failed)
	WHERE EXISTS (SELECT 1 FROM traces t WHERE t.trace_id = s.trace_id)
),
old AS (
	SELECT u.* FROM span_usage u JOIN src s ON u.trace_id = s.trace_id AND u.span_id = s.span_id
),
up AS (
	INSERT INTO span_usage AS u (trace_id, span_id, kind, model, start_time_unix_nano, input_tokens,
		output_tokens, failed)
	SELECT * FROM src ORDER BY trace_id, span_id
	ON CONFLICT (trace_id, span_id) DO UPDATE SET
		kind = EXCLUDED.kind, model = EXCLUDED.model,
		start_time_unix_nano = EXCLUDED.start_time_unix_nano, input_tokens = EXCLUDED.input_tokens,
		output_tokens = EXCLUDED.output_tokens, failed = EXCLUDED.failed
	RETURNING u.*
),
d AS (
	SELECT n.trace_id,
		(array_agg(n.model ORDER BY n.start_time_unix_nano) FILTER (WHERE n.kind = 'model' AND n.model <> ''))[1] AS model,
		sum((n.kind = 'model')::int - COALESCE((o.kind = 'model')::int, 0)) AS model_calls,
		sum(n.input_tokens - COALESCE(o.input_tokens, 0)) AS input_tokens,
		sum(n.output_tokens - COALESCE(o.output_tokens, 0)) AS output_tokens,
		sum((n.kind = 'tool')::int - COALESCE((o.kind = 'tool')::int, 0)) AS tool_calls,
		sum((n.kind = 'tool' AND n.failed)::int - COALESCE((o.kind = 'tool' AND o.failed)::int, 0)) AS tool_errors
	FROM up n LEFT JOIN old o ON o.trace_id = n.trace_id AND o.span_id = n.span_id
	GROUP BY n.trace_id
)
UPDATE traces t SET
	model         = CASE WHEN t.model = '' THEN COALESCE(d.model, '') ELSE t.model END,
	model_calls   = t.model_calls + d.model_calls,
	input_tokens  = t.input_tokens + d.input_tokens,
	output_tokens = t.output_tokens + d.output_tokens,
	tool_calls    = t.tool_calls + d.tool_calls,
	tool_errors   = t.tool_errors + d.tool_errors
FROM d WHERE t.trace_id = d.trace_id`

const traceServiceSQL = `
UPDATE traces t SET service = CASE WHEN t.service = '' THEN s.service ELSE t.service END,
	session = coalesce(t.session, nullif(s.session, '')),
	thread = coalesce(t.thread, CASE WHEN coalesce(t.session, s.session) = s.session THEN nullif(s.thread, '') END)
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS s(trace_id, service, session, thread)
WHERE t.trace_id = s.trace_id AND (t.service = '' AND s.service <> '' OR t.session IS NULL AND s.session <> ''
	OR t.thread IS NULL AND s.thread <> '')`

// TraceUsageFold adds the shares of spans already ingested (SpanIngest) to their traces' totals,
// and records the services that sent traces which have none yet. It is idempotent per span: a
// span folded again replaces its share. Call it after SpanIngest; it is a separate statement, so a
// crash between the two loses these spans' shares, never the spans.
func (s *Store) TraceUsageFold(ctx context.Context, usage []SpanUsage, services []TraceService) error {
	if len(usage) == 0 && len(services) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	if s.Tx() == nil {
		batch.Queue(asyncCommit) // telemetry, as SpanIngest commits it
	}
	if len(usage) > 0 {
		usage = dedupeUsage(usage)
		n := len(usage)
		traceIDs, spanIDs, kinds, models := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		starts, ins, outs := make([]int64, n), make([]int64, n), make([]int64, n)
		failed := make([]bool, n)
		for i, u := range usage {
			traceIDs[i], spanIDs[i], kinds[i], models[i] = u.TraceID, u.SpanID, u.Kind, u.Model
			starts[i], ins[i], outs[i], failed[i] = u.StartTime, u.InputTokens, u.OutputTokens, u.Failed
		}
		batch.Queue(traceUsageFoldSQL, traceIDs, spanIDs, kinds, models, starts, ins, outs, failed)
	}
	if len(services) > 0 {
		n := len(services)
		traceIDs, names, sessions, threads := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		for i, sv := range services {
			traceIDs[i], names[i], sessions[i], threads[i] = sv.TraceID, sv.Service, sv.Session, sv.Thread
		}
		batch.Queue(traceServiceSQL, traceIDs, names, sessions, threads)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		// The batch is one implicit transaction: a deadlock with a concurrent ingest rolls it
		// back whole, and it is sent again.
		if err = s.db.SendBatch(ctx, batch).Close(); !retryable(err) || s.Tx() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("fold usage of %d spans into their traces: %w", len(usage), err)
	}
	return nil
}

// dedupeUsage sorts shares by key, so that concurrent folds lock rows in the same order, and
// keeps the last share of a repeated key (an upsert may not touch a row twice).
func dedupeUsage(usage []SpanUsage) []SpanUsage {
	key := func(a, b SpanUsage) int {
		if c := strings.Compare(a.TraceID, b.TraceID); c != 0 {
			return c
		}
		return strings.Compare(a.SpanID, b.SpanID)
	}
	usage = slices.Clone(usage)
	slices.SortStableFunc(usage, key)
	out := usage[:0]
	for _, u := range usage {
		if n := len(out); n > 0 && key(out[n-1], u) == 0 {
			out[n-1] = u
			continue
		}
		out = append(out, u)
	}
	return out
}
