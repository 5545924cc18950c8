package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestInterruptClaimKeepsOthersOff: a claim holds against another reviewer until it is released
// or taken over; it does not change the version; a resolved interrupt cannot be claimed.
func TestInterruptClaimKeepsOthersOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	created, err := s.InterruptCreate(ctx, []store.InterruptCreateParams{{RunID: run.ID, Tool: "t", Ref: "r", Input: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	id := created[0].ID

	it, err := s.InterruptClaim(ctx, store.InterruptClaimParams{ID: id, To: "alice"})
	require.NoError(t, err)
	require.Equal(t, "alice", *it.ClaimedBy)
	require.NotNil(t, it.ClaimedAt)
	require.Equal(t, created[0].Version, it.Version, "a claim does not make open forms stale")

	it, err = s.InterruptClaim(ctx, store.InterruptClaimParams{ID: id, To: "bob"})
	require.ErrorIs(t, err, store.ErrClaimed)
	require.Equal(t, "alice", *it.ClaimedBy)
	_, err = s.InterruptRelease(ctx, id, "bob", false)
	require.ErrorIs(t, err, store.ErrClaimed, "only the claimant releases")

	it, err = s.InterruptClaim(ctx, store.InterruptClaimParams{ID: id, To: "bob", Force: true})
	require.NoError(t, err)
	require.Equal(t, "bob", *it.ClaimedBy, "taken over")
	it, err = s.InterruptRelease(ctx, id, "bob", false)
	require.NoError(t, err)
	require.Nil(t, it.ClaimedBy)

	_, err = s.InterruptResolve(ctx, store.InterruptResolveParams{ID: id, Status: store.InterruptDenied, Resolution: json.RawMessage(`{}`), ResolvedBy: "carol"})
	require.NoError(t, err)
	_, err = s.InterruptClaim(ctx, store.InterruptClaimParams{ID: id, To: "alice"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestInterruptHistoryAndFacets: the history lists resolved interrupts newest first, filtered by
// tool, action, status, who and the comment's text, in pages; the facets count what waits by
// tool and action.
func TestInterruptHistoryAndFacets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	var ids []string
	for i, action := range []string{"/flow/a", "/flow/b", "/flow/a", "/flow/b"} {
		run, err := s.RunCreate(ctx, store.RunCreateParams{Action: action})
		require.NoError(t, err)
		created, err := s.InterruptCreate(ctx, []store.InterruptCreateParams{{RunID: run.ID, Tool: fmt.Sprintf("t%d", i%2), Ref: "r", Input: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		ids = append(ids, created[0].ID.String())
		if i < 3 {
			status := []string{store.InterruptApproved, store.InterruptDenied, store.InterruptApproved}[i]
			_, err = s.InterruptResolve(ctx, store.InterruptResolveParams{ID: created[0].ID, Status: status, Resolution: json.RawMessage(`{}`),
				ResolvedBy: []string{"alice", "bob", "alice"}[i], Comment: fmt.Sprintf("Reason %d", i)})
			require.NoError(t, err)
		}
	}
	all, err := s.InterruptHistory(ctx, store.InterruptHistoryParams{})
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, ids[2], all[0].ID.String(), "most recently resolved first")
	require.Equal(t, "/flow/a", all[0].Action)

	for _, c := range []struct {
		p    store.InterruptHistoryParams
		want []string
	}{
		{store.InterruptHistoryParams{By: "alice"}, []string{ids[2], ids[0]}},
		{store.InterruptHistoryParams{Status: store.InterruptDenied}, []string{ids[1]}},
		{store.InterruptHistoryParams{Tool: "t0"}, []string{ids[2], ids[0]}},
		{store.InterruptHistoryParams{Action: "/flow/b"}, []string{ids[1]}},
		{store.InterruptHistoryParams{Query: "reason 1"}, []string{ids[1]}},
		{store.InterruptHistoryParams{Limit: 2, Before: &store.InterruptHistoryCursor{ResolvedAt: *all[1].ResolvedAt, ID: all[1].ID}}, []string{ids[0]}},
	} {
		got, err := s.InterruptHistory(ctx, c.p)
		require.NoError(t, err)
		var gotIDs []string
		for _, it := range got {
			gotIDs = append(gotIDs, it.ID.String())
		}
		require.Equal(t, c.want, gotIDs, "%+v", c.p)
	}

	facets, err := s.InterruptPendingFacets(ctx)
	require.NoError(t, err)
	require.Equal(t, []store.InterruptFacet{{Tool: "t1", Action: "/flow/b", Count: 1}}, facets)
}
