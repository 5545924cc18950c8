package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// recordedRun stores a run of three turns: a user message, then per turn a model message and a
// tool message, with a model call, a tool call and a chunk each.
func recordedRun(t *testing.T, s *store.Store) *store.Run {
	t.Helper()
	ctx := context.Background()
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a", Input: json.RawMessage(`{"x":1}`)})
	require.NoError(t, err)
	require.NoError(t, s.MessagePut(ctx, run.ID, 0, 0, "user", json.RawMessage(`{"role":"user","content":[{"text":"hi"}]}`)))
	for turn := range 3 {
		seq := 1 + 2*turn
		require.NoError(t, s.MessagePut(ctx, run.ID, seq, turn, "model", json.RawMessage(fmt.Sprintf(`{"role":"model","content":[{"text":"t%d","metadata":{"b":1,"a":[2,3]}}]}`, turn))))
		require.NoError(t, s.MessagePut(ctx, run.ID, seq+1, turn, "tool", json.RawMessage(fmt.Sprintf(`{"role":"tool","content":[{"toolResponse":{"name":"f","ref":"r%d","output":%d}}]}`, turn, turn))))
		require.NoError(t, s.ModelCallPut(ctx, store.ModelCall{RunID: run.ID, Turn: turn, Model: fmt.Sprintf("m%d", turn),
			Request: json.RawMessage(`{}`), Response: json.RawMessage(`{"usage":{"inputTokens":10,"outputTokens":3}}`), LatencyMs: 5}))
		_, _, err := s.ToolCallStart(ctx, store.Fence{}, store.ToolCallStartParams{RunID: run.ID, Turn: turn, Ref: fmt.Sprintf("r%d", turn), Tool: "f",
			Input: json.RawMessage(`{}`), IdempotencyKey: "k"})
		require.NoError(t, err)
		require.NoError(t, s.ToolCallFinish(ctx, store.Fence{}, store.ToolCallFinishParams{RunID: run.ID, Turn: turn, Ref: fmt.Sprintf("r%d", turn),
			Status: store.ToolCallCompleted, Output: json.RawMessage(fmt.Sprintf(`{"output":%d}`, turn))}))
		require.NoError(t, s.ChunkInsert(ctx, []store.RunChunk{{RunID: run.ID, Seq: int64(turn + 1), Turn: turn, Index: seq, Role: "model", Content: json.RawMessage(`[]`)}}))
	}
	return run
}

func TestRunCopyHistoryCopiesTheTurnsBeforeAsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	orig := recordedRun(t, s)
	turn := 2
	var fork *store.Run
	require.NoError(t, s.WithTx(ctx, func(tx *store.Store) error {
		var err error
		fork, err = tx.RunCreate(ctx, store.RunCreateParams{Action: orig.Action, Input: orig.Input, ReplayMode: store.ReplayFork, ForkOf: &orig.ID, ForkTurn: &turn})
		require.NoError(t, err)
		return tx.RunCopyHistory(ctx, store.RunCopyHistoryParams{From: orig.ID, To: fork.ID, BeforeSeq: 5, BeforeTurn: 2})
	}))

	want, err := s.MessageList(ctx, orig.ID)
	require.NoError(t, err)
	got, err := s.MessageList(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, got, 5)
	for i := range got {
		require.Equal(t, want[i].Turn, got[i].Turn)
		require.Equal(t, string(want[i].Content), string(got[i].Content), "message %d reads back byte for byte", i)
	}
	calls, err := s.ModelCallList(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	tools, err := s.ToolCallList(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, tools, 2)
	chunks, err := s.ChunkList(ctx, fork.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, chunks, 2)
	run, err := s.RunGet(ctx, fork.ID)
	require.NoError(t, err)
	require.Equal(t, 2, run.Turns)
	require.EqualValues(t, 20, run.InputTokens)
	require.EqualValues(t, 6, run.OutputTokens)
	require.Equal(t, "m1", *run.Model)

	require.NoError(t, s.ToolCallSetOutput(ctx, fork.ID, 1, "r1", json.RawMessage(`{"output":"edited"}`)))
	edited, err := s.ToolCallGet(ctx, fork.ID, 1, "r1")
	require.NoError(t, err)
	require.JSONEq(t, `{"output":"edited"}`, string(edited.Output))
	kept, err := s.ToolCallGet(ctx, orig.ID, 1, "r1")
	require.NoError(t, err)
	require.JSONEq(t, `{"output":1}`, string(kept.Output), "the original is left alone")
}

