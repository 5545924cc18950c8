package runs_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
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

	// Turn spans number the run's turns across the pause: the resumed call's turn counter starts
	// at 0 again (the turn limit is per call, as in Genkit), but its spans go on from the history.
	turnsOf := func(op string) []int64 {
		var out []int64
		for _, s := range spans {
			var isOp bool
			var turn int64 = -1
			for _, a := range s.Attributes {
				switch string(a.Key) {
				case engine.AttrGenAIOp:
					isOp = a.Value.AsString() == op
				case engine.AttrTurnIndex:
					turn = a.Value.AsInt64()
				}
			}
			if isOp && turn >= 0 { // the agent's own span has no turn
				out = append(out, turn)
			}
		}
		return out
	}
	require.Equal(t, []int64{0, 1}, turnsOf("invoke_agent"), "generate spans")
	require.Equal(t, []int64{0, 1}, turnsOf("chat"), "model spans")
	final, err := b.store.RunGet(context.Background(), run.ID)
	require.NoError(t, err)
	require.Equal(t, 2, final.Turns, "the run counts the same turns")
}

// TestTakeoverContinuesTheRunsTraceUnderOneRoot: a run whose worker loses its lease mid-tool (as
// a frozen or dead worker would) is taken over, and the second execution's spans join the first's
// trace under the same root span, so that the run reads as one tree.
func TestTakeoverContinuesTheRunsTraceUnderOneRoot(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(trace.IDGenerator{}))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := engine.NewRegistry(engine.WithTracerProvider(tp))
	blocked := make(chan struct{})
	var calls atomic.Int64
	stall := engine.DefineTool(reg, "stall", "Stalls the first time.", func(tc *engine.ToolContext, _ struct{}) (string, error) {
		if calls.Add(1) == 1 {
			close(blocked)
			<-tc.Done()
			return "", tc.Err()
		}
		return "went on", nil
	})
	defineOneTurnAgent(reg, "takeoverAgent", []engine.Tool{stall}, scripted.ToolCall("stall", "s1", map[string]any{}))
	svc := b.serve(t, reg, runs.Config{Workers: 1, LeaseTTL: 600 * time.Millisecond})
	ctx := context.Background()
	run, err := svc.StartRun(ctx, runs.StartParams{Action: "takeoverAgent", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	<-blocked
	// Another worker takes the lease (a new epoch) and lets it lapse: this one stops, the sweep hands the run
	// over, and the next execution finishes it.
	_, err = b.pool.Exec(ctx, `UPDATE runs SET lease_owner = 'elsewhere', lease_epoch = lease_epoch + 1, lease_expires_at = now() - interval '1 second' WHERE id = $1`, run.ID)
	require.NoError(t, err)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.EqualValues(t, 2, calls.Load(), "the stalled tool ran again in the second execution")
	require.NotNil(t, done.TraceID)

	spans := exp.GetSpans()
	ids := map[string]bool{}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		require.Equal(t, *done.TraceID, s.SpanContext.TraceID().String(), "span %s is in the run's trace", s.Name)
		ids[s.SpanContext.SpanID().String()] = true
		if !s.Parent.IsValid() {
			roots = append(roots, s)
		}
	}
	require.Len(t, roots, 2, "each execution ended its flow span")
	require.Equal(t, roots[0].SpanContext.SpanID(), roots[1].SpanContext.SpanID(), "both executions share one root span")
	for _, s := range spans {
		if s.Parent.IsValid() {
			require.True(t, ids[s.Parent.SpanID().String()], "span %s has its parent in the trace", s.Name)
		}
	}
}
