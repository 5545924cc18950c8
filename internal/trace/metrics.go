package trace

import "github.com/prometheus/client_golang/prometheus"

// Metrics are tracing's Prometheus collectors. The server registers Collectors on /metrics.
type Metrics struct {
	exported      prometheus.Counter
	exportErrors  prometheus.Counter
	exportSeconds prometheus.Histogram
	dropped       *prometheus.CounterVec
	queueLength   prometheus.Gauge
	ingested      *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	retention     *prometheus.CounterVec
	retentionErrs prometheus.Counter
	groupSpans    prometheus.Histogram
}

// NewMetrics creates unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		exported: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loupe_trace_export_spans_total",
			Help: "Spans of Loupe's own engine written to PostgreSQL by the span exporter.",
		}),
		exportErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loupe_trace_export_errors_total",
			Help: "Failed export batches (each batch is retried or dropped; see loupe_trace_spans_dropped_total).",
		}),
		exportSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "loupe_trace_export_batch_seconds",
			Help:    "Time to write one export batch to PostgreSQL.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loupe_trace_spans_dropped_total",
			Help: "Finished spans the exporter dropped: queue_full (the oldest queued span, to bound memory) or export_error (a batch PostgreSQL refused).",
		}, []string{"reason"}),
		queueLength: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "loupe_trace_export_queue_spans",
			Help: "Finished spans waiting for export.",
		}),
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loupe_trace_ingest_spans_total",
			Help: "Spans received from other programs by source (genkit, otlp) and result (inserted, updated, skipped, or merged: a held start whose end arrived first).",
		}, []string{"source", "result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loupe_trace_ingest_rejected_total",
			Help: "Ingest requests or spans refused, by source and reason.",
		}, []string{"source", "reason"}),
		retention: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loupe_trace_retention_deleted_total",
			Help: "Traces and spans deleted by retention.",
		}, []string{"kind"}),
		retentionErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loupe_trace_retention_errors_total",
			Help: "Retention passes that failed.",
		}),
		groupSpans: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "loupe_trace_ingest_group_spans",
			Help:    "Spans per ingest transaction: concurrent requests share one (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
	}
}

// Collectors lists every collector, for prometheus.Registerer.MustRegister.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.exported, m.exportErrors, m.exportSeconds, m.dropped, m.queueLength,
		m.ingested, m.rejected, m.retention, m.retentionErrs, m.groupSpans}
}
