package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

const denyTransfers = `rules:
  - name: no-transfers
    tool: transfer
    decide: deny
    reason: transfers are frozen
`

// TestPolicyDraftsWaitUntilPutInForce saves a policy version as a draft beside the one in force:
// it decides nothing until an admin puts it in force (and the old one back), it can be read and
// tried meanwhile, and only an admin may save or switch versions (403 for a reviewer, by the API
// or the page's form).
func TestPolicyDraftsWaitUntilPutInForce(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{runs: true})
	ctx := context.Background()
	admin := b.userToken(t, "ada", store.RoleAdmin)
	reviewer := b.userToken(t, "rev", store.RoleReviewer)
	as := func(token string) string { return "Bearer " + token }
	body := func(src, extra string) string { return fmt.Sprintf(`{"source":%q%s}`, src, extra) }
	decidedBy := func(amount int) string {
		run := b.startRun(t, "/flow/transferMoney", fmt.Sprintf(`{"to":"fay","amount":%d,"currency":"EUR"}`, amount))
		var by string
		require.Eventually(t, func() bool {
			list, err := b.store.InterruptListByRun(ctx, run.ID)
			require.NoError(t, err)
			if len(list) == 0 || list[0].Status == store.InterruptPending {
				return false
			}
			by = *list[0].ResolvedBy
			return true
		}, 30*time.Second, 20*time.Millisecond)
		return by
	}

	var saved store.Policy
	require.Equal(t, http.StatusCreated, call(t, http.MethodPost, b.url+"/api/v1/policy", body(whatIfPolicy, ""), &saved, "Authorization", as(admin)))
	require.Equal(t, int64(1), saved.Version)
	var e apiError
	require.Equal(t, http.StatusForbidden, call(t, http.MethodPost, b.url+"/api/v1/policy", body(denyTransfers, `,"draft":true`), &e, "Authorization", as(reviewer)))
	require.Equal(t, http.StatusCreated, call(t, http.MethodPost, b.url+"/api/v1/policy", body(denyTransfers, `,"draft":true`), &saved, "Authorization", as(admin)))
	require.Equal(t, int64(2), saved.Version)
	require.Equal(t, http.StatusOK, call(t, http.MethodPost, b.url+"/api/v1/policy", body(denyTransfers, `,"draft":true`), &saved, "Authorization", as(admin)),
		"the same draft again is no new version")
	require.Equal(t, int64(2), saved.Version)

	var cur struct {
		Version  int64
		Versions []struct{ Version int64 }
	}
	require.Equal(t, http.StatusOK, call(t, http.MethodGet, b.url+"/api/v1/policy", "", &cur, "Authorization", as(reviewer)))
	require.Equal(t, int64(1), cur.Version, "a draft is not in force")
	require.Len(t, cur.Versions, 2)
	require.Equal(t, "policy small v1", decidedBy(20))

	var v struct {
		Version int64
		Source  string
		InForce bool `json:"in_force"`
	}
	require.Equal(t, http.StatusOK, call(t, http.MethodGet, b.url+"/api/v1/policy/versions/2", "", &v, "Authorization", as(reviewer)))
	require.Equal(t, denyTransfers, v.Source)
	require.False(t, v.InForce)
	var rep struct{ Deny int }
	require.Equal(t, http.StatusOK, call(t, http.MethodPost, b.url+"/api/v1/policy/whatif", body(v.Source, ""), &rep, "Authorization", as(reviewer)))
	require.Equal(t, 1, rep.Deny, "the draft is tried on the decision v1 made")

	require.Equal(t, http.StatusForbidden, call(t, http.MethodPost, b.url+"/api/v1/policy/versions/2/activate", "", &e, "Authorization", as(reviewer)))
	require.Equal(t, http.StatusNotFound, call(t, http.MethodPost, b.url+"/api/v1/policy/versions/9/activate", "", &e, "Authorization", as(admin)))
	require.Equal(t, http.StatusOK, call(t, http.MethodPost, b.url+"/api/v1/policy/versions/2/activate", "", &v, "Authorization", as(admin)))
	require.True(t, v.InForce)
	require.Equal(t, "policy no-transfers v2", decidedBy(20), "the version put in force decides the next interrupt")
	require.Equal(t, http.StatusOK, call(t, http.MethodGet, b.url+"/api/v1/policy/versions/1", "", &v, "Authorization", as(admin)))
	require.False(t, v.InForce)

	// The page, signed in as the admin: it names the version in force, lists the others, and its
	// forms carry the CSRF token, without which a cookie's request is refused.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest(http.MethodPost, b.url+"/login", strings.NewReader(url.Values{
		"username": {"ada"}, "password": {"correct horse battery"}, "next": {"/"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	page := func(path string) string {
		resp, err := client.Get(b.url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		html, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(html))
		return string(html)
	}
	form := func(path string, values url.Values) *http.Response {
		resp, err := client.PostForm(b.url+path, values)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	html := page("/policy?version=1")
	require.Contains(t, html, `In force: version <strong>2</strong>`)
	require.Regexp(t, `<tr data-version="2">(?s:.)*?data-testid="in-force"`, html)
	require.Contains(t, html, `data-testid="policy-selected"`, "version 1 is shown, not in force")
	require.Contains(t, html, `action="/policy/versions/1/activate"`)
	csrf := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(html)
	require.NotNil(t, csrf)

	require.Equal(t, http.StatusForbidden, form("/policy/versions/1/activate", url.Values{}).StatusCode, "no CSRF token, no change")
	resp = form("/policy/versions/1/activate", url.Values{"_csrf": {csrf[1]}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "policy small v1", decidedBy(30), "the old version is back in force")

	resp = form("/policy", url.Values{"_csrf": {csrf[1]}, "source": {denyTransfers + "    # frozen again\n"}, "draft": {"1"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/policy?version=3", resp.Header.Get("Location"))
	html = page("/policy?version=3")
	require.Contains(t, html, `In force: version <strong>1</strong>`, "a draft saved on the page is not in force")
	require.Contains(t, html, "# frozen again")

	// A reviewer's form post is refused by the server, whatever the page shows them.
	r, err := http.NewRequest(http.MethodPost, b.url+"/policy/versions/3/activate", nil)
	require.NoError(t, err)
	r.Header.Set("Authorization", as(reviewer))
	resp, err = http.DefaultClient.Do(r)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, http.StatusOK, call(t, http.MethodGet, b.url+"/api/v1/policy", "", &cur, "Authorization", as(admin)))
	require.Equal(t, int64(1), cur.Version)
}
