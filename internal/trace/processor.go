package trace

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// ProcessorConfig configures the span Processor.
type ProcessorConfig struct {
	Store     *store.Store
	Publisher Publisher // nil means NopPublisher
	Metrics   *Metrics  // nil creates new ones
	Logger    *slog.Logger
	// QueueSize bounds the finished spans held in memory for export (default 16,384).
	QueueSize int
	// BatchSize is the most spans written per COPY (default 512).
	BatchSize int
	// FlushInterval is the longest a finished span waits before export (default 500 ms).
	FlushInterval time.Duration
	// StartDelay is how long a span's start is held before it is stored as a running span (its
	// end within the delay stores it once, whole): 0 means StartDelay, and a negative value
	// stores no starts, only ended spans.
	StartDelay time.Duration
}

// Processor is the sdktrace.SpanProcessor that Loupe's TracerProvider runs. On start and on end it
// hands a SpanEvent to the Publisher; on end it queues the span for export to PostgreSQL, which a
// background goroutine does in batches with COPY.
//
// Backpressure: the engine's hot path never waits on the database. The queue holds at most
// QueueSize spans; when it is full, the oldest queued span is dropped to make room and counted in
// loupe_trace_spans_dropped_total{reason="queue_full"}. Dropping the oldest keeps the newest state,
// and the spans that end last, a turn's and a run's root, are the ones a viewer needs most. A batch
// PostgreSQL cannot take because the connection failed is put back at the head of the queue (still
// within the bound) and retried after a pause; a batch it refuses (a constraint or data error) is
// dropped and counted with reason="export_error". Every failed write counts in
// loupe_trace_export_errors_total.
//
// Start launches the exporter; Shutdown (the TracerProvider's) flushes what is queued and stops it.
type Processor struct {
	store    *store.Store
	pub      Publisher
	metrics  *Metrics
	log      *slog.Logger
	batch    int
	interval time.Duration

	mu     sync.Mutex
	ring   []sdktrace.ReadOnlySpan
	head   int // index of the oldest span
	n      int // spans queued
	closed bool

	wake      chan struct{}
	flushReq  chan chan struct{}
	stop      chan struct{}
	done      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
	started   bool

	resMu    sync.Mutex
	resCache map[*resource.Resource]json.RawMessage

	// starts holds the starts of running spans for a moment, then stores them, so that a run's
	// trace shows its spans as they start, not only once they end; nil when starts are not stored.
	starts *startBuffer
}

var _ sdktrace.SpanProcessor = (*Processor)(nil)

// NewProcessor builds a Processor; it exports once started.
func NewProcessor(cfg ProcessorConfig) (*Processor, error) {
	if cfg.Store == nil {
		return nil, errors.New("trace: the processor needs a store")
	}
	if cfg.Publisher == nil {
		cfg.Publisher = NopPublisher{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 16384
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 512
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 500 * time.Millisecond
	}
	p := &Processor{
		store: cfg.Store, pub: cfg.Publisher, metrics: cfg.Metrics, log: cfg.Logger,
		batch: cfg.BatchSize, interval: cfg.FlushInterval,
		ring: make([]sdktrace.ReadOnlySpan, cfg.QueueSize),
		wake: make(chan struct{}, 1), flushReq: make(chan chan struct{}), stop: make(chan struct{}),
		done: make(chan struct{}), resCache: map[*resource.Resource]json.RawMessage{},
	}
	if cfg.StartDelay >= 0 {
		delay := cfg.StartDelay
		if delay == 0 {
			delay = StartDelay
		}
		p.starts = newStartBuffer(delay, p.writeStarts)
	}
	return p, nil
}

// writeStarts stores held starts as running spans. A start is a notice: one that fails to be
// written is logged, and its span's end still stores it whole.
func (p *Processor) writeStarts(ctx context.Context, _ string, spans []store.Span) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cleanSpans(spans)
	if _, err := p.store.SpanIngest(ctx, spans); err != nil {
		p.log.Warn("span export: starts not stored", "spans", len(spans), "err", err)
		return err
	}
	return nil
}

// Start launches the export goroutine. It is safe to call twice.
func (p *Processor) Start(context.Context) error {
	p.startOnce.Do(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return
		}
		p.started = true
		go p.run()
	})
	return nil
}

// Stop flushes and stops, waiting up to ten seconds. It is safe to call twice and without Start.
func (p *Processor) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.Shutdown(ctx)
}

