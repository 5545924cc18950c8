package services_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/services"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storetest.LeakOptions()...)
}

// TestServicesRunAFlowDurablyTraceItAndStopInOrder wires a serving process's services over a
// fresh database: a flow started on them is executed by a worker and its span reaches the
// database through Loupe's TracerProvider; with Ingest the trace service reads it back; Stop
// stops everything (no goroutine is left: TestMain checks) and is safe to call twice.
func TestServicesRunAFlowDurablyTraceItAndStopInOrder(t *testing.T) {
	ctx := context.Background()
	reg := engine.NewRegistry()
	engine.DefineFlow(reg, "shout", func(ctx context.Context, in string) (string, error) { return in + "!", nil })
	svcs, err := services.Start(ctx, services.Config{Pool: storetest.NewPool(t), Registry: reg,
		Runs: runs.Config{Workers: 1, LeaseTTL: 5 * time.Second}, Ingest: &services.Ingest{},
		Tracing: services.Tracing{NoForward: true, FlushInterval: 20 * time.Millisecond}})
	require.NoError(t, err)
	defer svcs.Stop()
	require.NotNil(t, svcs.Traces)
	require.Nil(t, svcs.Apps, "no projects, no Genkit app manager")
	require.NoError(t, svcs.StartApps(ctx, "http://127.0.0.1:1"), "nothing to start")

	run, err := svcs.Runs.StartRun(ctx, runs.StartParams{Action: "/flow/shout", Input: json.RawMessage(`"hi"`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err := svcs.Store.RunGet(ctx, run.ID)
		require.NoError(t, err)
		return r.Status == store.RunSucceeded && string(r.Output) == `"hi!"`
	}, 30*time.Second, 20*time.Millisecond, "a worker ran the flow")
	require.Eventually(t, func() bool {
		var traceID string
		if svcs.Store.Pool().QueryRow(ctx, `SELECT trace_id FROM spans WHERE run_id = $1 LIMIT 1`, run.ID).Scan(&traceID) != nil {
			return false
		}
		tree, err := svcs.Traces.Tree(ctx, traceID)
		return err == nil && tree.SpanCount >= 1
	}, 30*time.Second, 20*time.Millisecond, "the flow's span was stored with its run and reads back")

	svcs.Stop()
	svcs.Stop()
}

// TestAWorkerHasNoTraceService: without Ingest (devui worker, devui run) the services report
// their own spans but ingest none.
func TestAWorkerHasNoTraceService(t *testing.T) {
	svcs, err := services.Start(context.Background(), services.Config{Pool: storetest.NewPool(t), Registry: engine.NewRegistry(),
		Tracing: services.Tracing{NoForward: true}})
	require.NoError(t, err)
	defer svcs.Stop()
	require.Nil(t, svcs.Traces)
	require.NotNil(t, svcs.Provider)
	require.NotNil(t, svcs.Runs)
}

// TestStartNeedsAPoolAndARegistry: a missing part is a clear error, not a panic later.
func TestStartNeedsAPoolAndARegistry(t *testing.T) {
	_, err := services.Start(context.Background(), services.Config{})
	require.ErrorContains(t, err, "Pool and Registry are required")
}
