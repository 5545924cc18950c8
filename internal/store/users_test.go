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

// TestAuditListByInterruptsMatchesAuditList: one query returns, for each interrupt asked for, the
// entries AuditList returns for it, in the same order; an interrupt without entries has no key, and
// entries of other subjects or of interrupts not asked for stay out.
func TestAuditListByInterruptsMatchesAuditList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/audit"})
	require.NoError(t, err)
	var ids []uuid.UUID
	for i := range 4 {
		created, err := s.InterruptCreate(ctx, []store.InterruptCreateParams{
			{RunID: run.ID, Turn: 1, Tool: "approve", Ref: fmt.Sprintf("r%d", i), Input: json.RawMessage(`{}`)},
		})
		require.NoError(t, err)
		ids = append(ids, created[0].ID)
	}
	withEntries, empty, notAsked := ids[:2], ids[2], ids[3]

	// Entries interleave across interrupts. Those written in one transaction share their time, so
	// the id breaks the tie.
	require.NoError(t, s.AuditInsert(ctx, "ann", "interrupt.approved", "interrupt", withEntries[1].String(), map[string]any{"n": 0}))
	require.NoError(t, s.WithTx(ctx, func(tx *store.Store) error {
		for i := range 3 {
			for _, id := range withEntries {
				if err := tx.AuditInsert(ctx, "bob", fmt.Sprintf("interrupt.step%d", i), "interrupt", id.String(), map[string]any{"n": i}); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	require.NoError(t, s.AuditInsert(ctx, "ann", "interrupt.edited", "interrupt", withEntries[0].String(), nil))
	require.NoError(t, s.AuditInsert(ctx, "ann", "interrupt.denied", "interrupt", notAsked.String(), nil))
	require.NoError(t, s.AuditInsert(ctx, "ann", "user.create", "user", empty.String(), nil))

	asked := []uuid.UUID{withEntries[0], empty, withEntries[1]}
	got, err := s.AuditListByInterrupts(ctx, asked)
	require.NoError(t, err)
	require.Len(t, got, 2, "only interrupts with entries have a key")
	for _, id := range withEntries {
		want, err := s.AuditList(ctx, "interrupt", id.String())
		require.NoError(t, err)
		require.NotEmpty(t, want)
		require.Equal(t, want, got[id], "interrupt %s", id)
	}
	require.Len(t, got[withEntries[0]], 4)
	require.Len(t, got[withEntries[1]], 4)
	require.NotContains(t, got, empty)
	require.NotContains(t, got, notAsked)

	none, err := s.AuditListByInterrupts(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}
