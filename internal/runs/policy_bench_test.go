package runs_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// BenchmarkPolicyWhatIf10k tries the transfer policy (four rules with CEL expressions over the
// tool input) on the 10,000 newest stored interrupts, decided by people in every way: the read,
// the decoding and the evaluation, as devui policy whatif --last 10000 and the Policy page do.
func BenchmarkPolicyWhatIf10k(b *testing.B) {
	pool := storetest.NewPool(b)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO runs (id, action, input, status)
		SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, '/flow/transferMoney',
			jsonb_build_object('to', 'bob', 'amount', g), 'succeeded'
		FROM generate_series(1, 10000) g;
		INSERT INTO interrupts (run_id, turn, tool, ref, input, metadata, status, resolution, resolved_by, resolved_at)
		SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 0, 'transfer', 'p1',
			jsonb_build_object('to', CASE WHEN g % 7 = 0 THEN 'mallory' ELSE 'bob' END, 'amount', g % 30000),
			jsonb_build_object('message', 'Transfer?'),
			(ARRAY['approved', 'denied', 'edited', 'pending'])[g % 4 + 1],
			CASE WHEN g % 4 = 3 THEN NULL ELSE '{}'::jsonb END,
			CASE WHEN g % 4 = 3 THEN NULL ELSE 'rita' END,
			CASE WHEN g % 4 = 3 THEN NULL ELSE now() END
		FROM generate_series(1, 10000) g`)
	require.NoError(b, err)
	st := store.New(pool)
	b.ResetTimer()
	for b.Loop() {
		rep, err := runs.PolicyWhatIf(ctx, st, []byte(transferPolicy), 10000)
		require.NoError(b, err)
		require.Equal(b, 10000, rep.Interrupts)
	}
}
