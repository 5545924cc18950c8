package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/services"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// TestMain doubles as a worker process: with LOUPE_SERVICES_WORKER_DB set, the test binary runs
// a worker's services over that database, whose tool blocks once it has started (after writing
// the marker file LOUPE_SERVICES_MARKER), until the process is killed.
func TestMain(m *testing.M) {
	if dsn := os.Getenv("LOUPE_SERVICES_WORKER_DB"); dsn != "" {
		if err := workerProcess(dsn, os.Getenv("LOUPE_SERVICES_MARKER")); err != nil {
			fmt.Fprintln(os.Stderr, "worker process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, storetest.LeakOptions()...)
}

// orderRegistry has /flow/order, whose tool fetch calls block (and write marker) when block is
// set, and answer at once otherwise.
func orderRegistry(block bool, marker string) *engine.Registry {
	reg := engine.NewRegistry()
	scripted.DefineFunc(reg, "order/model", func(req *engine.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(scripted.ToolCall("fetch", "f1", map[string]any{})), nil
		}
		return scripted.Text("fetched"), nil
	})
	fetch := engine.DefineTool(reg, "fetch", "Fetches.", func(tc *engine.ToolContext, _ struct{}) (string, error) {
		if block {
			_ = os.WriteFile(marker, nil, 0o644)
			<-tc.Done()
			return "", tc.Err()
		}
		return "ok", nil
	})
	engine.DefineFlow(reg, "order", func(ctx context.Context, _ struct{}) (string, error) {
		resp, err := engine.Generate(ctx, reg, engine.WithModelName("order/model"), engine.WithPrompt("go"), engine.WithTools(fetch))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	return reg
}

func workerProcess(dsn, marker string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	svcs, err := services.Start(ctx, services.Config{Pool: pool, Registry: orderRegistry(true, marker),
		Runs:    runs.Config{Workers: 1, LeaseTTL: time.Second, Program: "orders"},
		Tracing: services.Tracing{NoForward: true, FlushInterval: 20 * time.Millisecond}})
	if err != nil {
		return err
	}
	<-ctx.Done()
	svcs.Stop()
	return nil
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

// TestSpansOfAKilledWorkerEndAtTheTakeover: a worker process is SIGKILLed while its tool runs,
// with the run's spans stored as running; the execution that takes the run over ends them (an
// error status that says why, the takeover's time), so that once the run has succeeded no span of
// it is left running.
func TestSpansOfAKilledWorkerEndAtTheTakeover(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.NewURL(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(pool)
	starter, err := runs.New(runs.Config{Workers: 0, Program: "orders"}, st, orderRegistry(false, ""))
	require.NoError(t, err)
	run, err := starter.StartRun(ctx, runs.StartParams{Action: "order", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)

	marker := filepath.Join(t.TempDir(), "tool")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOUPE_SERVICES_WORKER_DB="+dsn, "LOUPE_SERVICES_MARKER="+marker)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		_, err := os.Stat(marker)
		if err != nil {
			return false
		}
		spans, err := st.SpansRunningByRun(ctx, run.ID)
		require.NoError(t, err)
		// The tool's span is stored running, and so are only its ancestors: the model call before
		// it has been exported ended (else the takeover would end it too, and the trace's failure
		// would be that call's).
		byID := map[string]store.Span{}
		var fetch *store.Span
		for i, sp := range spans {
			byID[sp.SpanID] = sp
			if sp.Name == "fetch" {
				fetch = &spans[i]
			}
		}
		if fetch == nil {
			return false
		}
		lineage := map[string]bool{fetch.SpanID: true}
		for p := fetch.ParentSpanID; p != nil; {
			lineage[*p] = true
			parent, ok := byID[*p]
			if !ok {
				break
			}
			p = parent.ParentSpanID
		}
		for _, sp := range spans {
			if !lineage[sp.SpanID] {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "the tool runs, its span is stored running, and the spans before it ended")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	killed := time.Now()

	svcs, err := services.Start(ctx, services.Config{Pool: pool, Registry: orderRegistry(false, ""),
		Runs:    runs.Config{Workers: 1, LeaseTTL: time.Second, Program: "orders"},
		Tracing: services.Tracing{NoForward: true, FlushInterval: 20 * time.Millisecond}})
	require.NoError(t, err)
	defer svcs.Stop()
	require.Eventually(t, func() bool {
		r, err := st.RunGet(ctx, run.ID)
		require.NoError(t, err)
		return r.Status == store.RunSucceeded
	}, 60*time.Second, 20*time.Millisecond, "the run was taken over and succeeded")
	require.Eventually(t, func() bool {
		spans, err := st.SpansRunningByRun(ctx, run.ID)
		require.NoError(t, err)
		return len(spans) == 0
	}, 30*time.Second, 20*time.Millisecond, "no span of the run is left running")

	var ended []store.Span
	rows, err := pool.Query(ctx, `SELECT span_id, end_time_unix_nano, status_code, status_message, attributes::text
		FROM spans WHERE run_id = $1 AND name = 'fetch' AND attributes::jsonb ? 'loupe.span.ended_by_takeover'`, run.ID)
	require.NoError(t, err)
	for rows.Next() {
		var sp store.Span
		var attrs string
		require.NoError(t, rows.Scan(&sp.SpanID, &sp.EndTime, &sp.StatusCode, &sp.StatusMessage, &attrs))
		ended = append(ended, sp)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ended, 1, "the killed execution's tool span was ended by the takeover")
	require.Equal(t, store.StatusError, ended[0].StatusCode)
	require.Contains(t, ended[0].StatusMessage, "its process stopped before the span ended")
	require.GreaterOrEqual(t, ended[0].EndTime, killed.UnixNano(), "it ends when the run was taken over, after the kill")

	// As the trace page shows it (the server builds its tree with trace.BuildSkeleton): nothing
	// of the trace runs or is left open, and the failure it points at is the killed tool's, ended
	// by the crash. Before, the spans stayed running until the page's stale delay of 15 minutes.
	r, err := st.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.NotNil(t, r.TraceID)
	facts, err := st.SpanTurnFactsByTrace(ctx, *r.TraceID)
	require.NoError(t, err)
	sk := trace.BuildSkeleton(*r.TraceID, facts, time.Now().UnixNano(), 15*time.Minute)
	require.False(t, sk.Open, "no span of the trace is shown running")
	failed, why := sk.Failure()
	require.GreaterOrEqual(t, failed, int32(0))
	require.Equal(t, "fetch", sk.Facts[failed].Name)
	require.Contains(t, why, "its process stopped before the span ended")
}

// TestSpansOfAnApprovedRunAreNotEndedAsOrphans: a run that stops at an interrupt and goes on
// once approved, in one healthy process: its resumed execution must not take the first
// execution's spans for a dead process's. Every span of the run ends, and none carries the
// takeover's mark or its error status (seen on #27's scale test, with the resume on another
// worker).
func TestSpansOfAnApprovedRunAreNotEndedAsOrphans(t *testing.T) {
	ctx := context.Background()
	reg := engine.NewRegistry()
	scripted.DefineFunc(reg, "ask/model", func(req *engine.ModelRequest) (scripted.Turn, error) {
		// Longer than the processor's start delay, so that the generate and model spans are
		// stored as running before they end.
		time.Sleep(2 * trace.StartDelay)
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(scripted.ToolCall("confirm", "c1", map[string]any{})), nil
		}
		return scripted.Text("confirmed"), nil
	})
	confirm := engine.DefineTool(reg, "confirm", "Asks first.", func(tc *engine.ToolContext, _ struct{}) (string, error) {
		if !tc.IsResumed() {
			return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": "ok?"}})
		}
		return "done", nil
	})
	engine.DefineFlow(reg, "ask", func(ctx context.Context, _ struct{}) (string, error) {
		resp, err := engine.Generate(ctx, reg, engine.WithModelName("ask/model"), engine.WithPrompt("go"), engine.WithTools(confirm))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	svcs, err := services.Start(ctx, services.Config{Pool: storetest.NewPool(t), Registry: reg,
		Runs:    runs.Config{Workers: 2, LeaseTTL: time.Second},
		Tracing: services.Tracing{NoForward: true, FlushInterval: time.Minute}})
	require.NoError(t, err)
	defer svcs.Stop()
	st := svcs.Store
	run, err := svcs.Runs.StartRun(ctx, runs.StartParams{Action: "/flow/ask", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	var it *store.Interrupt
	require.Eventually(t, func() bool {
		list, err := st.InterruptListByRun(ctx, run.ID)
		require.NoError(t, err)
		if len(list) == 1 {
			it = list[0]
		}
		return it != nil
	}, 60*time.Second, 20*time.Millisecond)
	_, err = svcs.Runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err := st.RunGet(ctx, run.ID)
		require.NoError(t, err)
		return r.Status == store.RunSucceeded
	}, 60*time.Second, 20*time.Millisecond)
	marked := func() []string {
		var names []string
		rows, err := st.Pool().Query(ctx, `SELECT name FROM spans WHERE run_id = $1 AND attributes::jsonb ? 'loupe.span.ended_by_takeover'`, run.ID)
		require.NoError(t, err)
		for rows.Next() {
			var name string
			require.NoError(t, rows.Scan(&name))
			names = append(names, name)
		}
		require.NoError(t, rows.Err())
		return names
	}
	// The first execution's span ends are still in its span processor (a minute's flush
	// interval here), as they may be in another worker's when the resume runs elsewhere.
	require.Empty(t, marked(), "spans ended as a dead process's although none died")
	svcs.Stop() // flushes the span processor
	spans, err := st.SpansRunningByRun(ctx, run.ID)
	require.NoError(t, err)
	require.Empty(t, spans, "every span of the run ended")
	require.Empty(t, marked())
}
