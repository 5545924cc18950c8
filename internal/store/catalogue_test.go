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

// TestCatalogueAnnounceIsLiveUntilRemovedAndMovesHeldJobs proves the catalogue's life cycle: an
// announced action is live, it outlives its process's removal as a row that says when it was last
// seen, and an announcement moves the held jobs of its actions (and only those) into its queue.
func TestCatalogueAnnounceIsLiveUntilRemovedAndMovesHeldJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)

	_, err := st.CatalogueActionGet(ctx, "/flow/x")
	require.ErrorIs(t, err, store.ErrNotFound)

	runX, err := st.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	runY, err := st.RunCreate(ctx, store.RunCreateParams{Action: "/flow/y", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	for _, id := range []any{runX.ID, runY.ID} {
		_, err = pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state)
			VALUES (jsonb_build_object('run_id', $1::text), 'loupe.run', 25, 'loupe_held', 'available')`, id)
		require.NoError(t, err)
	}

	desc := json.RawMessage(`{"key":"/flow/x","name":"x","type":"flow"}`)
	moved, err := st.CatalogueAnnounce(ctx, store.CatalogueAnnounceParams{
		Instance: "p1", Program: "prog", Queue: "program_prog", TTL: time.Minute,
		Actions:   []store.CatalogueEntry{{Key: "/flow/x", Description: desc}},
		HeldQueue: "loupe_held", QueuePrefix: "program_",
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, moved, "only the held job of the announced action moves")
	var queueX, queueY string
	require.NoError(t, pool.QueryRow(ctx, `SELECT queue FROM river_job WHERE args->>'run_id' = $1::text`, runX.ID).Scan(&queueX))
	require.NoError(t, pool.QueryRow(ctx, `SELECT queue FROM river_job WHERE args->>'run_id' = $1::text`, runY.ID).Scan(&queueY))
	require.Equal(t, "program_prog", queueX)
	require.Equal(t, "loupe_held", queueY)

	a, err := st.CatalogueActionGet(ctx, "/flow/x")
	require.NoError(t, err)
	require.True(t, a.Live)
	require.Equal(t, "prog", a.Program)
	require.Equal(t, "program_prog", a.Queue)
	require.JSONEq(t, string(desc), string(a.Description))
	live, err := st.CatalogueActionList(ctx, store.CatalogueActionListParams{LiveOnly: true})
	require.NoError(t, err)
	require.Len(t, live, 1)

	require.NoError(t, st.CatalogueRemove(ctx, "p1"))
	a, err = st.CatalogueActionGet(ctx, "/flow/x")
	require.NoError(t, err)
	require.False(t, a.Live, "a removed process's actions are no longer live")
	require.WithinDuration(t, time.Now(), a.SeenAt, time.Minute)
	live, err = st.CatalogueActionList(ctx, store.CatalogueActionListParams{LiveOnly: true})
	require.NoError(t, err)
	require.Empty(t, live)
}
