package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// defineBenchAgent registers /flow/bench3: a 3-turn scripted run (two tool turns and an answer),
// and calls onModel at every model call with the number of model messages already in history.
func defineBenchAgent(r *engine.Registry, onModel func(turn int)) {
	lookup := engine.DefineTool(r, "lookup", "Looks something up.", func(tc *engine.ToolContext, in struct {
		Q string `json:"q"`
	}) (string, error) {
		return "answer to " + in.Q, nil
	})
	approve := engine.DefineTool(r, "approveStep", "Needs approval.", func(tc *engine.ToolContext, in struct {
		Q string `json:"q"`
	}) (string, error) {
		if !tc.IsResumed() {
			return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": "approve?"}})
		}
		return "approved", nil
	})
	scripted.DefineFunc(r, "bench/model", func(req *engine.ModelRequest) (scripted.Turn, error) {
		turn := scripted.ModelTurns(req.Messages)
		if onModel != nil {
			onModel(turn)
		}
		prompt := req.Messages[0].Text()
		switch {
		case turn == 0 && prompt == "approve":
			return scripted.Reply(scripted.ToolCall("approveStep", "a0", map[string]any{"q": "x"})), nil
		case turn < 2:
			return scripted.Reply(engine.NewTextPart("thinking"), scripted.ToolCall("lookup", fmt.Sprintf("l%d", turn), map[string]any{"q": "x"})).WithUsage(50, 10), nil
		}
		return scripted.Text("done").WithUsage(50, 10), nil
	})
	engine.DefineFlow(r, "noop", func(ctx context.Context, prompt string) (string, error) { return prompt, nil })
	engine.DefineFlow(r, "bench3", func(ctx context.Context, prompt string) (string, error) {
		resp, err := engine.Generate(ctx, r, engine.WithModelName("bench/model"), engine.WithPrompt(prompt), engine.WithTools(lookup, approve))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

func benchService(b *testing.B, workers int, onModel func(int)) (*runs.Service, *store.Store) {
	b.Helper()
	pool, err := pgxpool.New(context.Background(), storetest.NewURL(b)+"&pool_max_conns=40")
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	st := store.New(pool)
	reg := engine.NewRegistry()
	defineBenchAgent(reg, onModel)
	svc, err := runs.New(runs.Config{Workers: workers}, st, reg)
	require.NoError(b, err)
	require.NoError(b, svc.Start(context.Background()))
	b.Cleanup(svc.Stop)
	return svc, st
}

// BenchmarkRunsEndToEnd starts b.N 3-turn runs through the durable runner (persisted history,
// chunks, model and tool ledgers) and waits for all to succeed; runs/s is the sustained rate.
func BenchmarkRunsEndToEnd(b *testing.B) { benchRuns(b, "bench3", 3) }

// BenchmarkRunsNoopFlow is the runner's floor: a flow that returns at once, so that only the run
// row, the River job, the lease and the outcome are paid for.
func BenchmarkRunsNoopFlow(b *testing.B) { benchRuns(b, "noop", 0) }

func benchRuns(b *testing.B, action string, turns int) {
	svc, st := benchService(b, benchWorkers, nil)
	ctx := context.Background()
	input := json.RawMessage(`"go"`)
	b.ResetTimer()
	start := time.Now()
	// Eight clients start the runs, as API callers would.
	ids := make([]uuid.UUID, b.N)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := c; i < b.N; i += 8 {
				run, err := svc.StartRun(ctx, runs.StartParams{Action: action, Input: input})
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = run.ID
			}
		})
	}
	wg.Wait()
	for {
		var left int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM runs WHERE status <> 'succeeded'`).Scan(&left); err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
	var xacts int64
	if err := st.Pool().QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&xacts); err == nil {
		b.ReportMetric(float64(xacts)/float64(b.N), "xacts/run")
	}
	r, err := st.RunGet(ctx, ids[len(ids)-1])
	require.NoError(b, err)
	require.Equal(b, turns, r.Turns)
}

// BenchmarkResolveToResumedModelCall measures the time from resolving an interrupt to the
// resumed run's next model call, and reports its p50 and p99.
func BenchmarkResolveToResumedModelCall(b *testing.B) {
	var mu sync.Mutex
	var resolvedAt time.Time
	resumed := make(chan time.Duration, 1)
	svc, st := benchService(b, 4, func(turn int) {
		if turn == 1 {
			mu.Lock()
			at := resolvedAt
			mu.Unlock()
			resumed <- time.Since(at)
		}
	})
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		run, err := svc.StartRun(ctx, runs.StartParams{Action: "bench3", Input: json.RawMessage(`"approve"`)})
		require.NoError(b, err)
		var it *store.Interrupt
		for it == nil {
			list, err := st.InterruptListByRun(ctx, run.ID)
			require.NoError(b, err)
			if len(list) == 1 {
				r, err := st.RunGet(ctx, run.ID)
				require.NoError(b, err)
				if r.Status == store.RunInterrupted {
					it = list[0]
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		b.StartTimer()
		mu.Lock()
		resolvedAt = time.Now()
		mu.Unlock()
		_, err = svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "bench"})
		require.NoError(b, err)
		lat = append(lat, <-resumed)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// benchWorkers is the worker count of the throughput benchmarks.
var benchWorkers = 32
