package server

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestInboxShowsTheRuleThatRoutedAnItem: a policy rule that requires two approvers and sets a
// deadline leaves the interrupt to people; the inbox row names the rule and its version, the
// approvals it needs and the time left; the detail says why, who approved so far, and when it is
// denied. An item no rule routed says nothing of the kind.
func TestInboxShowsTheRuleThatRoutedAnItem(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	ctx := context.Background()
	_, _, err := b.store.PolicySave(ctx, store.PolicySaveParams{Origin: "test", CreatedBy: "admin", Source: `rules:
  - name: two-people
    tool: transfer
    when: input.amount >= 1000
    decide: require
    approvals: 2
    expires: 2h
    reason: large transfers need two people
`})
	require.NoError(t, err)
	big := b.startRun(t, "/flow/transferMoney", `{"to":"ann","amount":5000,"currency":"EUR"}`, store.RunInterrupted)
	small := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":10,"currency":"EUR"}`, store.RunInterrupted)
	it, other := b.pending(t, big.ID), b.pending(t, small.ID)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, b.pending(t, big.ID).Status, "one approval of two")

	resp, page := get(t, b.url+"/inbox?sel="+it.ID.String())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	row := regexp.MustCompile(`(?s)<li class="inbox-item[^"]*" id="i-` + it.ID.String() + `".*?</li>`).FindString(page)
	require.NotEmpty(t, row)
	require.Contains(t, row, `<span class="routing" data-rule="two-people" title="large transfers need two people">policy two-people v1</span>`)
	require.Contains(t, row, `needs 2 approvals`)
	require.Regexp(t, `<span class="deadline" data-deadline title="denied at [^"]+ if nobody decides">1h left</span>`, row)
	plain := regexp.MustCompile(`(?s)<li class="inbox-item[^"]*" id="i-` + other.ID.String() + `".*?</li>`).FindString(page)
	require.NotEmpty(t, plain)
	require.NotContains(t, plain, `class="routing"`)

	note := regexp.MustCompile(`(?s)<p class="routing-note small" data-testid="routing-note">.*?</p>`).FindString(page)
	require.Contains(t, note, `Routed by <strong data-rule="two-people">policy two-people v1</strong>`)
	require.Contains(t, note, `: large transfers need two people`)
	require.Contains(t, note, `needs 2 distinct approvals, 1 so far (rita)`)
	require.Contains(t, note, `denied at`)
}
