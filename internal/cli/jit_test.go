package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestConnectionsRunWithoutJIT: Loupe's connections have JIT compilation off (store.SessionDefaults),
// unless the database URL asks for it.
func TestConnectionsRunWithoutJIT(t *testing.T) {
	url := storetest.NewURL(t)
	jit := func(url string) string {
		t.Helper()
		db, err := openDatabase(context.Background(), &config{DatabaseURL: url}, nopLogger())
		require.NoError(t, err)
		defer db.close()
		var v string
		require.NoError(t, db.pool.QueryRow(context.Background(), `SHOW jit`).Scan(&v))
		return v
	}
	require.Equal(t, "off", jit(url))
	require.Equal(t, "on", jit(url+"&jit=on"), "the URL's setting wins")
}
