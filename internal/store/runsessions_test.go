package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/pricing"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestSessionListSumsEachSessionsRuns: a row per session with runs, the one active last first:
// its runs counted once however many traces each has, their turns and tokens, the tokens per
// model for its cost, first and last activity; traces without a session or a run are left out;
// keyset pages see every session once.
func TestSessionListSumsEachSessionsRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	n := 0
	trace := func(runID *uuid.UUID, session string) {
		n++
		var sess any
		if session != "" {
			sess = session
		}
		_, err := s.Pool().Exec(ctx, `INSERT INTO traces (trace_id, display_name, run_id, session) VALUES ($1, 'f', $2, $3)`,
			fmt.Sprintf("%032x", n), runID, sess)
		require.NoError(t, err)
	}
	touch := func(id uuid.UUID, ago time.Duration) {
		_, err := s.Pool().Exec(ctx, `UPDATE runs SET updated_at = now() - $2 * interval '1 ms' WHERE id = $1`, id, ago.Milliseconds())
		require.NoError(t, err)
	}
	a1 := runWithCalls(t, s, "/flow/chat", call{"gpt-4o", 100, 10}, call{"claude-3-haiku", 1000, 0})
	a2 := runWithCalls(t, s, "/flow/chat", call{"gpt-4o", 50, 5})
	b1 := runWithCalls(t, s, "/flow/chat", call{"demo/travel", 1, 1})
	alone := runWithCalls(t, s, "/flow/chat", call{"gpt-4o", 1, 1})
	trace(&a1.ID, "s-a")
	trace(&a1.ID, "s-a") // a resumed run: a second trace, the same session
	trace(&a2.ID, "s-a")
	trace(&b1.ID, "s-b")
	trace(&alone.ID, "")
	trace(nil, "s-traces-only")
	touch(a1.ID, 3*time.Hour)
	touch(a2.ID, 2*time.Hour)
	touch(b1.ID, time.Hour)

	list, next, err := s.SessionList(ctx, store.SessionListParams{})
	require.NoError(t, err)
	require.Nil(t, next)
	require.Len(t, list, 2)
	require.Equal(t, "s-b", list[0].Session, "the session active last first")
	a := list[1]
	require.Equal(t, "s-a", a.Session)
	require.Equal(t, 2, a.Runs, "a run with two traces counts once")
	require.EqualValues(t, 3, a.Turns)
	require.EqualValues(t, 1150, a.InputTokens)
	require.EqualValues(t, 15, a.OutputTokens)
	require.Equal(t, map[string]pricing.Tokens{"gpt-4o": {Input: 150, Output: 15}, "claude-3-haiku": {Input: 1000}}, a.Usage)
	require.WithinDuration(t, a1.CreatedAt, a.First, time.Millisecond)
	require.WithinDuration(t, time.Now().Add(-2*time.Hour), a.Last, time.Minute)
	_, ok := pricing.Builtin().Cost(list[0].Usage)
	require.False(t, ok, "s-b called a model without a price")

	for i := range 7 {
		r := runWithCalls(t, s, "/flow/chat")
		trace(&r.ID, fmt.Sprintf("page-%d", i))
		touch(r.ID, time.Duration(i)*time.Minute)
	}
	var seen []string
	var cursor *store.SessionCursor
	for {
		page, next, err := s.SessionList(ctx, store.SessionListParams{Limit: 2, After: cursor})
		require.NoError(t, err)
		for _, p := range page {
			seen = append(seen, p.Session)
		}
		if next == nil {
			break
		}
		cursor = next
	}
	require.Equal(t, "page-0 page-1 page-2 page-3 page-4 page-5 page-6 s-b s-a", strings.Join(seen, " "))
}
