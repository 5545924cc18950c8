package runs_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestCassetteReplayOfAnEditedCallDivergesAndRunsTheToolLive: when the reviewer of a cassette
// replay edits the arguments of an interrupt it raised again, the recording (made for other
// arguments) is not served: the replay stores a tool_input divergence at that call, as the compare
// page finds it, and the approved call runs live. With the recorded decision the call is served.
func TestCassetteReplayOfAnEditedCallDivergesAndRunsTheToolLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.startAgent(t, ReplayAgentInput{Turns: 3, Confirm: true})
	rb.settle(t, orig.ID, store.RunInterrupted)
	rb.resolve(t, rb.pending(t, orig.ID)[0], runs.ActionApprove, "")
	rb.settle(t, orig.ID, store.RunSucceeded)

	cas := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact, Tools: store.ReplayToolsCassette})
	rb.settle(t, cas.ID, store.RunInterrupted)
	rb.resolve(t, rb.pending(t, cas.ID)[0], runs.ActionEdit, `{"amount":7}`)
	rb.settle(t, cas.ID, store.RunSucceeded)

	d := rb.divergence(t, cas.ID)
	require.NotNil(t, d, "the edited input is a divergence")
	require.Equal(t, 1, d.Turn)
	require.Equal(t, "tool_input", d.Part)
	require.Equal(t, "k1", d.Ref)
	require.Equal(t, "rpConfirm", d.Tool)
	require.Equal(t, "/amount", d.Path)
	require.EqualValues(t, 3, d.Original)
	require.EqualValues(t, 7, d.Replay)

	diff, err := rb.svc.Diff(ctx, orig.ID, cas.ID)
	require.NoError(t, err)
	require.Equal(t, &runs.Location{Turn: 1, Part: "tool_input", Ref: "k1", Path: "/amount"}, diff.First)

	call, err := rb.store.ToolCallGet(ctx, cas.ID, 1, "k1")
	require.NoError(t, err)
	require.NotEqual(t, store.ToolSourceCassette, call.Source, "not served from the recording")
	require.JSONEq(t, `{"output":{"ok":true,"amount":7}}`, string(call.Output), "the tool ran with the edited arguments")
	lookup, err := rb.store.ToolCallGet(ctx, cas.ID, 0, "l0")
	require.NoError(t, err)
	require.Equal(t, store.ToolSourceCassette, lookup.Source, "the calls before are still served")

	// Applying the recorded decision repeats the recorded input: served, no divergence.
	auto := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact, Tools: store.ReplayToolsCassette, ApplyResolutions: true})
	rb.settle(t, auto.ID, store.RunSucceeded)
	require.Nil(t, rb.divergence(t, auto.ID))
	call, err = rb.store.ToolCallGet(ctx, auto.ID, 1, "k1")
	require.NoError(t, err)
	require.Equal(t, store.ToolSourceCassette, call.Source)

	// A live exact replay reports the edited input too, before the output it changes.
	live := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact})
	rb.settle(t, live.ID, store.RunInterrupted)
	rb.resolve(t, rb.pending(t, live.ID)[0], runs.ActionEdit, `{"amount":8}`)
	rb.settle(t, live.ID, store.RunSucceeded)
	d = rb.divergence(t, live.ID)
	require.NotNil(t, d)
	require.Equal(t, "tool_input", d.Part)
	require.Equal(t, "/amount", d.Path)
}

