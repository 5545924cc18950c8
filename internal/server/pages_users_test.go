package server

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserUsersInLocalModeSaysSignInIsOff: in local mode the users page says that sign-in is
// off, who everyone acts as, and what the page does when sign-in is on, instead of an empty table
// with no word of why; with sign-in on, the notice is not there.
func TestBrowserUsersInLocalModeSaysSignInIsOff(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	br := browsertest.New(t)
	var notice, empty string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/users"),
		chromedp.WaitVisible(`[data-testid="local-mode"]`, chromedp.ByQuery),
		chromedp.Text(`[data-testid="local-mode"]`, &notice, chromedp.ByQuery),
		chromedp.Text(`[data-testid="no-users"]`, &empty, chromedp.ByQuery),
	))
	require.Contains(t, notice, "Sign-in is off")
	require.Contains(t, notice, "acts as the admin local")
	require.Contains(t, notice, "With sign-in on")
	require.Contains(t, empty, "No users yet")
	require.Empty(t, br.Problems())

	signed := setup(t, opts{dev: false})
	a := auth.New(signed.store)
	_, err := a.AddUser(context.Background(), "root", "correct horse battery", store.RoleAdmin)
	require.NoError(t, err)
	tok, err := a.CreateToken(context.Background(), "root", "t")
	require.NoError(t, err)
	resp, body := get(t, signed.url+"/users", "Authorization", "Bearer "+tok, "Accept", "text/html")
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, body, `data-user="root"`)
	require.NotContains(t, body, `data-testid="local-mode"`)
	require.NotContains(t, body, `data-testid="no-users"`)
}

// TestBrowserUsersAdminCreatesChangesAndDisablesUsers works the admin's users page in a browser.
func TestBrowserUsersAdminCreatesChangesAndDisablesUsers(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	br := browsertest.New(t)
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/users"),
		chromedp.WaitVisible(`form[action="/users"]`, chromedp.ByQuery),
		chromedp.SendKeys(`form[action="/users"] input[name=username]`, "dana", chromedp.ByQuery),
		chromedp.SendKeys(`form[action="/users"] input[name=password]`, "correct horse 1", chromedp.ByQuery),
		chromedp.SetValue(`form[action="/users"] select[name=role]`, "reviewer", chromedp.ByQuery),
		browsertest.Click(`form[action="/users"] button[type=submit]`),
		chromedp.WaitVisible(`tr[data-user="dana"]`, chromedp.ByQuery),
	))
	u, err := b.store.UserGetByUsername(context.Background(), "dana")
	require.NoError(t, err)
	require.Equal(t, store.RoleReviewer, u.Role)

	require.NoError(t, br.Run(
		chromedp.SetValue(`tr[data-user="dana"] select[name=role]`, "admin", chromedp.ByQuery),
		browsertest.Click(`tr[data-user="dana"] input[name=disabled]`),
	))
	// RunResponse waits for the navigation that the submit starts, so the change is saved.
	_, err = chromedp.RunResponse(br.Ctx, browsertest.Click(`tr[data-user="dana"] button[type=submit]`))
	require.NoError(t, err)
	require.NoError(t, br.Run(
		chromedp.WaitVisible(`tr[data-user="dana"]`, chromedp.ByQuery),
		wait(`document.querySelector('tr[data-user="dana"] input[name=disabled]')?.checked === true`),
		wait(`document.querySelector('tr[data-user="dana"] select[name=role]')?.value === "admin"`),
	))
	u, err = b.store.UserGetByUsername(context.Background(), "dana")
	require.NoError(t, err)
	require.Equal(t, store.RoleAdmin, u.Role)
	require.True(t, u.Disabled)
	require.Empty(t, br.Problems())
}
