package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

// replayBundle is a run service whose registry also has /flow/replayAgent, with counters that
// prove which model calls happened and a switch that changes one tool's output.
type replayBundle struct {
	*bundle
	// modelCalls counts every real call of the agent's models.
	modelCalls atomic.Int64
	// changeAt makes the lookup tool answer differently for that n (-1: never).
	changeAt atomic.Int64
	// confirmed counts the confirmation tool's real actions (its approved executions).
	confirmed atomic.Int64
}

// ReplayAgentInput sets how many turns the replay agent plays, and whether turn 1 asks for a
// confirmation.
type ReplayAgentInput struct {
	Turns   int  `json:"turns"`
	Confirm bool `json:"confirm,omitempty"`
}

// LookupIn is the lookup tool's input.
type LookupIn struct {
	N int `json:"n"`
}

func setupReplay(t *testing.T) *replayBundle {
	t.Helper()
	rb := &replayBundle{bundle: setup(t, 0)}
	rb.changeAt.Store(-1)
	reg := engine.NewRegistry()
	defineTestAgent(reg, rb.pool, "", "")
	rb.defineReplayAgent(reg)
	svc, err := runs.New(runs.Config{Workers: 2, LeaseTTL: time.Second}, rb.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	rb.svc = svc
	return rb
}

// defineReplayAgent registers a flow whose scripted model calls lookup once per turn until the
// last turn, which answers with every output it saw, streamed word by word.
func (rb *replayBundle) defineReplayAgent(r *engine.Registry) {
	lookup := engine.DefineTool(r, "lookup", "Looks a number up.", func(tc *engine.ToolContext, in LookupIn) (string, error) {
		if int64(in.N) == rb.changeAt.Load() {
			return fmt.Sprintf("changed-%d", in.N), nil
		}
		return fmt.Sprintf("value-%d", in.N), nil
	})
	confirm := engine.DefineTool(r, "rpConfirm", "Asks a person first.", func(tc *engine.ToolContext, in ConfirmIn) (ConfirmOut, error) {
		if !tc.IsResumed() {
			return ConfirmOut{}, tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": fmt.Sprintf("Confirm %d?", in.Amount)}})
		}
		rb.confirmed.Add(1)
		return ConfirmOut{OK: true, Amount: in.Amount}, nil
	})
	script := func(name string) scripted.ScriptFunc {
		return func(req *engine.ModelRequest) (scripted.Turn, error) {
			rb.modelCalls.Add(1)
			var in ReplayAgentInput
			for _, m := range req.Messages {
				if m.Role == engine.RoleUser {
					if err := json.Unmarshal([]byte(m.Text()), &in); err != nil {
						return scripted.Turn{}, err
					}
					break
				}
			}
			turn := scripted.ModelTurns(req.Messages)
			if turn < in.Turns-1 {
				if in.Confirm && turn == 1 {
					return scripted.Reply(scripted.ToolCall("rpConfirm", "k1", map[string]any{"amount": 3})).WithUsage(10+turn, 5), nil
				}
				return scripted.Reply(scripted.ToolCall("lookup", fmt.Sprintf("l%d", turn), map[string]any{"n": turn})).WithUsage(10+turn, 5), nil
			}
			var seen []string
			for _, m := range req.Messages {
				for _, p := range m.Content {
					if p.ToolResponse != nil {
						out, _ := json.Marshal(p.ToolResponse.Output)
						seen = append(seen, string(out))
					}
				}
			}
			text := name + " done: " + strings.Join(seen, " ")
			return scripted.Text(text).WithChunks(words(text)...).WithUsage(20, 7), nil
		}
	}
	scripted.DefineFunc(r, "test/replay", script("replay"))
	scripted.DefineFunc(r, "test/other", script("other"))
	engine.DefineFlow(r, "replayAgent", func(ctx context.Context, in ReplayAgentInput) (string, error) {
		prompt, _ := json.Marshal(in)
		resp, err := engine.Generate(ctx, r, engine.WithModelName("test/replay"), engine.WithPrompt(string(prompt)),
			engine.WithTools(lookup, confirm), engine.WithMaxTurns(10))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

func words(text string) [][]*engine.Part {
	var chunks [][]*engine.Part
	for _, w := range strings.SplitAfter(text, " ") {
		chunks = append(chunks, []*engine.Part{engine.NewTextPart(w)})
	}
	return chunks
}

func (rb *replayBundle) startAgent(t *testing.T, in ReplayAgentInput) *store.Run {
	t.Helper()
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	run, err := rb.svc.StartRun(context.Background(), runs.StartParams{Action: "replayAgent", Input: raw, CreatedBy: "tester"})
	require.NoError(t, err)
	return run
}

func (rb *replayBundle) replay(t *testing.T, p runs.ReplayParams) *store.Run {
	t.Helper()
	if p.CreatedBy == "" {
		p.CreatedBy = "tester"
	}
	run, err := rb.svc.Replay(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, store.RunQueued, run.Status)
	return run
}

// settle waits until the run ends or waits for a reviewer, and checks it reached status, showing
// the run's error when it did not.
func (rb *replayBundle) settle(t *testing.T, id uuid.UUID, status string) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = rb.store.RunGet(context.Background(), id)
		require.NoError(t, err)
		return run.Status != store.RunQueued && run.Status != store.RunRunning
	}, 60*time.Second, 20*time.Millisecond, "run %s never settled", id)
	require.Equal(t, status, run.Status, "run %s: %s", id, run.Error)
	return run
}

func (rb *replayBundle) messages(t *testing.T, id uuid.UUID) []*store.RunMessage {
	t.Helper()
	msgs, err := rb.store.MessageList(context.Background(), id)
	require.NoError(t, err)
	return msgs
}

func (rb *replayBundle) divergence(t *testing.T, id uuid.UUID) *runs.Divergence {
	t.Helper()
	r, err := rb.store.ReplayGet(context.Background(), id)
	require.NoError(t, err)
	if len(r.Divergence) == 0 {
		return nil
	}
	var d runs.Divergence
	require.NoError(t, json.Unmarshal(r.Divergence, &d))
	return &d
}

// requireSameMessages asserts that two histories hold the same messages, byte for byte.
func requireSameMessages(t *testing.T, want, got []*store.RunMessage) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Seq, got[i].Seq)
		require.Equal(t, want[i].Turn, got[i].Turn, "turn of message %d", i)
		require.Equal(t, want[i].Role, got[i].Role, "role of message %d", i)
		require.Equal(t, string(want[i].Content), string(got[i].Content), "content of message %d", i)
	}
}

