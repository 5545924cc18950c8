package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestInterruptListJoinsEachRunsAction: one query lists interrupts of several runs, each with its
// own run's action, oldest first, and filters by status, tool and action.
func TestInterruptListJoinsEachRunsAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	type want struct {
		id     uuid.UUID
		runID  uuid.UUID
		action string
		tool   string
	}
	var wants []want
	for i, action := range []string{"/flow/a", "/flow/b", "/flow/c"} {
		run, err := s.RunCreate(ctx, store.RunCreateParams{Action: action})
		require.NoError(t, err)
		for j, tool := range []string{"approve", "confirm"} {
			created, err := s.InterruptCreate(ctx, []store.InterruptCreateParams{
				{RunID: run.ID, Turn: 1, Tool: tool, Ref: fmt.Sprintf("r%d-%d", i, j), Input: json.RawMessage(`{}`)},
			})
			require.NoError(t, err)
			wants = append(wants, want{id: created[0].ID, runID: run.ID, action: action, tool: tool})
		}
	}

	list, err := s.InterruptList(ctx, store.InterruptListParams{Status: store.InterruptPending})
	require.NoError(t, err)
	require.Len(t, list, len(wants))
	for i, w := range wants {
		require.Equal(t, w.id, list[i].ID, "oldest first")
		require.Equal(t, w.runID, list[i].RunID)
		require.Equal(t, w.action, list[i].Action, "each interrupt carries its own run's action")
		require.Equal(t, w.tool, list[i].Tool)
	}

	// Pages of 4 then the rest, continuing after the last of the previous page.
	page1, err := s.InterruptList(ctx, store.InterruptListParams{Status: store.InterruptPending, Limit: 4})
	require.NoError(t, err)
	require.Len(t, page1, 4)
	last := page1[3]
	page2, err := s.InterruptList(ctx, store.InterruptListParams{Status: store.InterruptPending, Limit: 4,
		After: &store.InterruptCursor{CreatedAt: last.CreatedAt, ID: last.ID}})
	require.NoError(t, err)
	require.Len(t, page2, 2)
	require.Equal(t, wants[4].id, page2[0].ID)
	require.Equal(t, wants[5].id, page2[1].ID)

	list, err = s.InterruptList(ctx, store.InterruptListParams{Action: "/flow/b"})
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, it := range list {
		require.Equal(t, wants[2].runID, it.RunID)
		require.Equal(t, "/flow/b", it.Action)
	}
	list, err = s.InterruptList(ctx, store.InterruptListParams{Tool: "confirm", Action: "/flow/c"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, wants[5].id, list[0].ID)
	list, err = s.InterruptList(ctx, store.InterruptListParams{Status: store.InterruptApproved})
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestInterruptSuggestedResolutionIsReadWithTheInterrupt: the suggestion a replay stores comes back
// with the interrupt wherever it is read, and is absent from the JSON of an interrupt without one.
func TestInterruptSuggestedResolutionIsReadWithTheInterrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	created, err := s.InterruptCreate(ctx, []store.InterruptCreateParams{
		{RunID: run.ID, Turn: 1, Tool: "f", Ref: "a", Input: json.RawMessage(`{}`)},
		{RunID: run.ID, Turn: 1, Tool: "f", Ref: "b", Input: json.RawMessage(`{}`)},
	})
	require.NoError(t, err)
	require.Nil(t, created[0].SuggestedResolution)
	suggestion := `{"status":"approved","resolution":{"action":"approve"}}`
	require.NoError(t, s.InterruptSuggest(ctx, created[1].ID, json.RawMessage(suggestion)))

	got, err := s.InterruptGet(ctx, created[1].ID, false)
	require.NoError(t, err)
	require.JSONEq(t, suggestion, string(got.SuggestedResolution))
	byRun, err := s.InterruptListByRun(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, byRun, 2)
	require.Nil(t, byRun[0].SuggestedResolution)
	require.JSONEq(t, suggestion, string(byRun[1].SuggestedResolution))
	list, err := s.InterruptList(ctx, store.InterruptListParams{})
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.JSONEq(t, suggestion, string(list[1].SuggestedResolution))

	raw, err := json.Marshal(list[0])
	require.NoError(t, err)
	require.NotContains(t, string(raw), "suggested_resolution")
	require.NotContains(t, string(raw), `"action"`, "the run's action stays out of the interrupt's JSON")
	raw, err = json.Marshal(list[1])
	require.NoError(t, err)
	require.Contains(t, string(raw), `"suggested_resolution":{`)

	resolved, err := s.InterruptResolve(ctx, store.InterruptResolveParams{ID: created[1].ID, Status: store.InterruptApproved,
		Resolution: json.RawMessage(`{"action":"approve"}`), ResolvedBy: "rita"})
	require.NoError(t, err)
	require.JSONEq(t, suggestion, string(resolved.SuggestedResolution), "resolving keeps what was offered")
}

// TestMessageListByRunsGroupsHistoriesInOrder: one query returns several runs' histories, each in
// order and under its own run; a run without messages has none.
func TestMessageListByRunsGroupsHistoriesInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	var ids []uuid.UUID
	for i := range 3 {
		run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
		require.NoError(t, err)
		ids = append(ids, run.ID)
		for seq := i; seq >= 0; seq-- { // written backwards: the order comes from seq
			require.NoError(t, s.MessagePut(ctx, run.ID, seq, 0, "user", json.RawMessage(fmt.Sprintf(`{"run":%d,"seq":%d}`, i, seq))))
		}
	}
	empty, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)

	got, err := s.MessageListByRuns(ctx, append(ids, empty.ID))
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.NotContains(t, got, empty.ID)
	for i, id := range ids {
		require.Len(t, got[id], i+1)
		one, err := s.MessageList(ctx, id)
		require.NoError(t, err)
		require.Equal(t, one, got[id], "the same history as MessageList")
		for seq, m := range got[id] {
			require.Equal(t, seq, m.Seq)
			require.JSONEq(t, fmt.Sprintf(`{"run":%d,"seq":%d}`, i, seq), string(m.Content))
		}
	}

	none, err := s.MessageListByRuns(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}
