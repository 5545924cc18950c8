package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestInterruptsRoutedToAGroupAreForItsMembers: a policy rule leaves large transfers to the
// treasury group. The inbox's "for me" (page and API) lists them to a member and to an admin, not
// to another reviewer, whose decision through the API is a 403 that changes nothing; the item
// says who may decide it; a member's decision goes through. Groups are set on the Users page.
func TestInterruptsRoutedToAGroupAreForItsMembers(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{stack: true})
	ctx := context.Background()
	_, _, err := runs.SavePolicy(ctx, b.store, []byte(`rules:
  - name: treasury
    tool: transfer
    when: input.amount >= 1000
    decide: require
    group: treasury
`), "test", "admin")
	require.NoError(t, err)
	ann := b.userToken(t, "ann", store.RoleReviewer)
	bob := b.userToken(t, "bob", store.RoleReviewer)
	root := b.userToken(t, "root", store.RoleAdmin)
	u, err := b.store.UserGetByUsername(ctx, "ann")
	require.NoError(t, err)
	groups := []string{"treasury"}
	_, err = b.store.UserUpdate(ctx, u.ID, store.UserUpdateParams{Groups: &groups})
	require.NoError(t, err)

	big := b.startRun(t, "/flow/transferMoney", `{"to":"carol","amount":5000,"currency":"EUR"}`, store.RunInterrupted)
	small := b.startRun(t, "/flow/transferMoney", `{"to":"dan","amount":50,"currency":"EUR"}`, store.RunInterrupted)
	bigIt, smallIt := b.pending(t, big.ID), b.pending(t, small.ID)

	call := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}
	forMe := func(token string) []string {
		t.Helper()
		code, body := call(http.MethodGet, "/api/v1/interrupts?for=me", token, "")
		require.Equal(t, http.StatusOK, code, body)
		var list struct{ Interrupts []struct{ ID string } }
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		var ids []string
		for _, it := range list.Interrupts {
			ids = append(ids, it.ID)
		}
		return ids
	}
	require.ElementsMatch(t, []string{bigIt.ID.String(), smallIt.ID.String()}, forMe(ann))
	require.ElementsMatch(t, []string{smallIt.ID.String()}, forMe(bob), "the treasury's item is not for bob")
	require.ElementsMatch(t, []string{bigIt.ID.String(), smallIt.ID.String()}, forMe(root), "an admin may decide any")
	code, _ := call(http.MethodGet, "/api/v1/interrupts?for=you", bob, "")
	require.Equal(t, http.StatusBadRequest, code)

	_, page := get(t, b.url+"/inbox?for=me", "Authorization", "Bearer "+bob, "Accept", "text/html")
	require.Contains(t, page, `data-interrupt="`+smallIt.ID.String()+`"`)
	require.NotContains(t, page, `data-interrupt="`+bigIt.ID.String()+`"`, "the treasury's item is not listed for bob")
	_, page = get(t, b.url+"/inbox", "Authorization", "Bearer "+bob, "Accept", "text/html")
	require.Contains(t, page, `data-interrupt="`+bigIt.ID.String()+`"`, "without the filter, every item is listed")
	_, page = get(t, b.url+"/inbox?sel="+bigIt.ID.String(), "Authorization", "Bearer "+ann, "Accept", "text/html")
	require.Contains(t, page, "only members of group treasury (and admins) may decide it")

	code, body := call(http.MethodPost, "/api/v1/interrupts/"+bigIt.ID.String()+"/resolve", bob, `{"action":"approve"}`)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "members of group treasury")
	it, err := b.store.InterruptGet(ctx, bigIt.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, it.Status)
	code, body = call(http.MethodPost, "/api/v1/interrupts/"+bigIt.ID.String()+"/resolve", ann, `{"action":"approve"}`)
	require.Equal(t, http.StatusOK, code, body)
	b.waitStatus(t, big.ID, store.RunSucceeded)
}
