package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// oneConnStore is a Store over a test database's pool of one connection, so that
// pg_stat_force_next_flush flushes the counters of every statement it ran before tableReads reads
// them.
func oneConnStore(t *testing.T) (*pgxpool.Pool, *store.Store) {
	t.Helper()
	cfg := storetest.NewPool(t).Config()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, store.New(pool)
}

// tableReads reads one of pg_stat_user_tables' counters (seq_scan, idx_scan, or an expression of
// them) for each of tables, summed over its partitions if it has any.
func tableReads(t *testing.T, pool *pgxpool.Pool, counter string, tables ...string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	require.NoError(t, err)
	// A partitioned table's reads are its partitions' (spans, migration 00060).
	rows, err := pool.Query(ctx, `SELECT COALESCE(p.relname, s.relname)::text, sum(COALESCE(`+counter+`, 0))::int8
		FROM pg_stat_user_tables s LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
			LEFT JOIN pg_class p ON p.oid = i.inhparent
		WHERE COALESCE(p.relname, s.relname) = ANY($1) GROUP BY 1`, tables)
	require.NoError(t, err)
	n := map[string]int64{}
	var name string
	var count int64
	_, err = pgx.ForEachRow(rows, []any{&name, &count}, func() error { n[name] = count; return nil })
	require.NoError(t, err)
	require.Len(t, n, len(tables))
	return n
}
