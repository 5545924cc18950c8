package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelpNeverPrintsTheDatabasePassword: DATABASE_URL usually holds a password, and --help used
// to show it as the flag's default.
func TestHelpNeverPrintsTheDatabasePassword(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://loupe:hunter2-secret@db.example:5432/loupe")
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"replay", "--help"}, {"db", "--help"}} {
		cmd := newRootCommand(demoProgram())
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		require.NoError(t, cmd.ExecuteContext(context.Background()), args)
		require.Contains(t, out.String(), "database-url", args)
		require.NotContains(t, out.String(), "hunter2-secret", args)
	}
}

// TestCLIRefusesUnknownSubcommandsAndValues: a typo fails (exit 1) instead of printing help and
// succeeding, or listing nothing.
func TestCLIRefusesUnknownSubcommandsAndValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"db", "bogus"}, `unknown command "bogus" for "devui db"`},
		{[]string{"interrupts", "bogus"}, `unknown command "bogus" for "devui interrupts"`},
		{[]string{"user", "bogus"}, `unknown command "bogus" for "devui user"`},
		{[]string{"interrupts", "list", "--status", "bogus", "--database-url", "postgres://unused"}, `--status "bogus": want one of pending, approved`},
		{[]string{"run", "travelAgent", `{"destination":"Lisbon"}`}, `pass its input with --input "{\"destination\":\"Lisbon\"}"`},
	} {
		cmd := newRootCommand(demoProgram())
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		err := cmd.ExecuteContext(context.Background())
		require.Error(t, err, tc.args)
		require.Contains(t, err.Error(), tc.want, tc.args)
		require.Equal(t, 1, exitCode(err))
	}
	cmd := newRootCommand(demoProgram())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"db"})
	require.NoError(t, cmd.ExecuteContext(context.Background()), "a bare group prints its help")
	require.Contains(t, out.String(), "start")
}
