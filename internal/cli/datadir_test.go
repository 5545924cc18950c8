package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDataDirIsFoundUpTheTree proves commands find the project's cluster from a subdirectory, as
// git finds .git, and say where they looked when there is none.
func TestDataDirIsFoundUpTheTree(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(project, ".devui", "postgres"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(project, ".devui", "postgres", "PG_VERSION"), []byte("15\n"), 0o644))
	deep := filepath.Join(project, "cmd", "agent")
	require.NoError(t, os.MkdirAll(deep, 0o755))

	dir, err := findDataDir(deep)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(project, ".devui"), dir)

	elsewhere := t.TempDir()
	_, err = findDataDir(elsewhere)
	require.ErrorContains(t, err, "no .devui in "+elsewhere+" or any directory above it")
}

// TestCommandsFindingNoDatabaseSaySoAndCreateNone proves that a command other than serve, pointed
// at a directory without a cluster, fails with a message and leaves no new cluster behind.
func TestCommandsFindingNoDatabaseSaySoAndCreateNone(t *testing.T) {
	t.Setenv("DATABASE_URL", "") // the embedded cluster's lookup, whatever the developer's shell has
	empty := t.TempDir()
	for _, args := range [][]string{{"interrupts", "list"}, {"run", "countdown", "--input", `{"from":1}`}, {"db", "url"}, {"worker"}} {
		cmd := newRootCommand(demoProgram())
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, "--data-dir", empty))
		err := cmd.Execute()
		require.ErrorContains(t, err, "no Loupe database in "+empty, "devui %v", args)
		require.Equal(t, 1, exitCode(err))
	}
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "a command created something in the empty directory")
}
