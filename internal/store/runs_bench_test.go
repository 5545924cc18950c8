package store_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// BenchmarkRunListSortedByTokens100k is the runs list's first page sorted by tokens (largest
// first), and a later page through its keyset cursor, at 100,000 runs: issue #16's "runs list
// sorted by tokens at 100,000 runs". The runs are seeded in SQL, with varied tokens, turns and
// actions. Set LOUPE_BENCH_RUNS to seed another number.
func BenchmarkRunListSortedByTokens100k(b *testing.B) {
	ctx := context.Background()
	s := storetest.New(b)
	n := benchEnvInt("LOUPE_BENCH_RUNS", 100_000)
	_, err := s.Pool().Exec(ctx, `INSERT INTO runs (id, action, input, status, turns, input_tokens, output_tokens, created_at, started_at, finished_at)
		SELECT gen_random_uuid(), '/flow/bench' || (i % 7), jsonb_build_object('n', i), 'succeeded', i % 9,
			(hashtext(i::text) & 65535), (hashtext((i * 7)::text) & 4095),
			now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval + interval '2 seconds'
		FROM generate_series(1, $1) AS i`, n)
	require.NoError(b, err)
	_, err = s.Pool().Exec(ctx, `ANALYZE runs`)
	require.NoError(b, err)
	first, next, err := s.RunList(ctx, store.RunListParams{Sort: store.RunSortTokens, Limit: 50})
	require.NoError(b, err)
	require.Len(b, first, 50)
	require.NotNil(b, next)
	b.Run("first-page", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.RunList(ctx, store.RunListParams{Sort: store.RunSortTokens, Limit: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("next-page", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.RunList(ctx, store.RunListParams{Sort: store.RunSortTokens, Limit: 50, After: next}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchEnvInt is an integer from the environment, or def.
func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