// OnStart publishes a span_start event, and holds the start to be stored as a running span.
func (p *Processor) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	keep := p.starts != nil && s.SpanContext().IsSampled()
	if isNop(p.pub) && !keep {
		return
	}
	sp := p.convert(s)
	if sp.RunID == nil {
		sp.RunID = runIDFromParent(parent)
	}
	if !isNop(p.pub) {
		p.pub.Publish(SpanEvent{Type: event.SpanStarted, Span: sp})
	}
	if keep {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if !closed {
			p.starts.hold("loupe", []store.Span{sp})
		}
	}
}

// runIDFromParent inherits the run id of the parent span, when the SDK's span exposes it, so that a
// start event can be routed before the span's own attributes are set.
func runIDFromParent(ctx context.Context) *uuid.UUID {
	ro, ok := oteltrace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan)
	if !ok {
		return nil
	}
	for _, kv := range ro.Attributes() {
		if kv.Key == AttrRunID {
			if id, err := uuid.Parse(kv.Value.AsString()); err == nil {
				return &id
			}
		}
	}
	return nil
}

// OnEnd publishes a span_end event and queues the span for export. It never blocks on I/O.
func (p *Processor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if p.starts != nil {
		// Its end will store it whole: a start still held need not be written.
		sc := s.SpanContext()
		p.starts.supersede([]store.Span{{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), EndTime: max(s.EndTime().UnixNano(), 1)}})
	}
	if !isNop(p.pub) {
		p.pub.Publish(SpanEvent{Type: event.SpanEnded, Span: p.convert(s)})
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.metrics.dropped.WithLabelValues("shutdown").Inc()
		return
	}
	if p.n == len(p.ring) {
		p.ring[p.head] = nil
		p.head = (p.head + 1) % len(p.ring)
		p.n--
		p.metrics.dropped.WithLabelValues("queue_full").Inc()
	}
	p.ring[(p.head+p.n)%len(p.ring)] = s
	p.n++
	full := p.n >= p.batch
	p.metrics.queueLength.Set(float64(p.n))
	p.mu.Unlock()
	if full {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// take removes up to max spans from the head of the queue.
func (p *Processor) take(max int) []sdktrace.ReadOnlySpan {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := min(max, p.n)
	out := make([]sdktrace.ReadOnlySpan, k)
	for i := range k {
		out[i] = p.ring[p.head]
		p.ring[p.head] = nil
		p.head = (p.head + 1) % len(p.ring)
	}
	p.n -= k
	p.metrics.queueLength.Set(float64(p.n))
	return out
}

// putBack returns a failed batch to the head of the queue, dropping what no longer fits.
func (p *Processor) putBack(spans []sdktrace.ReadOnlySpan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	room := len(p.ring) - p.n
	if drop := len(spans) - room; drop > 0 {
		p.metrics.dropped.WithLabelValues("queue_full").Add(float64(drop))
		spans = spans[drop:] // keep the newest of the batch
	}
	for i := len(spans) - 1; i >= 0; i-- {
		p.head = (p.head - 1 + len(p.ring)) % len(p.ring)
		p.ring[p.head] = spans[i]
		p.n++
	}
	p.metrics.queueLength.Set(float64(p.n))
}

func (p *Processor) run() {
	defer close(p.done)
	ticker := time.NewTicker(p.interval)
	defer ticker.Stop()
	backoff := time.Duration(0)
	for {
		var reply chan struct{}
		select {
		case <-p.stop:
			p.drain(context.Background(), 3)
			return
		case reply = <-p.flushReq:
		case <-p.wake:
		case <-ticker.C:
		}
		if backoff > 0 && reply == nil {
			select {
			case <-time.After(backoff):
			case <-p.stop:
				p.drain(context.Background(), 3)
				return
			}
		}
		if p.drain(context.Background(), 1) {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
		}
		if reply != nil {
			close(reply)
		}
	}
}

// drain exports everything queued, batch by batch, giving up after attempts consecutive
// failures; it reports whether the queue emptied.
func (p *Processor) drain(ctx context.Context, attempts int) bool {
	failures := 0
	for {
		batch := p.take(p.batch)
		if len(batch) == 0 {
			return true
		}
		if err := p.export(ctx, batch); err != nil {
			failures++
			if failures >= attempts {
				return false
			}
		}
	}
}

func (p *Processor) export(ctx context.Context, batch []sdktrace.ReadOnlySpan) error {
	spans := make([]store.Span, len(batch))
	for i, s := range batch {
		spans[i] = p.convert(s)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cleanSpans(spans)
	// The totals are folded in the spans' transaction: a run's page lists its trace as soon as
	// the run ends, and must not see it without its tokens.
	_, err := p.store.SpanIngestCopyFold(ctx, spans, func(ended []store.SpanKey) ([]store.SpanUsage, []store.TraceService) {
		return usageOf(spans, ended)
	})
	p.metrics.exportSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		p.metrics.exported.Add(float64(len(batch)))
		return nil
	}
	p.metrics.exportErrors.Inc()
	// A statement the server refuses would be refused again, and would hold the queue up; a server
	// shutting down, crashed or still starting (SQLSTATE 57P01-57P03, class 08) answers with a
	// PgError too, and the batch then waits for it like any lost connection.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !store.IsConnectionLost(err) {
		p.log.Error("span export refused; batch dropped", "spans", len(batch), "err", err)
		p.metrics.dropped.WithLabelValues("export_error").Add(float64(len(batch)))
		return nil
	}
	p.log.Warn("span export failed; will retry", "spans", len(batch), "err", err)
	p.putBack(batch)
	return err
}

