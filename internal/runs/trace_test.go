package runs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestResumeContinuesTheRunsTrace checks that a resumed execution's spans belong to the run's
// trace, nested under the interrupted turn and linked to it, and that the run records its trace id.
func TestResumeContinuesTheRunsTrace(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := engine.NewRegistry(engine.WithTracerProvider(tp))
	defineTestAgent(reg, b.pool, "", "")
	svc, err := runs.New(runs.Config{Workers: 1, LeaseTTL: time.Second}, b.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	b.svc = svc

	run := b.start(t, "approve1")
	interrupted := b.wait(t, run.ID, store.RunInterrupted)
	require.NotNil(t, interrupted.TraceID)
	require.NotNil(t, interrupted.ResumeSpanID)
	first := len(exp.GetSpans())
	b.resolve(t, b.pending(t, run.ID)[0], runs.ActionApprove, "")
	b.wait(t, run.ID, store.RunSucceeded)

	spans := exp.GetSpans()
	require.Greater(t, len(spans), first)
	for _, s := range spans {
		require.Equal(t, *interrupted.TraceID, s.SpanContext.TraceID().String(), "span %s is in the run's trace", s.Name)
	}
	var resumedRoot *tracetest.SpanStub
	for i := first; i < len(spans); i++ {
		if spans[i].Parent.SpanID().String() == *interrupted.ResumeSpanID && len(spans[i].Links) == 1 {
			resumedRoot = &spans[i]
		}
	}
	require.NotNil(t, resumedRoot, "the resumed flow span nests under the interrupted turn")
	require.Equal(t, *interrupted.ResumeSpanID, resumedRoot.Links[0].SpanContext.SpanID().String())
	require.Equal(t, "resume", resumedRoot.Links[0].Attributes[0].Value.AsString())
}
