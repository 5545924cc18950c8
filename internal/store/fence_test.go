package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestFenceRefusesAnExecutionThatLostTheRun proves that once another execution has acquired a
// run, nothing the first one sends is stored: its checkpoint, tool intents, tool results (kept
// apart as superseded), progress, renewals and outcome are all refused with ErrLeaseLost.
func TestFenceRefusesAnExecutionThatLostTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	a, err := s.RunAcquire(ctx, run.ID, "worker-a", time.Millisecond)
	require.NoError(t, err)
	fa := store.FenceOf(a)
	_, _, err = s.ToolCallStart(ctx, fa, store.ToolCallStartParams{RunID: run.ID, Turn: 0, Ref: "t1", Tool: "transfer", Input: json.RawMessage(`{}`)})
	require.NoError(t, err, "the holder records its intent")

	time.Sleep(5 * time.Millisecond) // a's lease lapses (a paused worker)
	b, err := s.RunAcquire(ctx, run.ID, "worker-b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, a.LeaseEpoch+1, b.LeaseEpoch, "each acquisition starts a new epoch")
	fb := store.FenceOf(b)

	_, err = s.Checkpoint(ctx, store.CheckpointParams{RunID: run.ID, Fence: fa,
		Messages:  []store.RunMessage{{RunID: run.ID, Seq: 0, Role: "user", Content: json.RawMessage(`{"role":"user"}`)}},
		Chunks:    []store.RunChunk{{RunID: run.ID, Seq: 1, Role: "model", Content: json.RawMessage(`[]`)}},
		ModelCall: &store.ModelCall{RunID: run.ID, Turn: 0, Model: "m", Request: json.RawMessage(`{}`), Response: json.RawMessage(`{"usage":{"inputTokens":5}}`)},
		Progress:  &store.RunProgressParams{ID: run.ID, Turns: 9}})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	_, _, err = s.ToolCallStart(ctx, fa, store.ToolCallStartParams{RunID: run.ID, Turn: 0, Ref: "t2", Tool: "transfer", Input: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrLeaseLost, "a tool of the lost execution may not start")
	err = s.ToolCallFinish(ctx, fa, store.ToolCallFinishParams{RunID: run.ID, Turn: 0, Ref: "t1", Status: store.ToolCallCompleted, Output: json.RawMessage(`{"sent":true}`)})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	_, err = s.RunRenewLease(ctx, fa, time.Minute)
	require.ErrorIs(t, err, store.ErrLeaseLost)
	_, err = s.RunFinish(ctx, store.RunFinishParams{ID: run.ID, Epoch: fa.Epoch, Status: store.RunSucceeded})
	require.ErrorIs(t, err, store.ErrLeaseLost)

	msgs, err := s.MessageList(ctx, run.ID)
	require.NoError(t, err)
	require.Empty(t, msgs)
	chunks, err := s.ChunkList(ctx, run.ID, 0, 0)
	require.NoError(t, err)
	require.Empty(t, chunks)
	calls, err := s.ModelCallList(ctx, run.ID)
	require.NoError(t, err)
	require.Empty(t, calls)
	tools, err := s.ToolCallList(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, tools, 1)
	require.Equal(t, store.ToolCallStarted, tools[0].Status, "the lost execution's result is not the run's")
	superseded, err := s.ToolCallListSuperseded(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, superseded, 1, "the lost execution's result is kept apart")
	require.JSONEq(t, `{"sent":true}`, string(superseded[0].Output))
	require.Equal(t, a.LeaseEpoch, superseded[0].LeaseEpoch)
	cur, err := s.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, cur.Status)
	require.Zero(t, cur.Turns)

	// The holder writes, and its usage is the ledger's.
	_, err = s.Checkpoint(ctx, store.CheckpointParams{RunID: run.ID, Fence: fb,
		ModelCall: &store.ModelCall{RunID: run.ID, Turn: 0, Model: "m", Request: json.RawMessage(`{}`), Response: json.RawMessage(`{"usage":{"inputTokens":5,"outputTokens":2}}`)},
		Progress:  &store.RunProgressParams{ID: run.ID, Turns: 1}})
	require.NoError(t, err)
	cur, err = s.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5, cur.InputTokens)
	require.EqualValues(t, 2, cur.OutputTokens)
}

// TestFenceAfterCancelKeepsResultsOfToolsThatStarted proves a cancel is atomic against an
// execution: after it, the execution can start nothing (no tool intent, no checkpoint), but a
// tool that started before the cancel still has its result recorded.
func TestFenceAfterCancelKeepsResultsOfToolsThatStarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	a, err := s.RunAcquire(ctx, run.ID, "worker-a", time.Minute)
	require.NoError(t, err)
	f := store.FenceOf(a)
	_, _, err = s.ToolCallStart(ctx, f, store.ToolCallStartParams{RunID: run.ID, Turn: 0, Ref: "before", Tool: "transfer", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = s.RunCancel(ctx, run.ID)
	require.NoError(t, err)

	_, _, err = s.ToolCallStart(ctx, f, store.ToolCallStartParams{RunID: run.ID, Turn: 0, Ref: "after", Tool: "transfer", Input: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrLeaseLost, "no tool starts after the cancel")
	_, err = s.Checkpoint(ctx, store.CheckpointParams{RunID: run.ID, Fence: f, Progress: &store.RunProgressParams{ID: run.ID, Turns: 3}})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	require.NoError(t, s.ToolCallFinish(ctx, f, store.ToolCallFinishParams{RunID: run.ID, Turn: 0, Ref: "before",
		Status: store.ToolCallCompleted, Output: json.RawMessage(`{"sent":true}`)}), "a tool that started before the cancel is recorded")
	tools, err := s.ToolCallList(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, tools, 1)
	require.Equal(t, store.ToolCallCompleted, tools[0].Status)
	cur, err := s.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunCancelled, cur.Status)
	require.Zero(t, cur.Turns)
}

// TestOrphanedRunsIncludeQueuedRunsWhoseJobDied proves the sweep finds a queued run whose job was
// fetched by a worker that died before taking the lease, and leaves alone a fresh queued run and a
// run that waits for reviewers.
func TestOrphanedRunsIncludeQueuedRunsWhoseJobDied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	s := store.New(pool)
	stale, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x"})
	require.NoError(t, err)
	fresh, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x"})
	require.NoError(t, err)
	waiting, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x"})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE runs SET updated_at = now() - interval '1 minute' WHERE id = ANY($1)`, []any{stale.ID, waiting.ID})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE runs SET status = 'interrupted' WHERE id = $1`, waiting.ID)
	require.NoError(t, err)
	ids, err := s.RunListOrphaned(ctx, store.RunListOrphanedParams{QueuedFor: 10 * time.Second, Limit: 10})
	require.NoError(t, err)
	require.Contains(t, ids, stale.ID)
	require.NotContains(t, ids, fresh.ID, "a run queued a moment ago is a live worker's to take")
	require.NotContains(t, ids, waiting.ID)
}
