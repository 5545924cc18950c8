package trace_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// TestProviderForwardsOverOTLPWhenTheEnvironmentSaysSo points the standard OTEL_EXPORTER_OTLP_*
// variables at a real OTLP/HTTP receiver on a loopback port: Loupe's spans reach it, with the
// service name, as well as PostgreSQL.
func TestProviderForwardsOverOTLPWhenTheEnvironmentSaysSo(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	var (
		mu       sync.Mutex
		received []string
		services []string
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if r.URL.Path != "/v1/traces" || req.UnmarshalProto(body) != nil {
			http.Error(w, "want an OTLP protobuf export on /v1/traces", http.StatusBadRequest)
			return
		}
		rs := req.Traces().ResourceSpans()
		mu.Lock()
		for i := 0; i < rs.Len(); i++ {
			if v, ok := rs.At(i).Resource().Attributes().Get("service.name"); ok {
				services = append(services, v.Str())
			}
			ss := rs.At(i).ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				for k := 0; k < ss.At(j).Spans().Len(); k++ {
					received = append(received, ss.At(j).Spans().At(k).Name())
				}
			}
		}
		mu.Unlock()
		resp, _ := ptraceotlp.NewExportResponse().MarshalProto()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	require.True(t, trace.ForwardEndpointFromEnv())

	p, err := trace.NewProvider(ctx, trace.ProviderConfig{ServiceName: "loupe-forward-test",
		Processor: trace.ProcessorConfig{Store: st}})
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx))
	defer p.Stop()
	_, span := p.TracerProvider().Tracer("test").Start(ctx, "forwarded-span")
	traceID := span.SpanContext().TraceID().String()
	span.End()
	require.NoError(t, p.ForceFlush(ctx))

	mu.Lock()
	require.Equal(t, []string{"forwarded-span"}, received)
	require.Equal(t, []string{"loupe-forward-test"}, services)
	mu.Unlock()
	spans, err := st.SpansByTrace(ctx, traceID, 1)
	require.NoError(t, err)
	require.Len(t, spans, 1, "and stored in PostgreSQL too")
}
