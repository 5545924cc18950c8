package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/pricing"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// runWithCalls creates a run and checkpoints one model call per turn, each with its model and
// usage, as an executor does.
func runWithCalls(t *testing.T, s *store.Store, action string, calls ...call) *store.Run {
	t.Helper()
	ctx := context.Background()
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: action, Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	if len(calls) == 0 {
		return run
	}
	a, err := s.RunAcquire(ctx, run.ID, "worker", time.Minute)
	require.NoError(t, err)
	for turn, c := range calls {
		checkpointCall(t, s, store.FenceOf(a), turn, c)
	}
	got, err := s.RunGet(ctx, run.ID)
	require.NoError(t, err)
	return got
}

type call struct {
	model   string
	in, out int64
}

func checkpointCall(t *testing.T, s *store.Store, f store.Fence, turn int, c call) {
	t.Helper()
	_, err := s.Checkpoint(context.Background(), store.CheckpointParams{RunID: f.RunID, Fence: f,
		ModelCall: &store.ModelCall{RunID: f.RunID, Turn: turn, Model: c.model, Request: json.RawMessage(`{}`),
			Response: json.RawMessage(fmt.Sprintf(`{"usage":{"inputTokens":%d,"outputTokens":%d}}`, c.in, c.out))},
		Progress: &store.RunProgressParams{ID: f.RunID, Turns: turn + 1, Model: c.model}})
	require.NoError(t, err)
}

// costsBySort lists every run by cost, one a page, and returns each run's cost as the SQL
// computed it (the cursor's sort value), in the order listed.
func costsBySort(t *testing.T, s *store.Store, prices *pricing.Table, asc bool) ([]uuid.UUID, map[uuid.UUID]float64) {
	t.Helper()
	var (
		order  []uuid.UUID
		costs  = map[uuid.UUID]float64{}
		cursor *store.RunCursor
	)
	for {
		page, next, err := s.RunList(context.Background(), store.RunListParams{Sort: store.RunSortCost, Asc: asc, Limit: 1, After: cursor, Prices: prices})
		require.NoError(t, err)
		if len(page) == 0 {
			return order, costs
		}
		order = append(order, page[0].ID)
		if next == nil {
			// The last row's value: list it again from the one before it.
			return order, costs
		}
		v, err := strconv.ParseFloat(next.Value, 64)
		require.NoError(t, err, next.Value)
		costs[page[0].ID] = v
		cursor = next
	}
}

// TestRunCostIsPricedPerModel: a run that calls two models (one twice) keeps its tokens per
// model, a model call recorded again (a takeover) replaces its share, the cost adds each model's
// price, a model without a price makes the run's cost unknown (and it sorts below a run with no
// model call, which costs nothing), and a fork carries the usage of the turns it copies.
func TestRunCostIsPricedPerModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	prices := pricing.Builtin()

	mixed := runWithCalls(t, s, "/flow/a",
		call{"openai/gpt-4o", 1000, 200}, call{"claude-3-haiku-20240307", 4000, 100}, call{"openai/gpt-4o", 500, 50})
	require.Equal(t, map[string]pricing.Tokens{"openai/gpt-4o": {Input: 1500, Output: 250}, "claude-3-haiku-20240307": {Input: 4000, Output: 100}}, mixed.Usage)
	require.EqualValues(t, 5500, mixed.InputTokens)
	_, err := s.Pool().Exec(ctx, `UPDATE runs SET lease_expires_at = now() - interval '1 s' WHERE id = $1`, mixed.ID)
	require.NoError(t, err)
	b, err := s.RunAcquire(ctx, mixed.ID, "worker-2", time.Minute)
	require.NoError(t, err)
	checkpointCall(t, s, store.FenceOf(b), 1, call{"claude-3-haiku-20240307", 4000, 100})
	mixed, err = s.RunGet(ctx, mixed.ID)
	require.NoError(t, err)
	require.Equal(t, pricing.Tokens{Input: 4000, Output: 100}, mixed.Usage["claude-3-haiku-20240307"], "a turn recorded again counts once")
	want := (1500*2.50+250*10)/1e6 + (4000*0.25+100*1.25)/1e6
	usd, ok := prices.Cost(mixed.Usage)
	require.True(t, ok)
	require.InDelta(t, want, usd, 1e-12)

	unknown := runWithCalls(t, s, "/flow/a", call{"gpt-4o", 10, 10}, call{"demo/travel", 0, 0})
	_, ok = prices.Cost(unknown.Usage)
	require.False(t, ok, "demo/travel has no price")
	none := runWithCalls(t, s, "/flow/b")
	require.Nil(t, none.Usage)
	cheap := runWithCalls(t, s, "/flow/b", call{"gemini-2.0-flash-001", 1_000_000, 0})

	order, costs := costsBySort(t, s, prices, false)
	require.Equal(t, []uuid.UUID{cheap.ID, mixed.ID, none.ID, unknown.ID}, order, "by cost, the unknown last")
	require.InDelta(t, want, costs[mixed.ID], 1e-12, "SQL prices as Go does")
	require.InDelta(t, 0.10, costs[cheap.ID], 1e-12)
	require.InDelta(t, 0, costs[none.ID], 1e-12)
	order, _ = costsBySort(t, s, prices, true)
	require.Equal(t, []uuid.UUID{unknown.ID, none.ID, mixed.ID, cheap.ID}, order)

	fork, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, s.RunCopyHistory(ctx, store.RunCopyHistoryParams{From: mixed.ID, To: fork.ID, BeforeTurn: 2}))
	fork, err = s.RunGet(ctx, fork.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]pricing.Tokens{"openai/gpt-4o": {Input: 1000, Output: 200}, "claude-3-haiku-20240307": {Input: 4000, Output: 100}}, fork.Usage)
}

