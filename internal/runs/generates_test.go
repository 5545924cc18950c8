package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// twoGenerates is a bundle whose registry has /flow/twoGenerates: a flow that calls Generate twice,
// each call a tool turn (ref "r0" both times) and an answer, the second asking first for a
// reviewer's approval when the input says so.
type twoGenerates struct {
	*replayBundle
	lookups atomic.Int64
}

func setupTwoGenerates(t *testing.T) *twoGenerates {
	t.Helper()
	tg := &twoGenerates{replayBundle: &replayBundle{bundle: setup(t, 0)}}
	reg := engine.NewRegistry()
	lookup := engine.DefineTool(reg, "tgLookup", "Looks something up.", func(tc *engine.ToolContext, in struct {
		Q string `json:"q"`
	}) (string, error) {
		tg.lookups.Add(1)
		return "found " + in.Q, nil
	})
	approve := engine.DefineTool(reg, "tgApprove", "Asks a person.", func(tc *engine.ToolContext, in struct {
		Q string `json:"q"`
	}) (string, error) {
		if !tc.IsResumed() {
			return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": "approve " + in.Q + "?"}})
		}
		return "approved " + in.Q, nil
	})
	// tg/model: a tool turn, then an answer naming the prompt and the tool's output; tg/alt the
	// same, its answers marked "alt".
	script := func(mark string) scripted.ScriptFunc {
		return func(req *engine.ModelRequest) (scripted.Turn, error) {
			return tg.script(mark, req), nil
		}
	}
	scripted.DefineFunc(reg, "tg/model", script(""))
	scripted.DefineFunc(reg, "tg/alt", script("alt "))
	engine.DefineFlow(reg, "twoGenerates", func(ctx context.Context, approval bool) (string, error) {
		first, err := engine.Generate(ctx, reg, engine.WithModelName("tg/model"), engine.WithPrompt("first"), engine.WithTools(lookup))
		if err != nil {
			return "", err
		}
		second := "second"
		if approval {
			second = "second approve"
		}
		resp, err := engine.Generate(ctx, reg, engine.WithModelName("tg/model"), engine.WithPrompt(second), engine.WithTools(lookup, approve))
		if err != nil {
			return "", err
		}
		if resp.FinishReason == engine.FinishReasonInterrupted {
			return "", nil
		}
		return first.Text() + " | " + resp.Text(), nil
	})
	svc, err := runs.New(runs.Config{Workers: 2, LeaseTTL: time.Second, Logger: testLogger()}, tg.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	tg.svc = svc
	return tg
}

func (tg *twoGenerates) script(mark string, req *engine.ModelRequest) scripted.Turn {
	tg.modelCalls.Add(1)
	prompt := req.Messages[0].Text()
	if scripted.ModelTurns(req.Messages) == 0 {
		tool := "tgLookup"
		if prompt == "second approve" {
			tool = "tgApprove"
		}
		return scripted.Reply(scripted.ToolCall(tool, "r0", map[string]any{"q": prompt})).WithUsage(10, 2)
	}
	var out string
	for _, m := range req.Messages {
		for _, p := range m.Content {
			if p.ToolResponse != nil {
				b, _ := json.Marshal(p.ToolResponse.Output)
				_ = json.Unmarshal(b, &out)
			}
		}
	}
	return scripted.Text(mark+prompt+": "+out).WithUsage(10, 2)
}

func (tg *twoGenerates) startFlow(t *testing.T, approval bool) *store.Run {
	t.Helper()
	run, err := tg.svc.StartRun(context.Background(), runs.StartParams{Action: "twoGenerates", Input: json.RawMessage(fmt.Sprint(approval))})
	require.NoError(t, err)
	return run
}

// TestFlowCallingGenerateTwiceIsRecordedWhole: the second Generate call's history, turns, model
// calls and tool calls follow the first's instead of overwriting them, its tool call gets its own
// idempotency key, and an exact replay of the run matches it.
func TestFlowCallingGenerateTwiceIsRecordedWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := setupTwoGenerates(t)
	run := tg.settle(t, tg.startFlow(t, false).ID, store.RunSucceeded)
	require.JSONEq(t, `"first: found first | second: found second"`, string(run.Output))
	require.EqualValues(t, 2, tg.lookups.Load(), "each call's tool ran, though both used ref r0")
	require.Equal(t, 4, run.Turns)
	require.EqualValues(t, 40, run.InputTokens)

	msgs := tg.messages(t, run.ID)
	var roles []string
	for i, m := range msgs {
		require.Equal(t, i, m.Seq, "one history, no gaps")
		roles = append(roles, fmt.Sprintf("%s@%d", m.Role, m.Turn))
	}
	require.Equal(t, []string{"user@0", "model@0", "tool@0", "model@1", "user@2", "model@2", "tool@2", "model@3"}, roles)

	calls, err := tg.store.ModelCallList(ctx, run.ID)
	require.NoError(t, err)
	var turns []int
	for _, c := range calls {
		turns = append(turns, c.Turn)
	}
	require.Equal(t, []int{0, 1, 2, 3}, turns)
	tools, err := tg.store.ToolCallList(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, tools, 2)
	require.Equal(t, []int{0, 2}, []int{tools[0].Turn, tools[1].Turn})
	require.Equal(t, store.ToolCallCompleted, tools[1].Status)
	require.Equal(t, run.ID.String()+":r0", tools[0].IdempotencyKey)
	require.Equal(t, run.ID.String()+":g1:r0", tools[1].IdempotencyKey)

	rep := tg.replay(t, runs.ReplayParams{RunID: run.ID, Mode: store.ReplayExact})
	done := tg.settle(t, rep.ID, store.RunSucceeded)
	require.JSONEq(t, string(run.Output), string(done.Output))
	require.Nil(t, tg.divergence(t, rep.ID))
	requireSameMessages(t, msgs, tg.messages(t, rep.ID))
}