func modelChunks(t *testing.T, st *store.Store, id uuid.UUID) []string {
	t.Helper()
	chunks, err := st.ChunkList(context.Background(), id, 0, 0)
	require.NoError(t, err)
	var out []string
	for _, c := range chunks {
		if c.Role == string(engine.RoleModel) {
			out = append(out, fmt.Sprintf("%d/%d:%s", c.Turn, c.Index, c.Content))
		}
	}
	return out
}

func TestExactReplayOfFiveTurnRunIsIdenticalAndCallsNoModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.settle(t, rb.startAgent(t, ReplayAgentInput{Turns: 5}).ID, store.RunSucceeded)
	require.Equal(t, 5, orig.Turns)
	require.EqualValues(t, 5, rb.modelCalls.Load())

	rep := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact})
	require.Equal(t, orig.ID, *rep.ReplayOf)
	require.Equal(t, store.ReplayExact, *rep.ReplayMode)
	done := rb.settle(t, rep.ID, store.RunSucceeded)

	require.EqualValues(t, 5, rb.modelCalls.Load(), "an exact replay never invokes the model")
	requireSameMessages(t, rb.messages(t, orig.ID), rb.messages(t, rep.ID))
	require.JSONEq(t, string(orig.Output), string(done.Output))
	require.Equal(t, orig.Turns, done.Turns)
	require.Equal(t, orig.InputTokens, done.InputTokens, "the recorded usage is served too")
	require.Equal(t, modelChunks(t, rb.store, orig.ID), modelChunks(t, rb.store, rep.ID), "the recorded chunks are streamed again")
	require.Nil(t, rb.divergence(t, rep.ID))

	d, err := rb.svc.Diff(ctx, orig.ID, rep.ID)
	require.NoError(t, err)
	require.True(t, d.Equal, "first difference: %+v", d.First)

	l, err := rb.svc.Lineage(ctx, orig.ID)
	require.NoError(t, err)
	require.Nil(t, l.Of)
	require.Len(t, l.Derived, 1)
	require.Equal(t, rep.ID, l.Derived[0].RunID)
	require.Equal(t, "replay", l.Derived[0].Relation)
	l, err = rb.svc.Lineage(ctx, rep.ID)
	require.NoError(t, err)
	require.Equal(t, orig.ID, l.Of.RunID)
	require.Equal(t, store.ReplayExact, l.Replay.Mode)
}

