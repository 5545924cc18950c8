package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

const whatIfPolicy = `rules:
  - name: small
    tool: transfer
    when: input.amount < 100
    decide: approve
  - name: bob-never
    tool: transfer
    when: input.to == "bob"
    decide: deny
    reason: bob is not a payee
`

// TestPolicyAPISavesVersionsAndTriesDraftsOnPastDecisions stores policies through the API (a
// broken one is a 422 naming its line), and tries a draft on the decisions reviewers made: the
// what-if counts what it would decide and lists each case where it disagrees with a person.
func TestPolicyAPISavesVersionsAndTriesDraftsOnPastDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	ctx := context.Background()
	decide := func(to string, amount int, action string) {
		run := b.startRun(t, "/flow/transferMoney", fmt.Sprintf(`{"to":%q,"amount":%d,"currency":"EUR"}`, to, amount), store.RunInterrupted)
		if action == "" {
			return
		}
		_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, run.ID).ID, Action: action, Actor: "rita"})
		require.NoError(t, err)
	}
	decide("ann", 50, runs.ActionApprove)  // the draft approves it too
	decide("cid", 60, runs.ActionDeny)     // the draft would approve what rita denied
	decide("bob", 500, runs.ActionApprove) // the draft would deny what rita approved
	decide("dee", 5000, runs.ActionDeny)   // no rule: left to a person
	decide("eve", 70, "")                  // pending: the draft would decide it

	var rep struct {
		Interrupts, Approve, Deny, Ask int
		Pending                        int `json:"pending_decided"`
		Disagreements                  []struct {
			InterruptID string `json:"interrupt_id"`
			Rule        string
			Policy      string
			Status      string
			ResolvedBy  string `json:"resolved_by"`
		}
	}
	body := func(src string, extra string) string {
		return fmt.Sprintf(`{"source":%q%s}`, src, extra)
	}
	require.Equal(t, http.StatusOK, call(t, http.MethodPost, b.url+"/api/v1/policy/whatif", body(whatIfPolicy, `,"last":100`), &rep))
	require.Equal(t, 5, rep.Interrupts)
	require.Equal(t, 3, rep.Approve)
	require.Equal(t, 1, rep.Deny)
	require.Equal(t, 1, rep.Ask)
	require.Equal(t, 1, rep.Pending)
	require.Len(t, rep.Disagreements, 2)
	got := map[string]string{}
	for _, d := range rep.Disagreements {
		got[d.Rule] = d.Policy + " where " + d.ResolvedBy + " " + d.Status
	}
	require.Equal(t, map[string]string{"small": "approve where rita denied", "bob-never": "deny where rita approved"}, got)

	var e apiError
	require.Equal(t, http.StatusUnprocessableEntity, call(t, http.MethodPost, b.url+"/api/v1/policy/whatif",
		body("rules:\n  - name: x\n    when: input.amount <\n    decide: approve\n", ""), &e))
	require.Contains(t, e.Error.Message, `policy line 2 rule "x"`)
	require.Equal(t, http.StatusUnprocessableEntity, call(t, http.MethodPost, b.url+"/api/v1/policy/whatif", body(whatIfPolicy, `,"last":-1`), &e))
	require.Equal(t, http.StatusBadRequest, call(t, http.MethodPost, b.url+"/api/v1/policy/whatif", `{"source": 3}`, &e))

	// Saving: a new version, the same source again is no new version, a broken one is refused.
	var saved store.Policy
	require.Equal(t, http.StatusCreated, call(t, http.MethodPost, b.url+"/api/v1/policy", body(whatIfPolicy, ""), &saved))
	require.Equal(t, int64(1), saved.Version)
	require.Equal(t, "ui", saved.Origin)
	require.Equal(t, http.StatusOK, call(t, http.MethodPost, b.url+"/api/v1/policy", body(whatIfPolicy, ""), &saved))
	require.Equal(t, int64(1), saved.Version)
	require.Equal(t, http.StatusUnprocessableEntity, call(t, http.MethodPost, b.url+"/api/v1/policy", body("rules:\n  - name: x\n    decide: perhaps\n", ""), &e))
	require.Contains(t, e.Error.Message, `decide "perhaps"`)
	var cur struct {
		Version int64
		Rules   []struct{ Name string }
	}
	require.Equal(t, http.StatusOK, call(t, http.MethodGet, b.url+"/api/v1/policy", "", &cur))
	require.Equal(t, int64(1), cur.Version)
	require.Len(t, cur.Rules, 2)

	// In force: the next small transfer is approved by the policy, bob's is denied.
	run := b.startRun(t, "/flow/transferMoney", `{"to":"fay","amount":20,"currency":"EUR"}`, store.RunSucceeded)
	list, err := b.store.InterruptListByRun(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, "policy small v1", *list[0].ResolvedBy)

	// The page shows the version and the what-if.
	form := url.Values{"source": {whatIfPolicy}, "last": {"100"}}
	resp, err := http.PostForm(b.url+"/policy/whatif", form)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	require.Contains(t, string(page), `data-testid="whatif-disagreements"`)
	require.Equal(t, 2, strings.Count(string(page), `href="/inbox/items/`))
}