// TestRunInterruptedInASecondGenerateResumesThere: a run interrupted inside its flow's second
// Generate call resumes there. The first call runs again from its records (its model is not called
// and its tool does not run again), the second is handed its own history and the reviewer's
// decision, and the history stays one.
func TestRunInterruptedInASecondGenerateResumesThere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := setupTwoGenerates(t)
	run := tg.settle(t, tg.startFlow(t, true).ID, store.RunInterrupted)
	pending := tg.pending(t, run.ID)
	require.Len(t, pending, 1)
	require.Equal(t, 2, pending[0].Turn, "the interrupt is at the run's turn, not the call's")
	require.Equal(t, "tgApprove", pending[0].Tool)
	models := tg.modelCalls.Load()
	tg.resolve(t, pending[0], runs.ActionApprove, "")
	done := tg.settle(t, run.ID, store.RunSucceeded)
	require.JSONEq(t, `"first: found first | second approve: approved second approve"`, string(done.Output))
	require.EqualValues(t, 1, tg.lookups.Load(), "the first call's tool was reused, not run again")
	require.EqualValues(t, 1, tg.modelCalls.Load()-models, "only the second call's last turn called the model")
	require.Equal(t, 4, done.Turns)

	var roles []string
	for i, m := range tg.messages(t, run.ID) {
		require.Equal(t, i, m.Seq)
		roles = append(roles, fmt.Sprintf("%s@%d/g%d", m.Role, m.Turn, m.Generation))
	}
	require.Equal(t, []string{"user@0/g0", "model@0/g0", "tool@0/g0", "model@1/g0",
		"user@2/g1", "model@2/g1", "tool@2/g1", "model@3/g1"}, roles)
	tools, err := tg.store.ToolCallList(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, tools, 2)
	require.Equal(t, store.ToolCallCompleted, tools[1].Status)
	require.Equal(t, run.ID.String()+":g1:r0", tools[1].IdempotencyKey)
}

// TestRerunModelOverrideReachesEveryGenerateCall: a re-execution with another model gives it to
// each of the flow's generate calls, not only the first.
func TestRerunModelOverrideReachesEveryGenerateCall(t *testing.T) {
	t.Parallel()
	tg := setupTwoGenerates(t)
	orig := tg.settle(t, tg.startFlow(t, false).ID, store.RunSucceeded)
	rerun := tg.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{Model: "tg/alt"}})
	done := tg.settle(t, rerun.ID, store.RunSucceeded)
	require.JSONEq(t, `"alt first: found first | alt second: found second"`, string(done.Output))
}
