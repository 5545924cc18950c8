package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestRunListSortsByEachOrderWithExactKeysetPaging: every order of the runs list (id, input and
// pending interrupts included), both ways, pages through all runs exactly once in the order it
// names (ties broken by id), a cursor is refused in another order, and a forged cursor value is
// ErrBadCursor, not a database error.
func TestRunListSortsByEachOrderWithExactKeysetPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	type facts struct {
		tokens int64
		turns  int
		action string
	}
	want := map[uuid.UUID]facts{}
	pending := map[uuid.UUID]int{}
	for i := range 11 {
		r, err := s.RunCreate(ctx, store.RunCreateParams{Action: fmt.Sprintf("/flow/%c", 'a'+i%3),
			Input: json.RawMessage(fmt.Sprintf(`{"topic":"%c"}`, 'a'+i%4))})
		require.NoError(t, err)
		for k := range i % 3 {
			_, err = s.InterruptCreate(ctx, []store.InterruptCreateParams{{RunID: r.ID, Tool: "t", Ref: fmt.Sprint(k), Input: json.RawMessage(`{}`)}})
			require.NoError(t, err)
		}
		f := facts{tokens: int64(i % 4 * 100), turns: i % 5, action: r.Action}
		_, err = s.Pool().Exec(ctx, `UPDATE runs SET input_tokens = $2, output_tokens = $3, turns = $4, started_at = created_at,
			finished_at = created_at + $5 * interval '1 ms', status = 'succeeded', waited_ms = $6,
			model = nullif($7, '') WHERE id = $1`,
			r.ID, f.tokens/2, f.tokens-f.tokens/2, f.turns, 1000+i*10, i%2*500, []string{"", "m/a", "m/b"}[i%3])
		require.NoError(t, err)
		want[r.ID] = f
		pending[r.ID] = i % 3
	}
	for _, sort := range store.RunSorts {
		for _, asc := range []bool{false, true} {
			var seen []*store.Run
			var cursor *store.RunCursor
			for {
				page, next, err := s.RunList(ctx, store.RunListParams{Limit: 3, After: cursor, Sort: sort, Asc: asc})
				require.NoError(t, err, "%s asc=%v", sort, asc)
				seen = append(seen, page...)
				if next == nil {
					break
				}
				cursor = next
			}
			require.Len(t, seen, 11, "%s asc=%v: every run once", sort, asc)
			key := func(r *store.Run) string {
				switch sort {
				case store.RunSortTokens:
					return fmt.Sprintf("%06d", r.InputTokens+r.OutputTokens)
				case store.RunSortTurns:
					return fmt.Sprintf("%06d", r.Turns)
				case store.RunSortAction:
					return r.Action
				case store.RunSortStatus:
					return r.Status
				case store.RunSortModel:
					if r.Model == nil {
						return ""
					}
					return *r.Model
				case store.RunSortRanFor:
					return fmt.Sprintf("%09d", r.FinishedAt.Sub(*r.StartedAt).Milliseconds()-r.WaitedMs)
				case store.RunSortWaited:
					return fmt.Sprintf("%09d", r.WaitedMs)
				case store.RunSortID:
					return r.ID.String()
				case store.RunSortInput:
					return string(r.Input)
				case store.RunSortPending:
					return fmt.Sprintf("%03d", pending[r.ID])
				}
				return r.CreatedAt.Format(time.RFC3339Nano)
			}
			sorted := slices.IsSortedFunc(seen, func(a, b *store.Run) int {
				c := cmpStr(key(a), key(b))
				if c == 0 {
					c = cmpStr(a.ID.String(), b.ID.String())
				}
				if !asc {
					c = -c
				}
				return c
			})
			require.True(t, sorted, "%s asc=%v is in order", sort, asc)
			ids := map[uuid.UUID]bool{}
			for _, r := range seen {
				ids[r.ID] = true
				require.Equal(t, want[r.ID].tokens, r.InputTokens+r.OutputTokens)
			}
			require.Len(t, ids, 11)
		}
	}

	_, next, err := s.RunList(ctx, store.RunListParams{Limit: 2, Sort: store.RunSortTokens})
	require.NoError(t, err)
	_, _, err = s.RunList(ctx, store.RunListParams{Limit: 2, After: next})
	require.ErrorIs(t, err, store.ErrBadCursor, "a tokens cursor in the started order")
	for _, v := range []string{"abc", "1e9", "", "9223372036854775808"} {
		bad := *next
		bad.Value = v
		_, _, err = s.RunList(ctx, store.RunListParams{Limit: 2, Sort: store.RunSortTokens, After: &bad})
		require.ErrorIs(t, err, store.ErrBadCursor, "value %q", v)
	}
	bad := store.RunCursor{Sort: store.RunSortStarted, Value: "yesterday", ID: uuid.New()}
	_, _, err = s.RunList(ctx, store.RunListParams{After: &bad})
	require.ErrorIs(t, err, store.ErrBadCursor)
	bad = store.RunCursor{Sort: store.RunSortID, Value: "not-an-id", ID: uuid.New()}
	_, _, err = s.RunList(ctx, store.RunListParams{Sort: store.RunSortID, After: &bad})
	require.ErrorIs(t, err, store.ErrBadCursor)
	bad = store.RunCursor{Sort: store.RunSortAction, Value: "a\x00b", ID: uuid.New()}
	_, _, err = s.RunList(ctx, store.RunListParams{Sort: store.RunSortAction, After: &bad})
	require.ErrorIs(t, err, store.ErrBadCursor)
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestRunWaitsAreCountedApartFromRunning: a resume and a cancel of an interrupted run add its wait
// to waited_ms; a run that never waited has none.
func TestRunWaitsAreCountedApartFromRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	mk := func() uuid.UUID {
		r, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/w", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		// Interrupted 1.5 s ago.
		_, err = s.Pool().Exec(ctx, `UPDATE runs SET status = 'interrupted', started_at = now() - interval '2 s',
			updated_at = now() - interval '1500 ms' WHERE id = $1`, r.ID)
		require.NoError(t, err)
		return r.ID
	}
	resumed := mk()
	require.NoError(t, s.RunRequeue(ctx, resumed))
	r, err := s.RunGet(ctx, resumed)
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.WaitedMs, int64(1500))
	require.Less(t, r.WaitedMs, int64(60_000))

	cancelled := mk()
	_, err = s.RunCancel(ctx, cancelled)
	require.NoError(t, err)
	r, err = s.RunGet(ctx, cancelled)
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.WaitedMs, int64(1500))

	plain, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/w", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = s.RunCancel(ctx, plain.ID)
	require.NoError(t, err)
	r, err = s.RunGet(ctx, plain.ID)
	require.NoError(t, err)
	require.Zero(t, r.WaitedMs, "a queued run that is cancelled never waited")
}

// TestRunLabelsAreKept: a run's labels (Genkit's telemetryLabels) are stored with it, and a run
// without any has none.
func TestRunLabelsAreKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	r, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/l", Labels: map[string]string{"batchRun": "b1"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"batchRun": "b1"}, r.Labels)
	got, err := s.RunGet(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"batchRun": "b1"}, got.Labels)
	plain, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/l"})
	require.NoError(t, err)
	require.Nil(t, plain.Labels)
}
