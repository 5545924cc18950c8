package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// transferFlow is a durable run whose front model hands the conversation to a prompt used as a
// tool (seed 000 §3.1, "/prompt/${name} 被当工具用的 prompt"): the prompt's model then calls a
// refund tool, which asks a reviewer first when the input says so.
type transferFlow struct {
	*replayBundle
	front, billing atomic.Int64
}

func setupTransferFlow(t *testing.T) *transferFlow {
	t.Helper()
	tf := &transferFlow{replayBundle: &replayBundle{bundle: setup(t, 0)}}
	reg := engine.NewRegistry()
	engine.DefineTool(reg, "tfRefund", "Refunds a bill.", func(tc *engine.ToolContext, in struct {
		Ask bool `json:"ask"`
	}) (string, error) {
		if in.Ask && !tc.IsResumed() {
			return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": "refund?"}})
		}
		return "refunded", nil
	})
	engine.DefinePrompt(reg, "tfBilling", "Hands the conversation to billing.", func(in struct {
		Topic string `json:"topic"`
	}) (string, error) {
		return "Billing question about " + in.Topic, nil
	}, engine.PromptConfig{Model: "tf/billing", System: "You handle billing.", Tools: []string{"tfRefund"}})
	scripted.DefineFunc(reg, "tf/front", func(req *engine.ModelRequest) (scripted.Turn, error) {
		tf.front.Add(1)
		return scripted.Reply(scripted.ToolCall("tfBilling", "b0", map[string]any{"topic": "a refund"})), nil
	})
	scripted.DefineFunc(reg, "tf/billing", func(req *engine.ModelRequest) (scripted.Turn, error) {
		tf.billing.Add(1)
		last := req.Messages[len(req.Messages)-1]
		if len(last.Content) > 0 && last.Content[0].ToolResponse != nil && last.Content[0].ToolResponse.Name == "tfRefund" {
			return scripted.Text("refund done"), nil
		}
		ask := false
		for _, m := range req.Messages {
			ask = ask || m.Role == engine.RoleUser && m.Text() == "ask"
		}
		return scripted.Reply(scripted.ToolCall("tfRefund", "r0", map[string]any{"ask": ask})), nil
	})
	engine.DefineFlow(reg, "transferFlow", func(ctx context.Context, prompt string) (string, error) {
		resp, err := engine.Generate(ctx, reg, engine.WithModelName("tf/front"), engine.WithPrompt(prompt), engine.WithToolNames("tfBilling"))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	svc, err := runs.New(runs.Config{Workers: 2, LeaseTTL: time.Second, Logger: testLogger()}, tf.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	tf.svc = svc
	return tf
}

func (tf *transferFlow) start(t *testing.T, prompt string) *store.Run {
	t.Helper()
	in, _ := json.Marshal(prompt)
	run, err := tf.svc.StartRun(context.Background(), runs.StartParams{Action: "transferFlow", Input: in})
	require.NoError(t, err)
	return run
}

// history is the run's stored history as role@turn, with "+pre" on the transfer's preamble.
func (tf *transferFlow) history(t *testing.T, id uuid.UUID) []string {
	t.Helper()
	var out []string
	for i, m := range tf.messages(t, id) {
		require.Equal(t, i, m.Seq, "one history, no gaps")
		var msg engine.Message
		require.NoError(t, json.Unmarshal(m.Content, &msg))
		s := fmt.Sprintf("%s@%d", m.Role, m.Turn)
		if v, _ := msg.Metadata[engine.MetaPreamble].(bool); v {
			s += "+pre"
		}
		out = append(out, s)
	}
	return out
}

// TestRunRecordsTheHistoryATransferToAPromptRewrote: the stored history is the one the turns after
// the transfer ran with (the prompt's preamble in front, tagged), so the conversation view, a
// resume and a replay start from what the model saw; an exact replay reproduces it.
func TestRunRecordsTheHistoryATransferToAPromptRewrote(t *testing.T) {
	t.Parallel()
	tf := setupTransferFlow(t)
	run := tf.settle(t, tf.start(t, "my bill is wrong").ID, store.RunSucceeded)
	require.JSONEq(t, `"refund done"`, string(run.Output))
	require.EqualValues(t, 1, tf.front.Load())
	require.EqualValues(t, 2, tf.billing.Load(), "the turns after the transfer use the prompt's model")
	require.Equal(t, []string{"system@0+pre", "user@0+pre", "user@0", "model@0", "tool@0", "model@1", "tool@1", "model@2"}, tf.history(t, run.ID))

	rep := tf.replay(t, runs.ReplayParams{RunID: run.ID, Mode: store.ReplayExact})
	done := tf.settle(t, rep.ID, store.RunSucceeded)
	require.JSONEq(t, string(run.Output), string(done.Output))
	require.Nil(t, tf.divergence(t, rep.ID))
	requireSameMessages(t, tf.messages(t, run.ID), tf.messages(t, rep.ID))
}

// TestRunInterruptedAfterATransferResumesWithThePrompt: a tool of the prompt the conversation was
// transferred to interrupts; after the reviewer's approval the run resumes with the prompt's model
// and tools (Genkit's resume would start again from the caller's model: its request is rebuilt by
// the caller), and the front model is not asked again.
func TestRunInterruptedAfterATransferResumesWithThePrompt(t *testing.T) {
	t.Parallel()
	tf := setupTransferFlow(t)
	run := tf.settle(t, tf.start(t, "ask").ID, store.RunInterrupted)
	pending := tf.pending(t, run.ID)
	require.Len(t, pending, 1)
	require.Equal(t, "tfRefund", pending[0].Tool)
	front, billing := tf.front.Load(), tf.billing.Load()
	tf.resolve(t, pending[0], runs.ActionApprove, "")
	done := tf.settle(t, run.ID, store.RunSucceeded)
	require.JSONEq(t, `"refund done"`, string(done.Output))
	require.Equal(t, front, tf.front.Load(), "the front model is not asked again")
	require.Equal(t, billing+1, tf.billing.Load(), "the prompt's model answers the resumed turn")
	require.Equal(t, []string{"system@0+pre", "user@0+pre", "user@0", "model@0", "tool@0", "model@1", "tool@1", "model@2"}, tf.history(t, run.ID))
}
