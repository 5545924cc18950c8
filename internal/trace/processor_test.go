package trace_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// recorder is a Publisher that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []trace.SpanEvent
}

func (r *recorder) Publish(e trace.SpanEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []trace.SpanEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]trace.SpanEvent(nil), r.events...)
}

// TestProviderPublishesAndExportsSpans runs spans the way the engine emits them through the OTel
// API and checks the live events, the stored rows (run id copied into spans.run_id, status,
// resource), and a resume link.
func TestProviderPublishesAndExportsSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	run, err := st.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	pub := &recorder{}
	metrics := trace.NewMetrics()
	p, err := trace.NewProvider(ctx, trace.ProviderConfig{ServiceName: "loupe-test", ServiceVersion: "v9",
		Processor: trace.ProcessorConfig{Store: st, Publisher: pub, Metrics: metrics}, NoForward: true})
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx))
	defer p.Stop()
	tracer := p.TracerProvider().Tracer("github.com/loupe-dev/loupe/internal/engine")

	fctx, flow := tracer.Start(ctx, "travelAgent")
	flow.SetAttributes(attribute.String("genkit:name", "travelAgent"), attribute.String(trace.AttrRunID, run.ID.String()))
	_, turn := tracer.Start(fctx, "generate", trace.WithResumeLink("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"))
	turn.SetAttributes(attribute.Int(trace.AttrTurnIndex, 0), attribute.String(trace.AttrRunID, run.ID.String()))
	turn.SetStatus(codes.Error, "model failed")
	turn.End()
	flow.End()
	require.NoError(t, p.ForceFlush(ctx))

	events := pub.all()
	require.Len(t, events, 4)
	require.Equal(t, event.SpanStarted, events[0].Type)
	require.Equal(t, event.SpanStarted, events[1].Type)
	require.NotNil(t, events[1].Span.RunID, "a start event inherits its parent's run id")
	require.Equal(t, run.ID, *events[1].Span.RunID)
	require.Equal(t, event.SpanEnded, events[2].Type)
	require.Equal(t, "generate", events[2].Span.Name)

	traceID := flow.SpanContext().TraceID().String()
	spans, err := st.SpansByTrace(ctx, traceID, 0)
	require.NoError(t, err)
	require.Len(t, spans, 2)
	require.Equal(t, "travelAgent", spans[0].Name)
	require.Equal(t, run.ID, *spans[0].RunID)
	require.Equal(t, store.SpanSourceLoupe, spans[0].Source)
	require.JSONEq(t, `{"service.name":"loupe-test","service.version":"v9"}`, string(spans[0].Resource))
	require.Equal(t, store.StatusError, spans[1].StatusCode)
	require.Equal(t, "model failed", spans[1].StatusMessage)
	var links []map[string]any
	require.NoError(t, json.Unmarshal(spans[1].Links, &links))
	require.Len(t, links, 1)
	require.Equal(t, "b7ad6b7169203331", links[0]["span_id"])
	require.Equal(t, map[string]any{trace.AttrLinkType: trace.LinkTypeResume}, links[0]["attributes"])
	tr, err := st.TraceGet(ctx, traceID)
	require.NoError(t, err)
	require.Equal(t, run.ID, *tr.RunID)
	require.Equal(t, "travelAgent", tr.DisplayName)
	require.Contains(t, gather(t, metrics), "loupe_trace_export_spans_total 2")
}

// TestProcessorDropsOldestWhenFull proves the backpressure policy: a full queue drops its oldest
// span, counts it, and never blocks the caller.
func TestProcessorDropsOldestWhenFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	metrics := trace.NewMetrics()
	p, err := trace.NewProvider(ctx, trace.ProviderConfig{NoForward: true,
		Processor: trace.ProcessorConfig{Store: st, Metrics: metrics, QueueSize: 2}})
	require.NoError(t, err)
	tracer := p.TracerProvider().Tracer("t")
	var ids []oteltrace.SpanContext
	for _, name := range []string{"first", "second", "third"} {
		_, s := tracer.Start(ctx, name)
		s.End() // not started: nothing is exported yet
		ids = append(ids, s.SpanContext())
	}
	require.NoError(t, p.ForceFlush(ctx))
	_, err = st.TraceGet(ctx, ids[0].TraceID().String())
	require.ErrorIs(t, err, store.ErrNotFound, "the oldest span was dropped")
	for _, sc := range ids[1:] {
		_, err := st.TraceGet(ctx, sc.TraceID().String())
		require.NoError(t, err)
	}
	require.Contains(t, gather(t, metrics), `loupe_trace_spans_dropped_total{reason="queue_full"} 1`)
	p.Stop()
	p.Stop()
}

