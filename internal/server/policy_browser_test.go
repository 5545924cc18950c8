package server

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
)

// TestBrowserPolicyDraftIsSavedTriedAndPutInForce works the Policy page in Chromium: the editor's
// "Save as a draft" stores a version that is not in force and shows it in the editor and the
// what-if; "Try it" runs the what-if on it and keeps it shown; "Put version 2 in force" makes it the one in force,
// which the versions table marks. No console error or CSP violation on the way.
func TestBrowserPolicyDraftIsSavedTriedAndPutInForce(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	_, _, err := runs.SavePolicy(context.Background(), b.store, []byte(whatIfPolicy), "test", "admin")
	require.NoError(t, err)
	br := browsertest.New(t)

	var inForce, selected, draft string
	var loc, html string
	defer func() {
		if t.Failed() {
			_ = chromedp.Run(br.Ctx, chromedp.Location(&loc), chromedp.OuterHTML("body", &html, chromedp.ByQuery))
			t.Logf("at %s: %s\nproblems: %v", loc, html, br.Problems())
		}
	}()
	// submit clicks a button that submits its form, and waits for the page the POST leads to.
	submit := func(sel string) {
		t.Helper()
		_, err := chromedp.RunResponse(br.Ctx, browsertest.Click(sel))
		require.NoError(t, err)
	}
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/policy"),
		chromedp.WaitVisible("#policy-source", chromedp.ByQuery),
		chromedp.SetValue("#policy-source", denyTransfers, chromedp.ByQuery),
	))
	submit(`[data-testid="save-draft"]`)
	require.NoError(t, br.Run(
		chromedp.WaitVisible(`[data-testid="policy-selected"]`, chromedp.ByQuery),
		chromedp.Text(`[data-testid="policy-version"]`, &inForce, chromedp.ByQuery),
		chromedp.Text(`[data-testid="policy-selected"]`, &selected, chromedp.ByQuery),
		chromedp.Value("#whatif-source", &draft, chromedp.ByQuery),
	))
	require.Contains(t, inForce, "In force: version 1")
	require.Contains(t, selected, "version 2, which is not in force")
	require.Equal(t, denyTransfers, draft, "the draft is in the what-if")

	submit(`form[action="/policy/whatif"] button[type="submit"]`)
	require.NoError(t, br.Run(
		chromedp.WaitVisible(`[data-testid="whatif-report"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-testid="activate-selected"]`, chromedp.ByQuery),
	))
	submit(`[data-testid="activate-selected"]`)
	require.NoError(t, br.Run(
		chromedp.WaitVisible(`tr[data-version="2"] [data-testid="in-force"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form[action="/policy/versions/1/activate"]`, chromedp.ByQuery),
		chromedp.Text(`[data-testid="policy-version"]`, &inForce, chromedp.ByQuery),
	))
	require.Contains(t, inForce, "In force: version 2")
	v, err := b.store.PolicyInForceVersion(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	require.Empty(t, br.Problems(), "no console error or CSP violation")
}
