package experiments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(storetest.LeakOptions(),
		// http.DefaultTransport's idle connections to a Genkit app's reflection server.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)...)
}

// ShopIn is the shop flow's input.
type ShopIn struct {
	Order int `json:"order"`
}

// OrderIn is the tools' input.
type OrderIn struct {
	Order int `json:"order"`
}

// shop is a 3-turn agent: it looks the order up, refunds it (which asks a person), then answers.
// effects counts the real executions of its tools.
type shop struct {
	reg     *engine.Registry
	effects atomic.Int64
}

func defineShop(t *testing.T) *shop {
	s := &shop{reg: engine.NewRegistry()}
	lookup := engine.DefineTool(s.reg, "lookup", "Looks an order up.", func(tc *engine.ToolContext, in OrderIn) (string, error) {
		s.effects.Add(1)
		return fmt.Sprintf("order %d: 2 books", in.Order), nil
	})
	refund := engine.DefineTool(s.reg, "refund", "Refunds an order once a person approved it.", func(tc *engine.ToolContext, in OrderIn) (string, error) {
		if !tc.IsResumed() {
			return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": fmt.Sprintf("Refund order %d?", in.Order)}})
		}
		s.effects.Add(1)
		return fmt.Sprintf("refunded %d", in.Order), nil
	})
	script := func(answer func(order int, outs []string) string) func(*engine.ModelRequest) (scripted.Turn, error) {
		return func(req *engine.ModelRequest) (scripted.Turn, error) {
			var in ShopIn
			if err := json.Unmarshal([]byte(req.Messages[0].Text()), &in); err != nil {
				return scripted.Turn{}, err
			}
			var outs []string
			for _, m := range req.Messages {
				for _, p := range m.Content {
					if p.ToolResponse != nil {
						b, _ := json.Marshal(p.ToolResponse.Output)
						outs = append(outs, string(b))
					}
				}
			}
			switch scripted.ModelTurns(req.Messages) {
			case 0:
				return scripted.Reply(scripted.ToolCall("lookup", "lk", OrderIn(in))).WithUsage(100, 10), nil
			case 1:
				return scripted.Reply(scripted.ToolCall("refund", "rf", OrderIn(in))).WithUsage(100, 10), nil
			}
			return scripted.Text(answer(in.Order, outs)).WithUsage(100, 10), nil
		}
	}
	scripted.DefineFunc(s.reg, "shop/model", script(func(order int, outs []string) string {
		return fmt.Sprintf("done %d: %s", order, strings.Join(outs, ", "))
	}))
	// shop/terse answers badly for even orders: what a worse model or prompt would do.
	scripted.DefineFunc(s.reg, "shop/terse", script(func(order int, outs []string) string {
		if order%2 == 0 {
			return "ok"
		}
		return fmt.Sprintf("done %d: %s", order, strings.Join(outs, ", "))
	}))
	engine.DefineFlow(s.reg, "shop", func(ctx context.Context, in ShopIn) (string, error) {
		b, _ := json.Marshal(in)
		resp, err := engine.Generate(ctx, s.reg, engine.WithModelName("shop/model"), engine.WithPrompt(string(b)),
			engine.WithTools(lookup, refund))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	return s
}

type harness struct {
	t    *testing.T
	pool *pgxpool.Pool
	st   *store.Store
	shop *shop
	runs *runs.Service
	exp  *experiments.Service
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, pool: storetest.NewPool(t), shop: defineShop(t)}
	h.st = store.New(h.pool)
	var err error
	h.runs, err = runs.New(runs.Config{Workers: 8, LeaseTTL: 2 * time.Second}, h.st, h.shop.reg)
	require.NoError(t, err)
	require.NoError(t, h.runs.Start(context.Background()))
	t.Cleanup(h.runs.Stop)
	h.exp = experiments.New(experiments.Config{LeaseTTL: 2 * time.Second}, h.st, h.runs)
	return h
}

// recordRuns runs the shop on each order and approves its refund: the recordings.
func (h *harness) recordRuns(orders ...int) []*store.Run {
	ctx := context.Background()
	var out []*store.Run
	for _, o := range orders {
		in, _ := json.Marshal(ShopIn{o})
		run, err := h.runs.StartRun(ctx, runs.StartParams{Action: "/flow/shop", Input: in})
		require.NoError(h.t, err)
		run = h.wait(run.ID, store.RunInterrupted)
		its, err := h.st.InterruptListByRun(ctx, run.ID)
		require.NoError(h.t, err)
		require.Len(h.t, its, 1)
		_, err = h.runs.Resolve(ctx, runs.ResolveParams{InterruptID: its[0].ID, Action: "approve", Actor: "judy"})
		require.NoError(h.t, err)
		out = append(out, h.wait(run.ID, store.RunSucceeded))
	}
	return out
}

// recordRunsB is recordRuns for a benchmark: the recordings' ids.
func (h *harness) recordRunsB(b *testing.B, orders ...int) []uuid.UUID {
	ctx := context.Background()
	var out []uuid.UUID
	wait := func(id uuid.UUID, status string) {
		require.Eventually(b, func() bool {
			run, err := h.st.RunGet(ctx, id)
			return err == nil && run.Status == status
		}, 20*time.Second, 10*time.Millisecond)
	}
	for _, o := range orders {
		in, _ := json.Marshal(ShopIn{o})
		run, err := h.runs.StartRun(ctx, runs.StartParams{Action: "/flow/shop", Input: in})
		require.NoError(b, err)
		wait(run.ID, store.RunInterrupted)
		its, err := h.st.InterruptListByRun(ctx, run.ID)
		require.NoError(b, err)
		_, err = h.runs.Resolve(ctx, runs.ResolveParams{InterruptID: its[0].ID, Action: "approve", Actor: "judy"})
		require.NoError(b, err)
		wait(run.ID, store.RunSucceeded)
		out = append(out, run.ID)
	}
	return out
}

func (h *harness) wait(id uuid.UUID, status string) *store.Run {
	h.t.Helper()
	var run *store.Run
	require.Eventually(h.t, func() bool {
		var err error
		run, err = h.st.RunGet(context.Background(), id)
		return err == nil && run.Status == status
	}, 20*time.Second, 10*time.Millisecond, "run %s never became %s", id, status)
	return run
}

// dataset makes a dataset of the runs.
func (h *harness) dataset(name string, recorded []*store.Run) *store.Dataset {
	ctx := context.Background()
	examples, err := h.exp.FromRuns(ctx, store.RunListParams{Action: "/flow/shop", Status: store.RunSucceeded}, len(recorded))
	require.NoError(h.t, err)
	require.Len(h.t, examples, len(recorded))
	d, err := h.exp.CreateDataset(ctx, name, "", "test", examples)
	require.NoError(h.t, err)
	return d
}

func (h *harness) drive(p experiments.StartParams) *experiments.Summary {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := h.exp.Start(ctx, p)
	require.NoError(h.t, err)
	e, err = h.exp.Drive(ctx, e.ID, nil)
	require.NoError(h.t, err)
	require.Equal(h.t, store.ExperimentFinished, e.Status)
	sum, err := h.exp.Summarise(ctx, e, "")
	require.NoError(h.t, err)
	return sum
}

// An experiment over recorded runs serves every tool from the recording and applies the recorded
// approvals: it runs each example to the end, scores it, and executes no tool.
func TestAnExperimentNeverRepeatsAnEffect(t *testing.T) {
	h := newHarness(t)
	recorded := h.recordRuns(1, 2, 3, 4)
	require.EqualValues(t, 8, h.shop.effects.Load(), "each recorded run looked up and refunded once")
	d := h.dataset("shop", recorded)
	require.Equal(t, 1, d.Version)
	require.Equal(t, 4, d.Examples)

	sum := h.drive(experiments.StartParams{Name: "base", Dataset: "shop", Action: "/flow/shop",
		Evaluators: []string{"exact", "trajectory", "succeeded", "turns"}})
	require.EqualValues(t, 8, h.shop.effects.Load(), "the experiment executed a tool")
	require.Equal(t, 4, sum.Totals.Scored)
	require.Equal(t, 4, sum.Totals.Passed, "%+v", sum.Rows)
	require.InDelta(t, 1.0, sum.Totals.PassRate, 1e-9)
	require.EqualValues(t, 4*3*100, sum.Totals.InputTokens)
	require.NotNil(t, sum.Totals.P50Ms)
	for _, row := range sum.Rows {
		require.Len(t, row.Scores, 4)
		require.NotNil(t, row.RunID)
		run, err := h.st.RunGet(context.Background(), *row.RunID)
		require.NoError(t, err)
		require.Equal(t, sum.Experiment.ID.String(), run.Labels[store.LabelExperiment])
		require.Equal(t, row.SourceRunID, run.ReplayOf, "the example's run is a re-run of its recording")
		calls, err := h.st.ToolCallList(context.Background(), run.ID)
		require.NoError(t, err)
		require.Len(t, calls, 2)
		for _, c := range calls {
			require.Equal(t, store.ToolSourceCassette, c.Source, "%s was not served from the recording", c.Tool)
		}
		its, err := h.st.InterruptListByRun(context.Background(), run.ID)
		require.NoError(t, err)
		require.Len(t, its, 1)
		require.Equal(t, store.InterruptApproved, its[0].Status)
		require.Equal(t, "judy", *its[0].ResolvedBy, "the recorded reviewer's decision was applied")
	}
}

// An example whose input makes the agent call a tool the recording does not have fails, with the
// reason, and no tool runs; with tools live the same example runs its tools.
func TestACallNotInTheRecordingFailsTheExample(t *testing.T) {
	h := newHarness(t)
	recorded := h.recordRuns(1)
	d := h.dataset("shop", recorded)
	ctx := context.Background()
	examples, err := h.st.ExampleList(ctx, d.ID, d.Version)
	require.NoError(t, err)
	edited := store.ExampleParams{Input: json.RawMessage(`{"order": 9}`), Reference: examples[0].Reference, SourceRunID: examples[0].SourceRunID}
	v, err := h.exp.Change(ctx, d, store.DatasetChange{Edit: map[uuid.UUID]store.ExampleParams{examples[0].Key: edited}})
	require.NoError(t, err)
	require.Equal(t, 2, v)
	before := h.shop.effects.Load()

	sum := h.drive(experiments.StartParams{Dataset: "shop", Action: "/flow/shop", Evaluators: []string{"succeeded"}})
	require.Equal(t, before, h.shop.effects.Load())
	require.Equal(t, 0, sum.Totals.Passed)
	row := sum.Rows[0]
	require.Equal(t, store.RunFailed, *row.RunStatus)
	require.Contains(t, row.Scores[0].Explanation, "is not in the recording")
	require.Contains(t, row.Scores[0].Explanation, `{"order":9}`)

	// Version 1 still holds the example as it was, and passes.
	sum = h.drive(experiments.StartParams{Dataset: "shop", Version: 1, Action: "/flow/shop", Evaluators: []string{"succeeded"}})
	require.Equal(t, 1, sum.Totals.Passed)
	require.JSONEq(t, `{"order": 1}`, string(sum.Rows[0].Input))

	// Live tools run the lookup; the refund asks a person, as it would in production.
	sum = h.drive(experiments.StartParams{Dataset: "shop", Action: "/flow/shop", Tools: "live", Evaluators: []string{"succeeded"}})
	require.Equal(t, before+1, h.shop.effects.Load())
	require.Equal(t, store.RunInterrupted, *sum.Rows[0].RunStatus)
	// Scored as waiting, the run is cancelled: its question leaves the reviewers' inbox.
	run, err := h.st.RunGet(ctx, *sum.Rows[0].RunID)
	require.NoError(t, err)
	require.Equal(t, store.RunCancelled, run.Status)
	its, err := h.st.InterruptListByRun(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, its, 1)
	require.NotEqual(t, store.InterruptPending, its[0].Status)
}

// An experiment with another model, against a baseline: the examples it breaks come first, marked
// as regressions, with the first difference named.
func TestAnExperimentAgainstItsBaselineListsRegressionsFirst(t *testing.T) {
	h := newHarness(t)
	recorded := h.recordRuns(1, 2, 3, 4)
	h.dataset("shop", recorded)
	base := h.drive(experiments.StartParams{Name: "base", Dataset: "shop", Action: "/flow/shop", Evaluators: []string{"exact"}})
	require.Equal(t, 4, base.Totals.Passed)

	sum := h.drive(experiments.StartParams{Name: "terse", Dataset: "shop", Action: "/flow/shop", Evaluators: []string{"exact"},
		Overrides: &runs.Overrides{Model: "shop/terse"}, Baseline: "base"})
	require.EqualValues(t, 8, h.shop.effects.Load())
	require.Equal(t, 2, sum.Totals.Passed)
	require.Equal(t, 2, sum.Regressions)
	require.NotNil(t, sum.BaselineTotals)
	require.Equal(t, 4, sum.BaselineTotals.Passed)
	require.True(t, sum.Rows[0].Regression)
	require.True(t, sum.Rows[1].Regression)
	require.False(t, sum.Rows[2].Regression)
	require.Contains(t, sum.Rows[0].Scores[0].Explanation, `"ok"`)
	require.NotNil(t, sum.Rows[0].Baseline)
}

// A program's own evaluator (loupe.DefineEvaluator) is listed beside the built-ins, is given
// each run's case (output, status, its tool calls and the recording's), and its verdict is stored
// with its explanation and the trace of its span; its error fails the example with the error.
func TestAProgramsEvaluatorScoresEachRun(t *testing.T) {
	h := newHarness(t)
	app := bridge.NewApp(h.shop.reg).(*loupe.App)
	var seen atomic.Pointer[loupe.EvalCase]
	loupe.DefineEvaluator(app, "refunded", "The run refunded the order it was asked about.",
		func(_ context.Context, c *loupe.EvalCase) (*loupe.EvalScore, error) {
			seen.Store(c)
			for _, call := range c.ToolCalls {
				if call.Tool == "refund" {
					return &loupe.EvalScore{Pass: true, Explanation: "refund " + string(call.Input)}, nil
				}
			}
			return &loupe.EvalScore{Explanation: "no refund"}, nil
		})
	loupe.DefineEvaluator(app, "broken", "Always fails to evaluate.", func(context.Context, *loupe.EvalCase) (*loupe.EvalScore, error) {
		return nil, fmt.Errorf("the rubric file is missing")
	})
	var names []string
	for _, ev := range h.exp.Evaluators() {
		names = append(names, ev.Name)
	}
	require.Contains(t, names, "refunded")
	require.Contains(t, names, "trajectory")

	h.dataset("shop", h.recordRuns(5))
	sum := h.drive(experiments.StartParams{Dataset: "shop", Action: "/flow/shop", Evaluators: []string{"refunded", "broken"}})
	require.Equal(t, 1, sum.Totals.Scored)
	require.Equal(t, 0, sum.Totals.Passed, "the broken evaluator fails the example")
	require.Equal(t, 1, sum.Totals.Evaluators["refunded"].Passed)
	scores := map[string]store.Score{}
	for _, sc := range sum.Rows[0].Scores {
		scores[sc.Evaluator] = sc
	}
	require.True(t, scores["refunded"].Pass)
	require.Equal(t, `refund {"order":5}`, scores["refunded"].Explanation)
	require.False(t, scores["broken"].Pass)
	require.Contains(t, scores["broken"].Explanation, "the evaluator failed")
	require.Contains(t, scores["broken"].Explanation, "the rubric file is missing")
	c := seen.Load()
	require.Equal(t, "succeeded", c.Status)
	require.JSONEq(t, `"done 5: \"order 5: 2 books\", \"refunded 5\""`, string(c.Output))
	require.Len(t, c.ReferenceToolCalls, 2)
	require.Equal(t, 3, c.ReferenceTurns)
}
