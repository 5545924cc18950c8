package trace

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// DefaultMaxBodyBytes is the default cap on an ingest request body, compressed or not.
const DefaultMaxBodyBytes = 16 << 20

// Config configures the trace Service.
type Config struct {
	Store *store.Store
	// Reads, when set, serves the trace reads (lists, trees, spans, logs): a store on a read
	// replica, so that the trace explorer's reads leave the primary to ingest. Ingest always
	// writes to Store. Nil reads from Store.
	Reads *store.Store
	// Metrics are shared with the Provider and Retention; nil creates new ones.
	Metrics *Metrics
	// Publisher receives span events for ingested spans too, so that traces sent by other
	// programs show live. Nil means NopPublisher.
	Publisher Publisher
	// MaxBodyBytes caps an ingest body, and its decompressed size; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// IngestToken is the bearer token that ingest requires when the server is not bound to a
	// loopback address (from LOUPE_INGEST_TOKEN). Empty means such a server refuses all ingest.
	IngestToken string
	// IngestWriters caps the group transactions that ingest runs at once (see groupCommitter);
	// 0 means DefaultIngestWriters.
	IngestWriters int
	// StartDelay is how long span-start events are held before they are written (see
	// startBuffer); 0 means StartDelay, and a negative value writes them at once, like any span.
	StartDelay time.Duration
	Logger     *slog.Logger
}

// DefaultIngestWriters is the default cap on concurrent ingest transactions. Two: while one
// commits, the requests that arrive queue for the next group, which the second writes unless it
// shares a trace with the first (see groupCommitter), so that PostgreSQL works on two groups of
// batched OTLP ingest at once (41,729 / 42,510 spans/s against 36,750 / 37,082 with one, 8
// clients; BENCHMARKS.md), while one hot trace's realtime groups still go one at a time.
const DefaultIngestWriters = 2

// Service ingests traces from other programs and reads stored traces.
type Service struct {
	store   *store.Store
	reads   *store.Store // Config.Reads, or store
	metrics *Metrics
	pub     Publisher
	cfg     Config
	log     *slog.Logger
	group   *groupCommitter
	starts  *startBuffer // nil when starts are written at once
}

