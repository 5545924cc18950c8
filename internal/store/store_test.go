package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

func TestMigrationsApplyAndRollBackCleanly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	status, err := store.Migrations(ctx, pool)
	require.NoError(t, err)
	require.True(t, status.UpToDate(), "a fresh test database is fully migrated: %+v", status)
	latest := status.Latest

	for status.Current > 0 {
		require.NoError(t, store.MigrateDown(ctx, pool))
		status, err = store.Migrations(ctx, pool)
		require.NoError(t, err)
	}
	var tables int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name <> 'goose_db_version'`).Scan(&tables))
	require.Zero(t, tables, "every down section must drop what its up section created")

	applied, err := store.Migrate(ctx, pool)
	require.NoError(t, err)
	require.NotEmpty(t, applied)
	require.Equal(t, latest, applied[len(applied)-1])
}

func TestWithTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	boom := errors.New("boom")
	err := s.WithTx(ctx, func(tx *store.Store) error {
		_, err := tx.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	runs, _, err := s.RunList(ctx, store.RunListParams{})
	require.NoError(t, err)
	require.Empty(t, runs, "a failed transaction writes nothing")
}

func TestRunGetNotFound(t *testing.T) {
	t.Parallel()
	_, err := storetest.New(t).RunGet(context.Background(), uuid.New())
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestRunListKeysetPagingAndFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	for i := range 7 {
		action := "/flow/a"
		if i%2 == 1 {
			action = "/flow/b"
		}
		_, err := s.RunCreate(ctx, store.RunCreateParams{Action: action, Input: json.RawMessage(`{"n":` + string(rune('0'+i)) + `,"note":"50% off_"}`)})
		require.NoError(t, err)
	}
	var seen []uuid.UUID
	var cursor *store.RunCursor
	for {
		page, next, err := s.RunList(ctx, store.RunListParams{Limit: 3, After: cursor})
		require.NoError(t, err)
		for _, r := range page {
			seen = append(seen, r.ID)
		}
		if next == nil {
			break
		}
		cursor = next
	}
	require.Len(t, seen, 7, "paging visits every run exactly once")
	unique := map[uuid.UUID]bool{}
	for _, id := range seen {
		unique[id] = true
	}
	require.Len(t, unique, 7)

	b, _, err := s.RunList(ctx, store.RunListParams{Action: "/flow/b"})
	require.NoError(t, err)
	require.Len(t, b, 3)

	// The model filter keeps the runs whose last model it is (the dashboard's per-model links).
	_, err = s.Pool().Exec(ctx, `UPDATE runs SET model = 'demo/b' WHERE action = '/flow/b'`)
	require.NoError(t, err)
	byModel, _, err := s.RunList(ctx, store.RunListParams{Model: "demo/b"})
	require.NoError(t, err)
	require.Len(t, byModel, 3)
	for _, r := range byModel {
		require.Equal(t, "/flow/b", r.Action)
	}
	otherAction, _, err := s.RunList(ctx, store.RunListParams{Model: "demo/b", Action: "/flow/a"})
	require.NoError(t, err)
	require.Empty(t, otherAction, "the filters narrow together")

	hit, _, err := s.RunList(ctx, store.RunListParams{Query: `"n": 4`})
	require.NoError(t, err)
	require.Len(t, hit, 1)
	literal, _, err := s.RunList(ctx, store.RunListParams{Query: "50% off_"})
	require.NoError(t, err)
	require.Len(t, literal, 7, "LIKE wildcards in the query are matched literally")
	none, _, err := s.RunList(ctx, store.RunListParams{Query: "5_%"})
	require.NoError(t, err)
	require.Empty(t, none)
	tail := strings.ToUpper(seen[3].String()[28:]) // the short id pages show
	byID, _, err := s.RunList(ctx, store.RunListParams{Query: tail})
	require.NoError(t, err)
	require.Len(t, byID, 1, "a run is found by its short id, in either case")
	require.Equal(t, seen[3], byID[0].ID)

	queued, _, err := s.RunList(ctx, store.RunListParams{Status: store.RunQueued})
	require.NoError(t, err)
	require.Len(t, queued, 7)
}

func TestRunCountByStatusListsEveryStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	counts, err := s.RunCountByStatus(ctx)
	require.NoError(t, err)
	require.Len(t, counts, len(store.RunStatuses))
	_, err = s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	counts, err = s.RunCountByStatus(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, counts[store.RunQueued])
	pending, err := s.InterruptCountPending(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)
}
