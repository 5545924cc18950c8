package store

import (
	"cmp"
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

// traceUsageFoldSQL adds per-trace sums of span shares to the traces' totals, and names the
// trace's model when it has none yet. Traces not stored are left alone.
const traceUsageFoldSQL = `
UPDATE traces t SET
	model         = CASE WHEN t.model = '' THEN d.model ELSE t.model END,
	model_calls   = t.model_calls + d.model_calls,
	input_tokens  = t.input_tokens + d.input_tokens,
	output_tokens = t.output_tokens + d.output_tokens,
	tool_calls    = t.tool_calls + d.tool_calls,
	tool_errors   = t.tool_errors + d.tool_errors
FROM unnest($1::text[], $2::text[], $3::int4[], $4::int8[], $5::int8[], $6::int4[], $7::int4[])
	AS d(trace_id, model, model_calls, input_tokens, output_tokens, tool_calls, tool_errors)
WHERE t.trace_id = d.trace_id`

const traceServiceSQL = `
UPDATE traces t SET service = CASE WHEN t.service = '' THEN s.service ELSE t.service END,
	session = coalesce(t.session, nullif(s.session, '')),
	thread = coalesce(t.thread, CASE WHEN coalesce(t.session, s.session) = s.session THEN nullif(s.thread, '') END)
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS s(trace_id, service, session, thread)
WHERE t.trace_id = s.trace_id AND (t.service = '' AND s.service <> '' OR t.session IS NULL AND s.session <> ''
	OR t.thread IS NULL AND s.thread <> '')`

// TraceUsageFold adds the shares of spans to their traces' totals, and records the services that
// sent traces which have none yet. usage must hold only spans that SpanIngest reported Ended, once
// each: a span is stored ended for the first time once, so its share counts once however often
// it is sent (Genkit's realtime start and end, an exporter's retry), with no record kept per span.
// Call it after SpanIngest; it is a separate statement, so a crash between the two loses these
// spans' shares, never the spans.
func (s *Store) TraceUsageFold(ctx context.Context, usage []SpanUsage, services []TraceService) error {
	if len(usage) == 0 && len(services) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	if s.Tx() == nil {
		batch.Queue(ingestSettings) // telemetry, as SpanIngest commits it, planned by key
	}
	queueUsageFold(batch, usage, services)
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

// queueUsageFold queues the statements of TraceUsageFold.
func queueUsageFold(batch *pgx.Batch, usage []SpanUsage, services []TraceService) {
	if len(usage) > 0 {
		batch.Queue(traceUsageFoldSQL, usageByTrace(usage)...)
	}
	if len(services) > 0 {
		n := len(services)
		traceIDs, names, sessions, threads := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		for i, sv := range services {
			traceIDs[i], names[i], sessions[i], threads[i] = sv.TraceID, sv.Service, sv.Session, sv.Thread
		}
		batch.Queue(traceServiceSQL, traceIDs, names, sessions, threads)
	}
}

// usageByTrace sums shares per trace, in trace order (the order concurrent folds lock rows in),
// as traceUsageFoldSQL's arguments.
func usageByTrace(usage []SpanUsage) []any {
	u := sumUsage(usage)
	return []any{u.traceIDs, u.models, u.modelCalls, u.inputTokens, u.outputTokens, u.toolCalls, u.toolErrors}
}

// traceUsageSums are shares summed per trace, a column each, in trace order.
type traceUsageSums struct {
	traceIDs, models          []string
	modelCalls, toolCalls     []int32
	toolErrors                []int32
	inputTokens, outputTokens []int64
}

// sumUsage sums shares per trace; a trace's model is that of its earliest model call that names
// one.
func sumUsage(usage []SpanUsage) traceUsageSums {
	usage = slices.Clone(usage)
	slices.SortStableFunc(usage, func(a, b SpanUsage) int {
		if c := strings.Compare(a.TraceID, b.TraceID); c != 0 {
			return c
		}
		return cmp.Compare(a.StartTime, b.StartTime)
	})
	var s traceUsageSums
	for _, u := range usage {
		n := len(s.traceIDs)
		if n == 0 || s.traceIDs[n-1] != u.TraceID {
			s.traceIDs, s.models = append(s.traceIDs, u.TraceID), append(s.models, "")
			s.modelCalls, s.toolCalls, s.toolErrors = append(s.modelCalls, 0), append(s.toolCalls, 0), append(s.toolErrors, 0)
			s.inputTokens, s.outputTokens = append(s.inputTokens, 0), append(s.outputTokens, 0)
			n++
		}
		j := n - 1
		switch u.Kind {
		case "model":
			s.modelCalls[j]++
			s.inputTokens[j] += u.InputTokens
			s.outputTokens[j] += u.OutputTokens
			if s.models[j] == "" {
				s.models[j] = u.Model
			}
		case "tool":
			s.toolCalls[j]++
			if u.Failed {
				s.toolErrors[j]++
			}
		}
	}
	return s
}