// TestCostSortMatchesModelsAsTheTableDoes: the SQL that sorts by cost finds each model's price as
// pricing.Table.Lookup does (exact names, dated and versioned names, provider prefixes, a key
// with a prefix, a key ending in *, the most specific key first), and leaves out what it leaves
// out.
func TestCostSortMatchesModelsAsTheTableDoes(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	prices, err := pricing.Parse([]byte(`models:
  demo/travel: {input: 7, output: 0}
  ft:gpt-4o-mini*: {input: 3, output: 0}
  gpt-4o-mini*: {input: 11, output: 0}
`))
	require.NoError(t, err)
	models := []string{"gpt-4o", "openai/gpt-4o", "GPT-4o-2024-08-06", "gpt-4o-mini", "gpt-4o-mini-2024-07-18",
		"gpt-4o-mini-tts", "ft:gpt-4o-mini:acme::x1", "gpt-4o-audio-preview", "demo/travel", "other/travel",
		"claude-sonnet-4@20250514", "claude-sonnet-4-5-20250929", "claude-3-5-haiku-latest", "vertexai/gemini-2.5-flash-lite",
		"gemini-2.5-flash-preview-05-20", "gpt-4.1", "gpt-4", ""}
	runs := map[uuid.UUID]string{}
	for _, m := range models {
		r := runWithCalls(t, s, "/flow/m", call{m, 1_000_000, 0})
		runs[r.ID] = m
	}
	_, costs := costsBySort(t, s, prices, true) // ascending: the last (a priced one) has no cursor
	last, _ := costsBySort(t, s, prices, false)
	for id, m := range runs {
		p, ok := prices.Lookup(m)
		got, listed := costs[id]
		if id == last[0] {
			require.True(t, ok, "%q is the dearest", m)
			continue
		}
		require.True(t, listed, m)
		if !ok {
			require.EqualValues(t, -1, got, "%q has no price", m)
			continue
		}
		require.InDelta(t, p.Input, got, 1e-12, "%q", m)
	}
}

// TestRunPercentilesSumUsagePerModel: the dashboard's row of an action and model carries its
// runs' tokens per model called, so that it is priced per model.
func TestRunPercentilesSumUsagePerModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	runWithCalls(t, s, "/flow/a", call{"gpt-4o-mini", 100, 10}, call{"gpt-4o", 1000, 100})
	runWithCalls(t, s, "/flow/a", call{"gpt-4o-mini", 50, 5}, call{"gpt-4o", 500, 50})
	runWithCalls(t, s, "/flow/a", call{"gpt-4o", 7, 7}, call{"demo/travel", 1, 1})
	runWithCalls(t, s, "/flow/b")
	rows, err := s.RunPercentilesSince(ctx, time.Now().Add(-time.Hour), 10)
	require.NoError(t, err)
	byKey := map[string]store.RunPercentiles{}
	for _, r := range rows {
		byKey[r.Action+" "+r.Model] = r
	}
	require.Len(t, byKey, 3)
	require.Equal(t, map[string]pricing.Tokens{"gpt-4o-mini": {Input: 150, Output: 15}, "gpt-4o": {Input: 1500, Output: 150}}, byKey["/flow/a gpt-4o"].Usage)
	require.Equal(t, 2, byKey["/flow/a gpt-4o"].Runs)
	require.Equal(t, map[string]pricing.Tokens{"gpt-4o": {Input: 7, Output: 7}, "demo/travel": {Input: 1, Output: 1}}, byKey["/flow/a demo/travel"].Usage)
	require.Nil(t, byKey["/flow/b "].Usage)
}