// NewService builds the Service.
func NewService(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("trace: a store is required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Publisher == nil {
		cfg.Publisher = NopPublisher{}
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IngestWriters <= 0 {
		cfg.IngestWriters = DefaultIngestWriters
	}
	if cfg.Reads == nil {
		cfg.Reads = cfg.Store
	}
	s := &Service{store: cfg.Store, reads: cfg.Reads, metrics: cfg.Metrics, pub: cfg.Publisher, cfg: cfg, log: cfg.Logger}
	s.group = &groupCommitter{writeFunc: s.write, maxWriters: cfg.IngestWriters}
	if cfg.StartDelay == 0 {
		cfg.StartDelay = StartDelay
	}
	if cfg.StartDelay > 0 {
		s.starts = newStartBuffer(cfg.StartDelay, s.writeStarts)
	}
	return s, nil
}

// MaxBodyBytes is the ingest body limit.
func (s *Service) MaxBodyBytes() int64 { return s.cfg.MaxBodyBytes }

// IngestToken is the configured ingest token, possibly empty.
func (s *Service) IngestToken() string { return s.cfg.IngestToken }

// Collectors are the service's Prometheus collectors.
func (s *Service) Collectors() []prometheus.Collector { return s.metrics.Collectors() }

// Metrics are the service's metrics, to share with a Provider and a Retention.
func (s *Service) Metrics() *Metrics { return s.metrics }

// Reject counts a refused ingest request.
func (s *Service) Reject(source, reason string) {
	s.metrics.rejected.WithLabelValues(source, reason).Inc()
}

// Ingest stores spans from source in one transaction and publishes them. Concurrent calls share
// transactions (group commit), so the result counts every span of the transaction that stored
// these, which may include other calls' spans. It returns once the spans are committed; the
// commit does not wait for its WAL flush (see store.SpanIngest). The write outlives ctx: once
// queued, the spans may be in a transaction with other calls'. A call whose spans are all still
// running is a start notice: it is held for a moment and returns at once, with a zero result
// (see startBuffer).
func (s *Service) Ingest(ctx context.Context, source string, spans []store.Span) (store.SpanIngestResult, error) {
	if len(spans) == 0 {
		return store.SpanIngestResult{}, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return store.SpanIngestResult{}, err
	}
	cleanSpans(spans)
	if s.starts != nil && !slices.ContainsFunc(spans, ended) && s.starts.hold(source, spans) {
		s.publish(spans)
		return store.SpanIngestResult{}, nil
	}
	// The ends hold the whole spans: their held starts need no write, unless the ends fail to be
	// written, in which case the starts are held again so that the spans are not lost.
	var superseded []heldStart
	if s.starts != nil {
		superseded = s.starts.supersede(spans)
	}
	res, err := s.group.ingest(source, spans)
	if err != nil {
		if s.starts != nil {
			s.starts.restore(superseded)
		}
		return res, err
	}
	if len(superseded) > 0 {
		s.metrics.ingested.WithLabelValues(source, "merged").Add(float64(len(superseded)))
	}
	s.publish(spans)
	return res, nil
}

func ended(sp store.Span) bool { return sp.EndTime != 0 }

// writeStarts writes held span starts through the group committer.
func (s *Service) writeStarts(_ context.Context, source string, spans []store.Span) error {
	if _, err := s.group.ingest(source, spans); err != nil {
		s.metrics.rejected.WithLabelValues(source, "start_write_failed").Add(float64(len(spans)))
		s.log.Warn("trace: held span starts could not be written", "spans", len(spans), "err", err)
		return err
	}
	return nil
}

// flushStarts writes the held span starts, so that a read sees them.
func (s *Service) flushStarts(ctx context.Context) {
	if s.starts != nil && s.starts.held() {
		s.starts.flush(ctx)
	}
}

// Close writes the span starts still held. Ingest after Close still works.
func (s *Service) Close() {
	if s.starts != nil {
		s.starts.flush(context.Background())
	}
}

// publish sends span events for spans just ingested.
func (s *Service) publish(spans []store.Span) {
	if !isNop(s.pub) {
		for i := range spans {
			typ := event.SpanEnded
			if spans[i].EndTime == 0 {
				typ = event.SpanStarted
			}
			s.pub.Publish(SpanEvent{Type: typ, Span: spans[i]})
		}
	}
}

// write is one group transaction, with its metrics.
func (s *Service) write(ctx context.Context, source string, spans []store.Span) (store.SpanIngestResult, error) {
	s.metrics.groupSpans.Observe(float64(len(spans)))
	// The traces' totals are folded in the spans' own transaction (one commit, and no reader
	// sees the spans without them).
	res, err := s.store.SpanIngestFold(ctx, spans, func(ended []store.SpanKey) ([]store.SpanUsage, []store.TraceService) {
		return usageOf(spans, ended)
	})
	if err != nil {
		return res, err
	}
	if refs, resumes := resumeFactsOf(spans); len(refs) > 0 || len(resumes) > 0 {
		// As the totals: the spans are stored; a failed link is logged, not refused.
		if err := s.store.TraceResumeFold(ctx, refs, resumes); err != nil {
			s.log.Warn("trace: resumed traces not linked", "err", err)
		}
	}
	s.metrics.ingested.WithLabelValues(source, "inserted").Add(float64(res.Inserted))
	s.metrics.ingested.WithLabelValues(source, "updated").Add(float64(res.Updated))
	s.metrics.ingested.WithLabelValues(source, "skipped").Add(float64(res.Skipped))
	return res, nil
}

// IngestGenkit stores one Genkit TraceData body (POST /api/traces).
func (s *Service) IngestGenkit(ctx context.Context, body []byte) (store.SpanIngestResult, error) {
	spans, err := DecodeGenkit(body)
	if err != nil {
		s.Reject(store.SpanSourceGenkit, "malformed")
		return store.SpanIngestResult{}, err
	}
	return s.Ingest(ctx, store.SpanSourceGenkit, spans)
}

// IngestOTLP stores an OTLP/HTTP export request and returns the response body to send, in the
// request's content type, with a partial success when some spans were rejected.
func (s *Service) IngestOTLP(ctx context.Context, body []byte, contentType string) ([]byte, error) {
	spans, rejected, reason, err := DecodeOTLP(body, contentType)
	if err != nil {
		s.Reject(store.SpanSourceOTLP, "malformed")
		return nil, err
	}
	if rejected > 0 {
		s.metrics.rejected.WithLabelValues(store.SpanSourceOTLP, "invalid_span").Add(float64(rejected))
	}
	if _, err := s.Ingest(ctx, store.SpanSourceOTLP, spans); err != nil {
		return nil, err
	}
	return OTLPResponse(contentType, rejected, reason)
}

// GenkitGet returns a trace as Genkit's TraceData (GET /api/traces/{id}).
func (s *Service) GenkitGet(ctx context.Context, traceID string) (*TraceData, error) {
	traceID, err := ParseTraceID(traceID)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	tr, err := s.reads.TraceGet(ctx, traceID)
	if err != nil {
		return nil, err
	}
	spans, err := s.reads.SpansByTrace(ctx, traceID, tr.SpanCount)
	if err != nil {
		return nil, err
	}
	return ToGenkit(tr, spans), nil
}

// GenkitListParams are GET /api/traces's parameters.
type GenkitListParams struct {
	Limit             int
	ContinuationToken string
	Filter            string // JSON, see ParseGenkitFilter
}

// GenkitList lists traces as Genkit does: newest first, each with only its root span, long
// attribute values cut to 1,000 characters, and an opaque continuation token.
func (s *Service) GenkitList(ctx context.Context, p GenkitListParams) (*GenkitListResponse, error) {
	filters, err := ParseGenkitFilter(p.Filter)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	params := store.TraceListParams{Filters: filters, Limit: p.Limit, WithRoot: true}
	if params.Limit <= 0 {
		params.Limit = 10
	}
	if p.ContinuationToken != "" {
		if params.After, err = store.ParseTraceCursor(p.ContinuationToken); err != nil {
			return nil, inputErrorf("continuationToken: %v", err)
		}
	}
	items, next, err := s.reads.TraceList(ctx, params)
	if err != nil {
		return nil, filterInputError(err)
	}
	resp := &GenkitListResponse{Traces: make([]*TraceData, len(items))}
	for i := range items {
		it := &items[i]
		var spans []store.Span
		if it.Root != nil {
			spans = []store.Span{*it.Root}
		}
		td := ToGenkit(&it.Trace, nil)
		for j := range spans {
			td.Spans[spans[j].SpanID] = toSpanData(&spans[j], true)
		}
		resp.Traces[i] = td
	}
	if next != nil {
		resp.ContinuationToken = next.String()
	}
	return resp, nil
}

// List lists trace summaries for Loupe's own API.
func (s *Service) List(ctx context.Context, p store.TraceListParams) ([]store.Trace, *store.TraceCursor, error) {
	p.WithRoot = false
	s.flushStarts(ctx)
	items, next, err := s.reads.TraceList(ctx, p)
	if err != nil {
		return nil, nil, filterInputError(err)
	}
	out := make([]store.Trace, len(items))
	for i := range items {
		out[i] = items[i].Trace
	}
	return out, next, nil
}

// filterInputError turns the store's filter complaints into input errors.
func filterInputError(err error) error {
	if errors.Is(err, store.ErrInvalidFilter) {
		return &InputError{msg: err.Error()}
	}
	return err
}
