package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loupe-dev/loupe/internal/store"
)

// metrics is the server's Prometheus registry: HTTP traffic, the pgx pool and the Go runtime.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(st *store.Store) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loupe_http_requests_total",
			Help: "HTTP requests by method, route and status code.",
		}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loupe_http_request_duration_seconds",
			Help:    "HTTP request latency by method and route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}, []string{"method", "route"}),
	}
	m.registry.MustRegister(
		m.requests, m.latency,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newPoolCollector(st),
	)
	return m
}

// Registry lets other packages register their own metrics on the same endpoint.
func (s *Server) Registry() prometheus.Registerer { return s.metrics.registry }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

func (m *metrics) middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			route := c.Path() // the route pattern, never the raw path, to bound cardinality
			if route == "" {
				route = "unmatched"
			}
			if err != nil && !c.Response().Committed {
				// A quiet route's error, which the request log did not hand to the error handler:
				// answer it now, so that what is counted is the status the client gets.
				c.Error(err)
			}
			status := c.Response().Status
			method := c.Request().Method
			m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
			m.latency.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
			return err
		}
	}
}

// poolCollector exports pgxpool statistics at scrape time.
type poolCollector struct {
	store                                                    *store.Store
	total, idle, acquired, maxConns, acquireCount, emptyWait *prometheus.Desc
}

func newPoolCollector(st *store.Store) *poolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("loupe_pgxpool_"+name, help, nil, nil)
	}
	return &poolCollector{
		store:        st,
		total:        d("total_conns", "Connections in the pool."),
		idle:         d("idle_conns", "Idle connections."),
		acquired:     d("acquired_conns", "Connections in use."),
		maxConns:     d("max_conns", "Pool size limit."),
		acquireCount: d("acquires_total", "Connections acquired from the pool."),
		emptyWait:    d("empty_acquires_total", "Acquires that had to wait for a connection."),
	}
}

func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{p.total, p.idle, p.acquired, p.maxConns, p.acquireCount, p.emptyWait} {
		ch <- d
	}
}

func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := p.store.Pool().Stat()
	ch <- prometheus.MustNewConstMetric(p.total, prometheus.GaugeValue, float64(st.TotalConns()))
	ch <- prometheus.MustNewConstMetric(p.idle, prometheus.GaugeValue, float64(st.IdleConns()))
	ch <- prometheus.MustNewConstMetric(p.acquired, prometheus.GaugeValue, float64(st.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(p.maxConns, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(p.acquireCount, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(p.emptyWait, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
}