func TestExactReplayReportsAChangedToolOutputAtItsTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.settle(t, rb.startAgent(t, ReplayAgentInput{Turns: 5}).ID, store.RunSucceeded)
	rb.changeAt.Store(2) // the lookup of turn 2 now answers differently

	// Live tools: the recording would serve the old answer.
	rep := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact, Tools: store.ReplayToolsLive})
	rb.settle(t, rep.ID, store.RunSucceeded)
	require.EqualValues(t, 5, rb.modelCalls.Load(), "still no model call")
	d := rb.divergence(t, rep.ID)
	require.NotNil(t, d)
	require.Equal(t, 2, d.Turn)
	require.Equal(t, "tool_output", d.Part)
	require.Equal(t, "l2", d.Ref)
	require.Equal(t, "lookup", d.Tool)
	require.Equal(t, "/output", d.Path)
	require.Equal(t, "value-2", d.Original)
	require.Equal(t, "changed-2", d.Replay)

	diff, err := rb.svc.Diff(ctx, orig.ID, rep.ID)
	require.NoError(t, err)
	require.False(t, diff.Equal)
	require.Equal(t, &runs.Location{Turn: 2, Part: "tool_output", Ref: "l2", Path: "/output"}, diff.First)
	require.True(t, diff.Turns[0].Equal)
	require.True(t, diff.Turns[1].Equal)
	require.Len(t, diff.Turns[2].ToolCalls, 1)
	require.Equal(t, runs.Changes{{Op: "replace", Path: "/output", A: "value-2", B: "changed-2"}}, diff.Turns[2].ToolCalls[0].Output)
	require.NotEmpty(t, diff.Turns[3].ModelRequest, "the next request carries the changed output")

	// A cassette serves the recorded outputs: the change in the tool does not show.
	cas := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact, Tools: store.ReplayToolsCassette})
	rb.settle(t, cas.ID, store.RunSucceeded)
	require.Nil(t, rb.divergence(t, cas.ID))
	requireSameMessages(t, rb.messages(t, orig.ID), rb.messages(t, cas.ID))
	calls, err := rb.store.ToolCallList(ctx, cas.ID)
	require.NoError(t, err)
	require.Len(t, calls, 4)
	for _, c := range calls {
		require.Equal(t, store.ToolSourceCassette, c.Source)
	}
}

