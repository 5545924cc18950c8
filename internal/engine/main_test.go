package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

func TestMain(m *testing.M) {
	// Handlebars (raymond) lexes in a goroutine that a template's parse error leaves blocked on
	// its channel: one per broken template parsed (TestBrokenPromptFileIsAnErrorNamingFileAndLine).
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/mbleigh/raymond/lexer.(*Lexer).produce"))
}

type WeatherIn struct {
	City string `json:"city"`
}

type WeatherOut struct {
	TempC float64 `json:"tempC"`
}

type bundle struct {
	r   *engine.Registry
	exp *tracetest.InMemoryExporter
}

func setup(t testing.TB, opts ...engine.RegistryOption) *bundle {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r := engine.NewRegistry(append([]engine.RegistryOption{engine.WithTracerProvider(tp)}, opts...)...)
	return &bundle{r: r, exp: exp}
}

var callsMu sync.Mutex

// weather registers a weather tool that counts its calls.
func weather(b *bundle, calls *int) *engine.TypedTool[WeatherIn, WeatherOut] {
	return engine.DefineTool(b.r, "getWeather", "Current weather of a city.",
		func(tc *engine.ToolContext, in WeatherIn) (WeatherOut, error) {
			if calls != nil {
				callsMu.Lock()
				*calls++
				callsMu.Unlock()
			}
			return WeatherOut{TempC: float64(len(in.City))}, nil
		})
}

func call(name, ref string, input any) *engine.Part { return scripted.ToolCall(name, ref, input) }

func statusOf(t *testing.T, err error) engine.Status {
	t.Helper()
	require.Error(t, err)
	return engine.StatusOf(err)
}

func spanByName(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) (any, bool) {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.AsInterface(), true
		}
	}
	return nil, false
}
