package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestMaxConnsSizesThePool: --max-conns (or LOUPE_MAX_CONNS) is the pool's size exactly, below or
// above the default of 20; without it the pool is 20, or the URL's pool_max_conns when larger; a
// size too small for River's LISTEN connection and a run's queries is refused before anything
// connects.
func TestMaxConnsSizesThePool(t *testing.T) {
	url := storetest.NewURL(t)
	open := func(cfg *config) int32 {
		t.Helper()
		db, err := openDatabase(context.Background(), cfg, nopLogger())
		require.NoError(t, err)
		defer db.close()
		return db.pool.Config().MaxConns
	}
	require.EqualValues(t, 20, open(&config{DatabaseURL: url}), "the default")
	require.EqualValues(t, 50, open(&config{DatabaseURL: url + "&pool_max_conns=50"}), "a larger pool_max_conns")
	require.EqualValues(t, 5, open(&config{DatabaseURL: url, MaxConns: 5}), "--max-conns below the default")
	require.EqualValues(t, 64, open(&config{DatabaseURL: url + "&pool_max_conns=50", MaxConns: 64}), "--max-conns wins over the URL")
	t.Setenv("LOUPE_MAX_CONNS", "6")
	require.EqualValues(t, 6, open(&config{DatabaseURL: url}), "LOUPE_MAX_CONNS")
	require.EqualValues(t, 7, open(&config{DatabaseURL: url, MaxConns: 7}), "the flag wins over LOUPE_MAX_CONNS")

	for _, tc := range []struct{ env, flag, want string }{
		{"", "3", "--max-conns 3: want 4 to 10000"},
		{"many", "", `LOUPE_MAX_CONNS "many": want a number`},
	} {
		t.Setenv("LOUPE_MAX_CONNS", tc.env)
		args := []string{"migrate", "--database-url", "postgres://unused.invalid/x"}
		if tc.flag != "" {
			args = append(args, "--max-conns", tc.flag)
		}
		cmd := newRootCommand(demoProgram())
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		require.Error(t, err, args)
		require.Contains(t, err.Error(), tc.want, args)
	}
}