// ForceFlush exports everything queued now.
func (p *Processor) ForceFlush(ctx context.Context) error {
	p.mu.Lock()
	started, closed := p.started, p.closed
	p.mu.Unlock()
	if closed {
		return nil
	}
	if p.starts != nil {
		p.starts.flush(ctx)
	}
	if !started {
		if !p.drain(ctx, 1) {
			return errors.New("trace: span export failed")
		}
		return nil
	}
	reply := make(chan struct{})
	select {
	case p.flushReq <- reply:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops accepting spans, exports what is queued and stops the exporter.
func (p *Processor) Shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		started := p.started
		p.mu.Unlock()
		if p.starts != nil {
			p.starts.flush(ctx) // no start is held once closed
		}
		if !started {
			p.drain(ctx, 1)
			close(p.done)
			return
		}
		close(p.stop)
	})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// convert turns an SDK span into a stored span.
func (p *Processor) convert(s sdktrace.ReadOnlySpan) store.Span {
	sc := s.SpanContext()
	sp := store.Span{
		TraceID:       sc.TraceID().String(),
		SpanID:        sc.SpanID().String(),
		Name:          s.Name(),
		Kind:          otlpKind(s.SpanKind()),
		StartTime:     s.StartTime().UnixNano(),
		StatusMessage: s.Status().Description,
		Attributes:    kvJSON(s.Attributes()),
		Resource:      p.resourceJSON(s.Resource()),
		Scope:         s.InstrumentationScope().Name,
		ScopeVersion:  s.InstrumentationScope().Version,
		Source:        store.SpanSourceLoupe,
	}
	if !s.EndTime().IsZero() {
		sp.EndTime = s.EndTime().UnixNano()
	}
	switch s.Status().Code {
	case 1: // codes.Error
		sp.StatusCode = store.StatusError
	case 2: // codes.Ok
		sp.StatusCode = store.StatusOK
	}
	if parent := s.Parent(); parent.HasSpanID() {
		id := parent.SpanID().String()
		sp.ParentSpanID = &id
	}
	for _, kv := range s.Attributes() {
		if kv.Key == AttrRunID {
			if id, err := uuid.Parse(kv.Value.AsString()); err == nil {
				sp.RunID = &id
			}
		}
	}
	if evs := s.Events(); len(evs) > 0 {
		events := make([]storedEvent, len(evs))
		for i, e := range evs {
			events[i] = storedEvent{TimeUnixNano: e.Time.UnixNano(), Name: e.Name, Attributes: kvJSON(e.Attributes)}
		}
		sp.Events = mustJSON(events)
	}
	if ls := s.Links(); len(ls) > 0 {
		links := make([]storedLink, len(ls))
		for i, l := range ls {
			links[i] = storedLink{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String(),
				TraceState: l.SpanContext.TraceState().String(), Attributes: kvJSON(l.Attributes), Flags: uint32(l.SpanContext.TraceFlags())}
		}
		sp.Links = mustJSON(links)
	}
	return sp
}

func otlpKind(k oteltrace.SpanKind) int16 {
	// OTel Go numbers kinds as OTLP does: unspecified 0, internal 1, server 2, client 3, producer 4,
	// consumer 5.
	return int16(k)
}

func (p *Processor) resourceJSON(r *resource.Resource) json.RawMessage {
	if r == nil {
		return json.RawMessage("{}")
	}
	p.resMu.Lock()
	defer p.resMu.Unlock()
	if b, ok := p.resCache[r]; ok {
		return b
	}
	b := kvJSON(r.Attributes())
	if len(p.resCache) > 64 {
		clear(p.resCache)
	}
	p.resCache[r] = b
	return b
}

// kvJSON encodes OTel attributes as one JSON object.
func kvJSON(kvs []attribute.KeyValue) json.RawMessage {
	if len(kvs) == 0 {
		return json.RawMessage("{}")
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return mustJSON(m)
}
