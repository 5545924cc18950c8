package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestUserPasswdSetsThePasswordAndEndsSessions: devui user passwd prints a generated password (or
// takes one from stdin with --password-stdin); the new one signs in, the old one does not, and
// the user's open sessions end.
func TestUserPasswdSetsThePasswordAndEndsSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.NewURL(t)
	_, _, err := devui(t, dbURL, "migrate")
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	svc := auth.New(store.New(pool))
	_, err = svc.AddUser(ctx, "dana", "old password 1", store.RoleReviewer)
	require.NoError(t, err)
	session, _, err := svc.SignIn(ctx, "dana", "old password 1")
	require.NoError(t, err)

	out, _, err := devui(t, dbURL, "user", "passwd", "dana")
	require.NoError(t, err)
	require.Contains(t, out, "password of dana changed; their sessions are signed out")
	m := regexp.MustCompile(`(?m)^password: (\S+)$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	_, _, err = svc.SignIn(ctx, "dana", m[1])
	require.NoError(t, err, "the printed password signs in")
	_, _, err = svc.SignIn(ctx, "dana", "old password 1")
	require.ErrorIs(t, err, auth.ErrBadCredentials)
	_, err = svc.SessionUser(ctx, session)
	require.ErrorIs(t, err, store.ErrNotFound, "the session opened with the old password ended")

	cmd := newRootCommand(demoProgram())
	var stdout strings.Builder
	cmd.SetArgs([]string{"user", "passwd", "dana", "--password-stdin", "--database-url", dbURL, "--log-level", "error"})
	cmd.SetIn(strings.NewReader("chosen password 2\n"))
	cmd.SetOut(&stdout)
	require.NoError(t, cmd.ExecuteContext(ctx))
	require.NotContains(t, stdout.String(), "password:", "a password from stdin is not echoed")
	_, _, err = svc.SignIn(ctx, "dana", "chosen password 2")
	require.NoError(t, err)

	_, _, err = devui(t, dbURL, "user", "passwd", "nobody")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestUserGroupsAreSetAndPrinted: devui user groups sets a user's groups (what a policy rule's
// group: requires of an interrupt's deciders), prints them, and refuses a bad name.
func TestUserGroupsAreSetAndPrinted(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)
	_, _, err := devui(t, dbURL, "user", "add", "ann", "--role", "reviewer")
	require.NoError(t, err)
	out, _, err := devui(t, dbURL, "user", "groups", "ann", "treasury, oncall,treasury")
	require.NoError(t, err)
	require.Equal(t, "ann: treasury, oncall\n", out)
	out, _, err = devui(t, dbURL, "user", "groups", "ann")
	require.NoError(t, err)
	require.Equal(t, "ann: treasury, oncall\n", out)
	_, _, err = devui(t, dbURL, "user", "groups", "ann", "two words")
	require.ErrorContains(t, err, `group "two words"`)
	out, _, err = devui(t, dbURL, "user", "groups", "ann", "")
	require.NoError(t, err)
	require.Equal(t, "ann: no group\n", out)
	_, _, err = devui(t, dbURL, "user", "groups", "nobody", "x")
	require.ErrorContains(t, err, `user "nobody"`)
}