// TestProcessorCountsExportErrors closes the pool under the exporter: spans stay queued (within
// the bound) and the failure is counted.
func TestProcessorCountsExportErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	metrics := trace.NewMetrics()
	p, err := trace.NewProvider(ctx, trace.ProviderConfig{NoForward: true,
		Processor: trace.ProcessorConfig{Store: st, Metrics: metrics}})
	require.NoError(t, err)
	st.Pool().Close()
	_, s := p.TracerProvider().Tracer("t").Start(ctx, "lost")
	s.End()
	require.Error(t, p.ForceFlush(ctx))
	require.Contains(t, gather(t, metrics), "loupe_trace_export_errors_total 1")
	require.Contains(t, gather(t, metrics), "loupe_trace_export_queue_spans 1", "a connection failure keeps the batch queued")
	p.Stop()
}

// TestProcessorKeepsABatchWhoseConnectionTheServerEnded: a server that ends its connections (a
// restart, a crash, pg_terminate_backend) answers the next statement with SQLSTATE 57P01, a PgError
// like a refused statement's; the batch stays queued and is stored once the database answers,
// rather than being dropped.
func TestProcessorKeepsABatchWhoseConnectionTheServerEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.NewURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	// One connection, handed out without a liveness check, so that the export uses the ended one.
	cfg.MaxConns = 1
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	var pid int
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n))
		return n == 0
	}, 30*time.Second, 10*time.Millisecond, "the server ends the connection")

	st := store.New(pool)
	metrics := trace.NewMetrics()
	p, err := trace.NewProvider(ctx, trace.ProviderConfig{NoForward: true,
		Processor: trace.ProcessorConfig{Store: st, Metrics: metrics}})
	require.NoError(t, err)
	defer p.Stop()
	_, s := p.TracerProvider().Tracer("t").Start(ctx, "kept")
	s.End()
	require.Error(t, p.ForceFlush(ctx), "the first export meets the ended connection")
	require.Contains(t, gather(t, metrics), "loupe_trace_export_errors_total 1")
	require.NotContains(t, gather(t, metrics), "loupe_trace_spans_dropped_total{")
	require.Contains(t, gather(t, metrics), "loupe_trace_export_queue_spans 1", "the batch stays queued")
	require.NoError(t, p.ForceFlush(ctx), "the next export, on a new connection, stores the batch")
	_, err = st.TraceGet(ctx, s.SpanContext().TraceID().String())
	require.NoError(t, err, "the span was kept and stored")
}

// TestProcessorStoresRunningSpansAsTheyStart: a span still running a moment after its start is
// stored as running (no end), so a run's page shows it before it ends; its end then stores it
// whole; a span that ends within the delay is written once, by its end.
func TestProcessorStoresRunningSpansAsTheyStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	p, err := trace.NewProvider(ctx, trace.ProviderConfig{ServiceName: "loupe-test", NoForward: true,
		Processor: trace.ProcessorConfig{Store: st, StartDelay: 20 * time.Millisecond, FlushInterval: time.Hour}})
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx))
	defer p.Stop()
	tracer := p.TracerProvider().Tracer("test")

	fctx, flow := tracer.Start(ctx, "slowFlow")
	_, quick := tracer.Start(fctx, "quick")
	quick.End()
	tid, sid := flow.SpanContext().TraceID().String(), flow.SpanContext().SpanID().String()
	var running *store.Span
	require.Eventually(t, func() bool {
		sp, err := spanGet(ctx, st, tid, sid)
		if err != nil {
			return false
		}
		running = sp
		return true
	}, 10*time.Second, 10*time.Millisecond, "the running flow span is stored while it runs")
	require.Zero(t, running.EndTime, "stored as running")
	_, err = spanGet(ctx, st, tid, quick.SpanContext().SpanID().String())
	require.ErrorIs(t, err, store.ErrNotFound, "a span that ended within the delay waits for its end's export (FlushInterval is an hour here)")

	flow.End()
	require.NoError(t, p.ForceFlush(ctx))
	ended, err := spanGet(ctx, st, tid, sid)
	require.NoError(t, err)
	require.NotZero(t, ended.EndTime, "its end stored it whole")
	_, err = spanGet(ctx, st, tid, quick.SpanContext().SpanID().String())
	require.NoError(t, err)
}

// spanGet is one stored span, ErrNotFound when it is not stored.
func spanGet(ctx context.Context, st *store.Store, traceID, spanID string) (*store.Span, error) {
	spans, err := st.SpansGet(ctx, []store.SpanKey{{TraceID: traceID, SpanID: spanID}})
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, store.ErrNotFound
	}
	return &spans[0], nil
}