func TestReplaySettingsDivergenceAndLineage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	orig := recordedRun(t, s)
	rep, err := s.RunCreate(ctx, store.RunCreateParams{Action: orig.Action, ReplayOf: &orig.ID, ReplayMode: store.ReplayExact})
	require.NoError(t, err)
	require.NoError(t, s.ReplayCreate(ctx, store.Replay{RunID: rep.ID, SourceRunID: &orig.ID, Mode: store.ReplayExact, Tools: store.ReplayToolsCassette, ApplyResolutions: true}))
	err = s.ReplayCreate(ctx, store.Replay{RunID: uuid.New(), Mode: store.ReplayRerun, Tools: store.ReplayToolsCassette})
	require.Error(t, err, "cassette tools are for exact replays only")

	got, err := s.ReplayGet(ctx, rep.ID)
	require.NoError(t, err)
	require.Equal(t, store.ReplayToolsCassette, got.Tools)
	require.True(t, got.ApplyResolutions)
	_, err = s.ReplayGet(ctx, orig.ID)
	require.ErrorIs(t, err, store.ErrNotFound)

	first, err := s.ReplayDiverge(ctx, store.Fence{RunID: rep.ID}, json.RawMessage(`{"turn":1}`))
	require.NoError(t, err)
	require.True(t, first)
	first, err = s.ReplayDiverge(ctx, store.Fence{RunID: rep.ID}, json.RawMessage(`{"turn":2}`))
	require.NoError(t, err)
	require.False(t, first, "only the first divergence counts")

	turn := 1
	fork, err := s.RunCreate(ctx, store.RunCreateParams{Action: orig.Action, ReplayMode: store.ReplayFork, ForkOf: &orig.ID, ForkTurn: &turn})
	require.NoError(t, err)
	l, err := s.RunLineage(ctx, orig.ID)
	require.NoError(t, err)
	require.Nil(t, l.Of)
	require.Len(t, l.Derived, 2)
	require.Equal(t, rep.ID, l.Derived[0].RunID)
	require.Equal(t, "replay", l.Derived[0].Relation)
	require.JSONEq(t, `{"turn":1}`, string(l.Derived[0].Divergence))
	require.Equal(t, "fork", l.Derived[1].Relation)
	require.Equal(t, 1, *l.Derived[1].ForkTurn)
	l, err = s.RunLineage(ctx, fork.ID)
	require.NoError(t, err)
	require.Equal(t, orig.ID, l.Of.RunID)
	require.Equal(t, "fork", l.Of.Relation)
	require.Empty(t, l.Derived)
	_, err = s.RunLineage(ctx, uuid.New())
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestRunListReplayableListsEndedOriginalsOfAnAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	orig := recordedRun(t, s)
	leased, err := s.RunAcquire(ctx, orig.ID, "w", time.Minute)
	require.NoError(t, err)
	_, err = s.RunFinish(ctx, store.RunFinishParams{ID: orig.ID, Epoch: leased.LeaseEpoch, Status: store.RunSucceeded, Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	_, err = s.RunCreate(ctx, store.RunCreateParams{Action: orig.Action}) // still queued
	require.NoError(t, err)
	_, err = s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/other"})
	require.NoError(t, err)
	rep, err := s.RunCreate(ctx, store.RunCreateParams{Action: orig.Action, ReplayOf: &orig.ID, ReplayMode: store.ReplayExact})
	require.NoError(t, err)
	_, err = s.RunCancel(ctx, rep.ID)
	require.NoError(t, err)

	list, err := s.RunListReplayable(ctx, store.RunListReplayableParams{Action: orig.Action, Since: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, orig.ID, list[0].ID)
	list, err = s.RunListReplayable(ctx, store.RunListReplayableParams{Action: orig.Action, Since: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestInterruptSuggestions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run := recordedRun(t, s)
	created, err := s.InterruptCreate(ctx, []store.InterruptCreateParams{
		{RunID: run.ID, Turn: 1, Tool: "f", Ref: "a", Input: json.RawMessage(`{}`)},
		{RunID: run.ID, Turn: 1, Tool: "f", Ref: "b", Input: json.RawMessage(`{}`)},
	})
	require.NoError(t, err)
	require.NoError(t, s.InterruptSuggest(ctx, created[1].ID, json.RawMessage(`{"status":"approved"}`)))
	list, err := s.InterruptSuggestionList(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, created[1].ID, list[0].InterruptID)
	require.Equal(t, store.InterruptPending, list[0].Status)
	require.JSONEq(t, `{"status":"approved"}`, string(list[0].Suggestion))
}
