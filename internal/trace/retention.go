package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// RetentionConfig says how long traces are kept. Both rules may be set; a trace goes when either
// says so. Traces of a run that is interrupted, or that a replay or fork refers to, are always kept.
//
// spans is partitioned by the time its spans started. A pass first makes sure partitions cover
// today and the next AheadDays days: a UTC day each with MaxAge (a UTC hour each once a recent
// partition held HourlyAbove spans a day), a UTC month each without (traces kept, partitions few). By age, a trace goes when its root started before the horizon
// (now - MaxAge), whole: its summary and its spans in days that stay are deleted by rows, then
// every partition that ended before the horizon is dropped, keeping (in spans_default) the
// spans of the traces that stay, so a kept trace that straddles into an expired day stays whole.
// The span cap deletes rows.
type RetentionConfig struct {
	MaxAge   time.Duration // delete traces that started longer ago; 0 keeps them
	MaxSpans int64         // keep at most this many spans, newest traces first; 0 means no cap
	Interval time.Duration // between passes (default 10 minutes)
	// BatchTraces bounds one delete transaction (default 100 traces), so locks stay short.
	BatchTraces int
	// Pause between batches (default 20 ms), to leave room for ingest.
	Pause time.Duration
	// AheadDays is how many days' partitions past today each pass makes sure exist (default 2).
	AheadDays int
	// HourlyAbove is the spans a day from which, with MaxAge, partitions are made an hour wide
	// instead of a day: when a partition that ended in the last two days held that many spans a
	// day or more (PostgreSQL's estimate). Days already made stay days, so the change takes effect
	// past them. 0 never makes hours.
	HourlyAbove int64
}

// Retention deletes old traces periodically. Start and Stop follow the house lifecycle contract.
type Retention struct {
	store   *store.Store
	cfg     RetentionConfig
	metrics *Metrics
	log     *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRetention builds a Retention; metrics may be nil.
func NewRetention(st *store.Store, cfg RetentionConfig, metrics *Metrics, log *slog.Logger) *Retention {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.BatchTraces <= 0 {
		cfg.BatchTraces = 100
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 20 * time.Millisecond
	}
	if cfg.AheadDays <= 0 {
		cfg.AheadDays = 2
	}
	if metrics == nil {
		metrics = NewMetrics()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Retention{store: st, cfg: cfg, metrics: metrics, log: log}
}

// busy reports whether a span partition that ended in the two days before now held
// cfg.HourlyAbove spans a day or more, so that the next partitions are better an hour wide.
func (r *Retention) busy(ctx context.Context, now time.Time) (bool, error) {
	if r.cfg.HourlyAbove <= 0 {
		return false, nil
	}
	parts, err := r.store.SpanPartitions(ctx)
	if err != nil {
		return false, err
	}
	since := now.Add(-2 * store.SpanPartitionDay).UnixNano()
	for _, p := range parts {
		if p.To > now.UnixNano() || p.To <= since || p.To <= p.From {
			continue
		}
		rows, err := r.store.SpanPartitionRows(ctx, p)
		if err != nil {
			return false, err
		}
		if float64(rows)*float64(store.SpanPartitionDay)/float64(p.To-p.From) >= float64(r.cfg.HourlyAbove) {
			return true, nil
		}
	}
	return false, nil
}

// RunOnce creates the coming days' span partitions, deletes every trace the rules select, batch by
// batch, drops the expired days' partitions, and returns the traces and spans deleted.
func (r *Retention) RunOnce(ctx context.Context) (traces, spans int64, err error) {
	now := time.Now()
	// Days when retention drops them by age; months when traces are kept, so that the partitions
	// stay few (README, "What many partitions cost").
	width := store.SpanPartitionsMonthly
	if r.cfg.MaxAge > 0 {
		width = store.SpanPartitionsDaily
		busy, err := r.busy(ctx, now)
		if err != nil {
			r.metrics.retentionErrs.Inc()
			return 0, 0, fmt.Errorf("retention: %w", err)
		}
		if busy {
			width = store.SpanPartitionsHourly
		}
	}
	if _, err := r.store.SpanPartitionsEnsure(ctx, now, now.Add(time.Duration(r.cfg.AheadDays)*store.SpanPartitionDay), width); err != nil {
		r.metrics.retentionErrs.Inc()
		return 0, 0, fmt.Errorf("retention: %w", err)
	}
	if r.cfg.MaxAge <= 0 && r.cfg.MaxSpans <= 0 {
		return 0, 0, nil
	}
	p := store.TraceDeleteParams{Limit: r.cfg.BatchTraces}
	var expired []store.SpanPartition
	if r.cfg.MaxAge > 0 {
		p.OlderThan = now.Add(-r.cfg.MaxAge).UnixNano()
		parts, err := r.store.SpanPartitions(ctx)
		if err != nil {
			r.metrics.retentionErrs.Inc()
			return 0, 0, fmt.Errorf("retention: %w", err)
		}
		for _, part := range parts {
			if part.To <= p.OlderThan {
				expired = append(expired, part)
			}
		}
		if len(expired) > 0 {
			p.DropFrom, p.DropTo = expired[0].From, expired[len(expired)-1].To
		}
	}
	if r.cfg.MaxSpans > 0 {
		// Once per pass: deleting older traces does not move it, and traces that arrive during
		// the pass only make it keep a little more, until the next one.
		cut, err := r.store.TraceSpanCutoff(ctx, r.cfg.MaxSpans)
		switch {
		case errors.Is(err, store.ErrNotFound): // every span fits: no cutoff
		case err != nil:
			r.metrics.retentionErrs.Inc()
			return 0, 0, fmt.Errorf("retention: %w", err)
		default:
			p.Beyond = cut
		}
	}
	if p.OlderThan == 0 && p.Beyond == nil {
		return 0, 0, nil
	}
	for {
		t, s, err := r.store.TraceDeleteBatch(ctx, p)
		if err != nil {
			r.metrics.retentionErrs.Inc()
			return traces, spans, fmt.Errorf("retention: %w", err)
		}
		traces, spans = traces+t, spans+s
		r.metrics.retention.WithLabelValues("traces").Add(float64(t))
		r.metrics.retention.WithLabelValues("spans").Add(float64(s))
		if t == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return traces, spans, ctx.Err()
		case <-time.After(r.cfg.Pause):
		}
	}
	// Every expired trace is gone now, so the traces still summarized with a span in an expired
	// day are the ones kept: SpanPartitionDrop keeps their spans.
	for _, part := range expired {
		kept, err := r.store.SpanPartitionDrop(ctx, part)
		if errors.Is(err, store.ErrSpanPartitionBusy) {
			// Its expired traces are gone already; the next pass drops it.
			r.log.Warn("span partition busy: dropping it on the next pass", "partition", part.Name, "err", err)
			continue
		}
		if err != nil {
			r.metrics.retentionErrs.Inc()
			return traces, spans, fmt.Errorf("retention: %w", err)
		}
		r.metrics.retention.WithLabelValues("partitions").Inc()
		r.log.Info("span partition dropped", "partition", part.Name, "kept_spans", kept)
	}
	return traces, spans, nil
}

// Start runs a pass now and then every Interval, until Stop.
func (r *Retention) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return errors.New("retention already started")
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			if tr, sp, err := r.RunOnce(ctx); err != nil && !errors.Is(err, context.Canceled) {
				r.log.Error("trace retention failed", "err", err)
			} else if tr > 0 {
				r.log.Info("trace retention", "traces", tr, "spans", sp)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Stop stops the loop and waits for a pass in progress. It is safe to call twice and without Start.
func (r *Retention) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}
