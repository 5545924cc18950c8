package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// tracingConfig is tracing's part of the configuration, from the environment:
//
//	LOUPE_INGEST_TOKEN            bearer token trace ingest needs when not bound to loopback
//	LOUPE_INGEST_MAX_BODY         largest ingest body, compressed or not (default 16M)
//	LOUPE_TRACE_RETENTION_DAYS    delete traces older than this many days (default 0: keep)
//	LOUPE_TRACE_MAX_SPANS         keep at most this many spans, newest first (default 0: no cap)
//	OTEL_EXPORTER_OTLP_*          also forward Loupe's own spans to an OTLP/HTTP endpoint
type tracingConfig struct {
	IngestToken   string
	MaxBody       int64
	RetentionDays int
	MaxSpans      int64
}

func tracingConfigFromEnv() (tracingConfig, error) {
	c := tracingConfig{IngestToken: os.Getenv("LOUPE_INGEST_TOKEN"), MaxBody: trace.DefaultMaxBodyBytes}
	if v := os.Getenv("LOUPE_INGEST_MAX_BODY"); v != "" {
		n, err := parseSize(v)
		if err != nil {
			return c, fmt.Errorf("LOUPE_INGEST_MAX_BODY %q: want bytes, or a number with K, M or G", v)
		}
		c.MaxBody = n
	}
	if v := os.Getenv("LOUPE_TRACE_RETENTION_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return c, fmt.Errorf("LOUPE_TRACE_RETENTION_DAYS %q: want a whole number of days", v)
		}
		c.RetentionDays = n
	}
	if v := os.Getenv("LOUPE_TRACE_MAX_SPANS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("LOUPE_TRACE_MAX_SPANS %q: want a whole number", v)
		}
		c.MaxSpans = n
	}
	return c, nil
}

func parseSize(v string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(strings.ToUpper(v), "K"):
		mult, v = 1<<10, v[:len(v)-1]
	case strings.HasSuffix(strings.ToUpper(v), "M"):
		mult, v = 1<<20, v[:len(v)-1]
	case strings.HasSuffix(strings.ToUpper(v), "G"):
		mult, v = 1<<30, v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size")
	}
	return n * mult, nil
}

// tracing bundles the trace service, Loupe's own TracerProvider and retention.
type tracing struct {
	service   *trace.Service
	provider  *trace.Provider
	retention *trace.Retention
}

// newTracing builds tracing; pub receives span start and end events (the live hub).
func newTracing(ctx context.Context, st *store.Store, log *slog.Logger, pub trace.Publisher) (*tracing, error) {
	cfg, err := tracingConfigFromEnv()
	if err != nil {
		return nil, err
	}
	metrics := trace.NewMetrics()
	svc, err := trace.NewService(trace.Config{Store: st, Metrics: metrics, MaxBodyBytes: cfg.MaxBody,
		IngestToken: cfg.IngestToken, Logger: log, Publisher: pub})
	if err != nil {
		return nil, err
	}
	provider, err := trace.NewProvider(ctx, trace.ProviderConfig{ServiceName: "loupe", ServiceVersion: version,
		Processor: trace.ProcessorConfig{Store: st, Metrics: metrics, Logger: log, Publisher: pub}, Logger: log})
	if err != nil {
		return nil, err
	}
	ret := trace.NewRetention(st, trace.RetentionConfig{
		MaxAge: time.Duration(cfg.RetentionDays) * 24 * time.Hour, MaxSpans: cfg.MaxSpans}, metrics, log)
	return &tracing{service: svc, provider: provider, retention: ret}, nil
}

func (t *tracing) Start(ctx context.Context) error {
	if err := t.provider.Start(ctx); err != nil {
		return err
	}
	return t.retention.Start(ctx)
}

// Stop stops retention, then writes the spans still queued and the span starts still held. The
// HTTP server has stopped by then, so no ingest races it.
func (t *tracing) Stop() {
	t.retention.Stop()
	t.provider.Stop()
	t.service.Close()
}