func TestForkFromTurnTwoKeepsTurnsZeroAndOneByteIdentical(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.settle(t, rb.startAgent(t, ReplayAgentInput{Turns: 5}).ID, store.RunSucceeded)
	before := rb.messages(t, orig.ID)

	turn := 2
	fork := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayFork, Turn: &turn})
	require.Equal(t, orig.ID, *fork.ForkOf)
	require.Equal(t, 2, *fork.ForkTurn)
	require.Equal(t, 2, fork.Turns, "the copied turns count")
	rb.settle(t, fork.ID, store.RunSucceeded)
	require.EqualValues(t, 5+3, rb.modelCalls.Load(), "the fork called the live model for turns 2, 3 and 4 only")

	got := rb.messages(t, fork.ID)
	var copied []*store.RunMessage
	for _, m := range before {
		if m.Turn < 2 {
			copied = append(copied, m)
		}
	}
	require.Len(t, copied, 5, "user message, then model and tool messages of turns 0 and 1")
	requireSameMessages(t, copied, got[:len(copied)])
	requireSameMessages(t, before, rb.messages(t, orig.ID))

	after, err := rb.store.RunGet(ctx, orig.ID)
	require.NoError(t, err)
	require.Equal(t, orig.Version, after.Version, "the original is never modified")

	// A fork that edits a tool output of turn 1 continues from the edited history.
	one := 1
	edited := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayFork, Turn: &turn,
		Edits: []runs.Edit{{Turn: &one, Ref: "l1", Output: json.RawMessage(`"edited-1"`)}}})
	done := rb.settle(t, edited.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), `\"edited-1\"`)
	msgs := rb.messages(t, edited.ID)
	requireSameMessages(t, copied[:3], msgs[:3])
	require.Contains(t, string(msgs[4].Content), "edited-1")
	call, err := rb.store.ToolCallGet(ctx, edited.ID, 1, "l1")
	require.NoError(t, err)
	require.JSONEq(t, `{"output":"edited-1"}`, string(call.Output), "the ledger copy says what the history says")
	// The stream played back says it too: the edited tool message's chunk carries the edit.
	chunks, err := rb.store.ChunkList(ctx, edited.ID, 0, 1000)
	require.NoError(t, err)
	var toolChunks []string
	for _, c := range chunks {
		if c.Turn == 1 && c.Role == "tool" {
			toolChunks = append(toolChunks, string(c.Content))
		}
	}
	require.Len(t, toolChunks, 1, "one chunk for the edited tool message")
	require.Contains(t, toolChunks[0], "edited-1")

	l, err := rb.svc.Lineage(ctx, orig.ID)
	require.NoError(t, err)
	require.Len(t, l.Derived, 2)
	require.Equal(t, "fork", l.Derived[0].Relation)
	require.Equal(t, 2, *l.Derived[0].ForkTurn)
}

