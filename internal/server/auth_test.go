package server

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/store"
)

// userToken creates a user with a role and returns an API token for it.
func (b *bundle) userToken(t *testing.T, username, role string) string {
	t.Helper()
	ctx := context.Background()
	svc := auth.New(b.store)
	_, err := svc.AddUser(ctx, username, "correct horse battery", role)
	require.NoError(t, err)
	token, err := svc.CreateToken(ctx, username, "test")
	require.NoError(t, err)
	return token
}

func TestSignInRequiredOutsideLocalMode(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(b.url + "/runs?status=failed")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login?next=%2Fruns%3Fstatus%3Dfailed", resp.Header.Get("Location"))

	resp, body := get(t, b.url+"/api/v1/dashboard")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, `"code":"unauthenticated"`)

	resp, _ = get(t, b.url+"/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode, "health stays public")
}

func TestBearerTokenAuthenticatesAPIClients(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false})
	token := b.userToken(t, "ann", store.RoleViewer)
	resp, _ := get(t, b.url+"/api/v1/dashboard", "Authorization", "Bearer "+token)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body := get(t, b.url+"/api/v1/dashboard", "Authorization", "Bearer loupe_wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, "unknown")

	u, err := b.store.UserGetByUsername(context.Background(), "ann")
	require.NoError(t, err)
	disabled := true
	_, err = b.store.UserUpdate(context.Background(), u.ID, store.UserUpdateParams{Disabled: &disabled})
	require.NoError(t, err)
	resp, _ = get(t, b.url+"/api/v1/dashboard", "Authorization", "Bearer "+token)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a disabled user's token stops working")
}

func TestSignInWithPasswordOpensASession(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false})
	b.userToken(t, "bob", store.RoleAdmin)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar}

	form := func(password string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, b.url+"/login", strings.NewReader(url.Values{
			"username": {"bob"}, "password": {password}, "next": {"/"},
		}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin") // a browser submitting our own form
		resp, err := client.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp := form("wrong password")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, string(body), "wrong username or password")

	resp = form("correct horse battery")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "<h1>Dashboard</h1>")
	require.Contains(t, string(body), `<a class="user" href="/account" title="your account and password">bob</a>`)
	require.NotContains(t, string(body), "local mode")
}

func TestRoleChecks(t *testing.T) {
	t.Parallel()
	require.True(t, auth.Allows(store.RoleAdmin, store.RoleReviewer))
	require.True(t, auth.Allows(store.RoleReviewer, store.RoleReviewer))
	require.False(t, auth.Allows(store.RoleViewer, store.RoleReviewer))
	require.False(t, auth.Allows(store.RoleReviewer, store.RoleAdmin))
	require.False(t, auth.Allows("", store.RoleViewer))
}

func TestBootstrapWritesTheFirstAdminPasswordToAFile(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false})
	dir := t.TempDir()
	svc := auth.New(b.store)
	path, err := svc.Bootstrap(context.Background(), dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "admin-password"), path)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	pw, err := os.ReadFile(path)
	require.NoError(t, err)
	_, _, err = svc.SignIn(context.Background(), "admin", strings.TrimSpace(string(pw)))
	require.NoError(t, err)
	again, err := svc.Bootstrap(context.Background(), dir)
	require.NoError(t, err)
	require.Empty(t, again, "bootstrap runs only when there are no users")
}

func TestSafeNextStaysOnSite(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"/runs": "/runs", "": "/", "https://evil.example": "/", "//evil.example": "/", `/\evil`: "/"} {
		require.Equal(t, want, safeNext(in), in)
	}
}