// TestReplaysOfDerivedRunsKeepTheirSettings: an exact replay reproduces the run it replays, so
// a replay, re-run or fork of a re-run keeps its overrides (model, system, turn limit), and one of
// a fork starts from the fork's edited history; new overrides win over inherited ones.
func TestReplaysOfDerivedRunsKeepTheirSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.settle(t, rb.startAgent(t, ReplayAgentInput{Turns: 4}).ID, store.RunSucceeded)

	// exact replays the run it replays, with no divergence and no model call.
	exactOf := func(src *store.Run, status string) *store.Run {
		t.Helper()
		calls := rb.modelCalls.Load()
		rep := rb.replay(t, runs.ReplayParams{RunID: src.ID, Mode: store.ReplayExact})
		require.Equal(t, src.ID, *rep.ReplayOf)
		done := rb.settle(t, rep.ID, status)
		require.Nil(t, rb.divergence(t, rep.ID), "an exact replay of %s", src.ID)
		require.Equal(t, calls, rb.modelCalls.Load(), "an exact replay never calls a model")
		requireSameMessages(t, rb.messages(t, src.ID), rb.messages(t, rep.ID))
		require.JSONEq(t, string(nonNull(src.Output)), string(nonNull(done.Output)))
		require.Equal(t, src.Turns, done.Turns)
		d, err := rb.svc.Diff(ctx, src.ID, rep.ID)
		require.NoError(t, err)
		require.True(t, d.Equal, "first difference: %+v", d.First)
		return done
	}

	sys := "Be brief."
	other := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{Model: "test/other", System: &sys}})
	other = rb.settle(t, other.ID, store.RunSucceeded)
	require.Contains(t, string(other.Output), "other done")
	exactOf(other, store.RunSucceeded)

	// The turn limit too: the replay stops where the re-run did.
	limited := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{MaxTurns: ptr(2)}})
	limited = rb.settle(t, limited.ID, store.RunAborted)
	exactOf(limited, store.RunAborted)

	// A re-run of the re-run keeps its model, and its system message, unless overridden.
	again := rb.replay(t, runs.ReplayParams{RunID: other.ID, Mode: store.ReplayRerun})
	again = rb.settle(t, again.ID, store.RunSucceeded)
	require.Contains(t, string(again.Output), "other done")
	require.Contains(t, string(rb.messages(t, again.ID)[0].Content), sys)
	back := rb.replay(t, runs.ReplayParams{RunID: other.ID, Mode: store.ReplayRerun, Overrides: &runs.Overrides{Model: "test/replay"}})
	back = rb.settle(t, back.ID, store.RunSucceeded)
	require.Contains(t, string(back.Output), "replay done")
	require.Contains(t, string(rb.messages(t, back.ID)[0].Content), sys)
	info, err := rb.svc.Lineage(ctx, back.ID)
	require.NoError(t, err)
	var o runs.Overrides
	require.NoError(t, json.Unmarshal(info.Replay.Overrides, &o))
	require.Equal(t, "test/replay", o.Model)
	require.Equal(t, sys, *o.System, "the effective overrides are stored")

	// A fork of the re-run goes on with its model.
	one := 1
	forkOfOther := rb.replay(t, runs.ReplayParams{RunID: other.ID, Mode: store.ReplayFork, Turn: &one})
	require.Contains(t, string(rb.settle(t, forkOfOther.ID, store.RunSucceeded).Output), "other done")

	// A fork with an edited tool output: replaying it exactly starts from its edited history;
	// re-running it keeps the edit and goes on live.
	two := 2
	fork := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayFork, Turn: &two,
		Edits: []runs.Edit{{Turn: &one, Ref: "l1", Output: json.RawMessage(`"edited-1"`)}}})
	fork = rb.settle(t, fork.ID, store.RunSucceeded)
	require.Contains(t, string(fork.Output), "edited-1")
	rep := exactOf(fork, store.RunSucceeded)
	require.Equal(t, fork.ID, *rep.ForkOf, "it copies the fork's history before the turn the fork went live")
	require.Equal(t, 2, *rep.ForkTurn)
	exactOf(rep, store.RunSucceeded)

	calls := rb.modelCalls.Load()
	rerun := rb.replay(t, runs.ReplayParams{RunID: fork.ID, Mode: store.ReplayRerun})
	rerun = rb.settle(t, rerun.ID, store.RunSucceeded)
	require.Contains(t, string(rerun.Output), "edited-1")
	require.Equal(t, calls+2, rb.modelCalls.Load(), "turns 2 and 3 call the live model")

	// A fork limited by a turn limit, replayed exactly.
	limitedFork := rb.replay(t, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayFork, Turn: &one, Overrides: &runs.Overrides{MaxTurns: ptr(1)}})
	limitedFork = rb.settle(t, limitedFork.ID, store.RunAborted)
	exactOf(limitedFork, store.RunAborted)
}

func ptr[T any](v T) *T { return &v }

func nonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// TestReplayRefusesOverridesThatMeanNothing: a config that is not an object, a turn limit below
// one (0 included) and an empty system prompt are refused, naming the field.
func TestReplayRefusesOverridesThatMeanNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := setupReplay(t)
	orig := rb.settle(t, rb.startAgent(t, ReplayAgentInput{Turns: 2}).ID, store.RunSucceeded)
	empty := ""
	zero := 0
	cases := []struct {
		o     runs.Overrides
		field string
	}{
		{runs.Overrides{Config: json.RawMessage(`"hot"`)}, "overrides/config"},
		{runs.Overrides{Config: json.RawMessage(`[1,2]`)}, "overrides/config"},
		{runs.Overrides{Config: json.RawMessage(`{"temperature":`)}, "overrides/config"},
		{runs.Overrides{MaxTurns: &zero}, "overrides/max_turns"},
		{runs.Overrides{MaxTurns: ptr(-1)}, "overrides/max_turns"},
		{runs.Overrides{System: &empty}, "overrides/system"},
	}
	for _, tc := range cases {
		o := tc.o
		_, err := rb.svc.Replay(ctx, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayRerun, Overrides: &o, CreatedBy: "tester"})
		var ve *runs.ValidationError
		require.ErrorAs(t, err, &ve, "%+v", tc.o)
		require.Equal(t, tc.field, ve.Field, "%v", err)
	}
	l, err := rb.svc.Lineage(ctx, orig.ID)
	require.NoError(t, err)
	require.Empty(t, l.Derived)
}