func TestDiffOfARunWithItselfIsEmpty(t *testing.T) {
	t.Parallel()
	rb := setupReplay(t)
	orig := rb.settle(t, rb.startAgent(t, ReplayAgentInput{Turns: 5}).ID, store.RunSucceeded)
	d, err := rb.svc.Diff(context.Background(), orig.ID, orig.ID)
	require.NoError(t, err)
	require.True(t, d.Equal)
	require.Nil(t, d.First)
	require.Empty(t, d.Input)
	require.Empty(t, d.Output)
	require.Zero(t, d.InputTokensDelta)
	require.Zero(t, d.LatencyMsDelta)
	require.Len(t, d.Turns, 5)
	for _, td := range d.Turns {
		require.True(t, td.Equal)
		require.Empty(t, td.Messages)
		require.Empty(t, td.ModelRequest)
		require.Empty(t, td.ModelResponse)
		require.Zero(t, td.LatencyMsDelta)
		require.Zero(t, td.InputTokensDelta)
		for _, tc := range td.ToolCalls {
			require.True(t, tc.Equal)
			require.Empty(t, tc.Output)
		}
	}
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"model_request":[]`, "empty change lists are [] for the UI")

	_, err = rb.svc.Diff(context.Background(), orig.ID, uuid.New())
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestReplayRaisesInterruptsAgainAndOffersTheOriginalDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.startAgent(t, ReplayAgentInput{Turns: 3, Confirm: true})
	rb.settle(t, orig.ID, store.RunInterrupted)
	it := rb.pending(t, orig.ID)[0]
	rb.resolve(t, it, runs.ActionApprove, "")
	done := rb.settle(t, orig.ID, store.RunSucceeded)
	require.EqualValues(t, 3, rb.modelCalls.Load())

	// Without apply_resolutions the decision is offered, never applied.
	rep := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact})
	rb.settle(t, rep.ID, store.RunInterrupted)
	pending := rb.pending(t, rep.ID)
	require.Len(t, pending, 1)
	require.Equal(t, "k1", pending[0].Ref)
	l, err := rb.svc.Lineage(ctx, rep.ID)
	require.NoError(t, err)
	require.Len(t, l.Suggestions, 1)
	require.Equal(t, pending[0].ID, l.Suggestions[0].InterruptID)
	var s struct {
		SourceInterruptID uuid.UUID       `json:"source_interrupt_id"`
		Status            string          `json:"status"`
		ResolvedBy        string          `json:"resolved_by"`
		Resolution        json.RawMessage `json:"resolution"`
	}
	require.NoError(t, json.Unmarshal(l.Suggestions[0].Suggestion, &s))
	require.Equal(t, it.ID, s.SourceInterruptID)
	require.Equal(t, store.InterruptApproved, s.Status)
	require.Equal(t, "rita", s.ResolvedBy)
	require.JSONEq(t, `{"action":"approve"}`, string(s.Resolution))

	// With apply_resolutions an exact replay applies them and plays the whole run again, its
	// approved tool live here, so that the message it answers is the tool's own.
	auto := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact, ApplyResolutions: true, Tools: store.ReplayToolsLive})
	autoDone := rb.settle(t, auto.ID, store.RunSucceeded)
	require.EqualValues(t, 3, rb.modelCalls.Load(), "no model call in either replay")
	require.JSONEq(t, string(done.Output), string(autoDone.Output))
	requireSameMessages(t, rb.messages(t, orig.ID), rb.messages(t, auto.ID))
	require.Nil(t, rb.divergence(t, auto.ID))
	list, err := rb.store.InterruptListByRun(ctx, auto.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, store.InterruptApproved, list[0].Status)
	audit, err := rb.store.AuditList(ctx, "interrupt", list[0].ID.String())
	require.NoError(t, err)
	require.Len(t, audit, 1)
	require.Equal(t, "interrupt.replay_applied", audit[0].Action, "an applied decision is audited as the replay's")

	// The still-pending replay is untouched by all this.
	require.Equal(t, store.InterruptPending, rb.pending(t, rep.ID)[0].Status)
}

func TestRerunAppliesOverrides(t *testing.T) {
	t.Parallel()
	rb := setupReplay(t)
	orig := rb.settle(t, rb.startAgent(t, ReplayAgentInput{Turns: 3}).ID, store.RunSucceeded)
	require.Contains(t, string(orig.Output), "replay done")

	rerun := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{Model: "test/other"}})
	require.Equal(t, store.ReplayRerun, *rerun.ReplayMode)
	done := rb.settle(t, rerun.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), "other done", "the model override reached the flow's generate")
	require.EqualValues(t, 6, rb.modelCalls.Load(), "a rerun calls the live model")
	require.Equal(t, "test/other", *done.Model)

	byKey := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{Model: "/model/test/other"}})
	done = rb.settle(t, byKey.ID, store.RunSucceeded)
	require.Equal(t, "test/other", *done.Model, "a model asked for by key is recorded by name, as the run's own is")
	settings, err := rb.store.ReplayGet(context.Background(), byKey.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"test/other"}`, string(settings.Overrides))

	limited := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{MaxTurns: ptr(1)}})
	rb.settle(t, limited.ID, store.RunAborted)

	sys := "Be brief."
	withSystem := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{System: &sys}})
	rb.settle(t, withSystem.ID, store.RunSucceeded)
	msgs := rb.messages(t, withSystem.ID)
	require.Equal(t, "system", msgs[0].Role)
	require.Contains(t, string(msgs[0].Content), sys)
}

func TestReplayRejectsBadRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.settle(t, rb.startAgent(t, ReplayAgentInput{Turns: 3}).ID, store.RunSucceeded)
	turn, far, one := 1, 3, 1
	cases := []struct {
		p     runs.ReplayParams
		field string
	}{
		{runs.ReplayParams{Mode: "again"}, "mode"},
		{runs.ReplayParams{Mode: store.ReplayFork}, "turn"},
		{runs.ReplayParams{Mode: store.ReplayFork, Turn: &far}, "turn"},
		{runs.ReplayParams{Mode: store.ReplayExact, Turn: &turn}, "turn"},
		{runs.ReplayParams{Mode: store.ReplayRerun, Tools: store.ReplayToolsCassette}, "tools"},
		{runs.ReplayParams{Mode: store.ReplayExact, Tools: "tape"}, "tools"},
		{runs.ReplayParams{Mode: store.ReplayRerun, ApplyResolutions: true}, "apply_resolutions"},
		{runs.ReplayParams{Mode: store.ReplayExact, Overrides: &runs.Overrides{MaxTurns: ptr(2)}}, "overrides"},
		{runs.ReplayParams{Mode: store.ReplayRerun, Overrides: &runs.Overrides{Model: "nope"}}, "overrides/model"},
		{runs.ReplayParams{Mode: store.ReplayRerun, Edits: []runs.Edit{{Turn: &one, Ref: "l0", Output: json.RawMessage(`1`)}}}, "edits"},
		{runs.ReplayParams{Mode: store.ReplayFork, Turn: &turn, Edits: []runs.Edit{{Turn: &one, Ref: "l1", Output: json.RawMessage(`1`)}}}, "edits/0/turn"},
		{runs.ReplayParams{Mode: store.ReplayFork, Turn: &far, Edits: nil}, "turn"},
		{runs.ReplayParams{Mode: store.ReplayFork, Turn: &turn, Edits: []runs.Edit{{Seq: &far, Message: json.RawMessage(`{"role":"user","content":[]}`)}}}, "edits/0/seq"},
		{runs.ReplayParams{Mode: store.ReplayFork, Turn: &turn, Edits: []runs.Edit{{Ref: "x"}}}, "edits/0"},
	}
	for _, tc := range cases {
		tc.p.RunID = orig.ID
		_, err := rb.svc.Replay(ctx, tc.p)
		require.ErrorIs(t, err, runs.ErrInvalid, "%+v", tc.p)
		var ve *runs.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Equal(t, tc.field, ve.Field, "%v", err)
	}
	_, err := rb.svc.Replay(ctx, runs.ReplayParams{RunID: uuid.New(), Mode: store.ReplayExact})
	require.ErrorIs(t, err, store.ErrNotFound)

	l, err := rb.svc.Lineage(ctx, orig.ID)
	require.NoError(t, err)
	require.Empty(t, l.Derived, "a rejected replay creates nothing")

	queued, err := rb.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/replayAgent", Input: json.RawMessage(`{"turns":1}`)})
	require.NoError(t, err)
	_, err = rb.svc.Replay(ctx, runs.ReplayParams{RunID: queued.ID, Mode: store.ReplayExact})
	require.ErrorIs(t, err, runs.ErrConflict, "a run still queued or running cannot be replayed yet")
}

// TestExactReplayNeverRepeatsAToolByDefault proves that an exact replay, asked for with no tool
// mode (as the API, the CLI and the page do by default), serves its tools from the recording: a
// replay that applies the original's approval plays the whole run again and the approved tool
// does not act a second time. Live tools act only when asked for.
func TestExactReplayNeverRepeatsAToolByDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.startAgent(t, ReplayAgentInput{Turns: 3, Confirm: true})
	rb.settle(t, orig.ID, store.RunInterrupted)
	rb.resolve(t, rb.pending(t, orig.ID)[0], runs.ActionApprove, "")
	done := rb.settle(t, orig.ID, store.RunSucceeded)
	require.EqualValues(t, 1, rb.confirmed.Load())

	rep := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact, ApplyResolutions: true})
	repDone := rb.settle(t, rep.ID, store.RunSucceeded)
	require.EqualValues(t, 1, rb.confirmed.Load(), "the default exact replay ran the approved tool again")
	require.JSONEq(t, string(done.Output), string(repDone.Output))
	settings, err := rb.store.ReplayGet(ctx, rep.ID)
	require.NoError(t, err)
	require.Equal(t, store.ReplayToolsCassette, settings.Tools)

	live := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact, ApplyResolutions: true, Tools: store.ReplayToolsLive})
	rb.settle(t, live.ID, store.RunSucceeded)
	require.EqualValues(t, 2, rb.confirmed.Load(), "live tools act when asked for")
}
