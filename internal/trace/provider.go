package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ProviderConfig configures the TracerProvider Loupe's engine reports to.
type ProviderConfig struct {
	// ServiceName is the resource's service.name (default "loupe").
	ServiceName    string
	ServiceVersion string
	// Processor configures the span processor (store, publisher, queue).
	Processor ProcessorConfig
	// NoForward disables forwarding to an OTLP endpoint even when OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
	NoForward bool
	Logger    *slog.Logger
}

// Provider is Loupe's OpenTelemetry SDK TracerProvider: every span is sampled, published live,
// exported to PostgreSQL, and, when the standard OTEL_EXPORTER_OTLP_* variables name an endpoint,
// also forwarded there over OTLP/HTTP (protobuf) in the SDK's own batches.
type Provider struct {
	tp        *sdktrace.TracerProvider
	processor *Processor
	forwarder sdktrace.SpanExporter
}

// ForwardEndpointFromEnv reports whether the environment asks for OTLP forwarding.
func ForwardEndpointFromEnv() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// NewProvider builds the provider. Spans ended before Start are queued and exported once started.
func NewProvider(ctx context.Context, cfg ProviderConfig) (*Provider, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "loupe"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Processor.Logger == nil {
		cfg.Processor.Logger = cfg.Logger
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	// OTEL_RESOURCE_ATTRIBUTES adds to the resource; the service name set here wins.
	res, err := resource.Merge(resource.Environment(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	proc, err := NewProcessor(cfg.Processor)
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(proc),
		sdktrace.WithIDGenerator(IDGenerator{}),
	}
	p := &Provider{processor: proc}
	if !cfg.NoForward && ForwardEndpointFromEnv() {
		if proto := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); proto != "" && proto != "http/protobuf" {
			cfg.Logger.Warn("OTEL_EXPORTER_OTLP_PROTOCOL is not http/protobuf; forwarding with http/protobuf anyway", "protocol", proto)
		}
		exp, err := otlptracehttp.New(ctx) // reads OTEL_EXPORTER_OTLP_* itself
		if err != nil {
			return nil, fmt.Errorf("otlp forwarding: %w", err)
		}
		p.forwarder = exp
		opts = append(opts, sdktrace.WithBatcher(exp))
		cfg.Logger.Info("forwarding spans over OTLP/HTTP")
	}
	p.tp = sdktrace.NewTracerProvider(opts...)
	return p, nil
}

// TracerProvider is what the engine is given (engine.WithTracerProvider).
func (p *Provider) TracerProvider() *sdktrace.TracerProvider { return p.tp }

// Processor is the provider's span processor.
func (p *Provider) Processor() *Processor { return p.processor }

// Start starts exporting to PostgreSQL.
func (p *Provider) Start(ctx context.Context) error { return p.processor.Start(ctx) }

// ForceFlush exports every finished span now, to PostgreSQL and to the OTLP endpoint.
func (p *Provider) ForceFlush(ctx context.Context) error { return p.tp.ForceFlush(ctx) }

// Stop ends the provider: queued spans are exported, within ten seconds. It is safe to call twice
// and without Start.
func (p *Provider) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		p.processor.log.Warn("tracer provider shutdown", "err", err)
	}
}
