package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeRefusesABrokenPricesFile: serve --prices (and LOUPE_PRICES, its default) reads the
// file before anything starts, and a file it cannot read is an error naming the flag and the
// file, not a server that shows wrong costs.
func TestServeRefusesABrokenPricesFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "prices.yaml")
	require.NoError(t, os.WriteFile(path, []byte("models:\n  gpt-4o: {input: -2, output: 10}\n"), 0o600))
	_, _, err := runMyagent(t, "", "serve", "--dev", "--prices", path)
	require.ErrorContains(t, err, "--prices: "+path)
	require.ErrorContains(t, err, "zero or more")
	_, _, err = runMyagent(t, "", "serve", "--dev", "--prices", filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "--prices")

	cmd := newRootCommand(myagent())
	serve, _, err := cmd.Find([]string{"serve"})
	require.NoError(t, err)
	f := serve.Flags().Lookup("prices")
	require.NotNil(t, f)
	require.Contains(t, f.Usage, "env LOUPE_PRICES")
}
