package server

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserRunPageWith10000SpansStaysUsable opens a run whose trace has 10,000 spans. The page
// renders the turns collapsed (a few dozen rows, not ten thousand), a turn expands to its model
// and tool calls, and a selected span shows its payloads.
func TestBrowserRunPageWith10000SpansStaysUsable(t *testing.T) {
	t.Parallel()
	b := uiSetup(t, true)
	runID := seedTrace(t, b.store, 10000)
	br := browsertest.New(t)

	var rows, open int
	var header string
	turn := `[...document.querySelectorAll(".span-row")].find(r => r.querySelector(".span-label")?.textContent === "turn 7")`
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+runID.String()),
		chromedp.WaitVisible(`.spantree`, chromedp.ByQuery),
		chromedp.Text(`#trace`, &header, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &rows),
		chromedp.Evaluate(turn+`.querySelector("[data-toggle]").click(); true`, nil),
		wait(turn+`.getAttribute("aria-expanded") === "true"`),
		chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &open),
		chromedp.Evaluate(turn+`.nextElementSibling.querySelector("[data-select]").click(); true`, nil),
		wait(`document.querySelector("#span-detail")?.textContent.includes("genkit:output")`),
	))
	require.Contains(t, header, "10000 spans")
	require.Less(t, rows, 300, "only the collapsed turns are rendered, not 10,000 rows")
	require.Equal(t, rows+7, open, "expanding a turn adds its model call and six tool calls")
	require.Empty(t, br.Problems())
}

// TestBrowserUsersAdminCreatesChangesAndDisablesUsers works the admin's users page in a browser.
func TestBrowserUsersAdminCreatesChangesAndDisablesUsers(t *testing.T) {
	t.Parallel()
	b := uiSetup(t, true)
	br := browsertest.New(t)
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/users"),
		chromedp.WaitVisible(`form[action="/users"]`, chromedp.ByQuery),
		chromedp.SendKeys(`form[action="/users"] input[name=username]`, "dana", chromedp.ByQuery),
		chromedp.SendKeys(`form[action="/users"] input[name=password]`, "correct horse 1", chromedp.ByQuery),
		chromedp.SetValue(`form[action="/users"] select[name=role]`, "reviewer", chromedp.ByQuery),
		chromedp.Click(`form[action="/users"] button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`tr[data-user="dana"]`, chromedp.ByQuery),
	))
	u, err := b.store.UserGetByUsername(context.Background(), "dana")
	require.NoError(t, err)
	require.Equal(t, store.RoleReviewer, u.Role)

	require.NoError(t, br.Run(
		chromedp.SetValue(`tr[data-user="dana"] select[name=role]`, "admin", chromedp.ByQuery),
		chromedp.Click(`tr[data-user="dana"] input[name=disabled]`, chromedp.ByQuery),
	))
	// RunResponse waits for the navigation that the submit starts, so the change is saved.
	_, err = chromedp.RunResponse(br.Ctx, chromedp.Click(`tr[data-user="dana"] button[type=submit]`, chromedp.ByQuery))
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

// TestBrowserRunsFiltersNarrowTheList filters the runs list by status and by text in a browser.
func TestBrowserRunsFiltersNarrowTheList(t *testing.T) {
	t.Parallel()
	b := uiSetup(t, true)
	done := b.startRun(t, "/flow/countdown", `{"from":1}`, store.RunSucceeded)
	waiting := b.startRun(t, "/flow/transferMoney", `{"to":"zed","amount":5,"currency":"EUR"}`, store.RunInterrupted)
	br := browsertest.New(t)
	count := `document.querySelectorAll("tr[data-run]").length`
	var all, interrupted, searched int
	var url string
	submit := func() {
		t.Helper()
		// RunResponse waits for the navigation the click starts.
		_, err := chromedp.RunResponse(br.Ctx, chromedp.Click(`form.filters button[type=submit]`, chromedp.ByQuery))
		require.NoError(t, err)
	}
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs"),
		chromedp.WaitVisible(`form.filters`, chromedp.ByQuery),
		chromedp.Evaluate(count, &all),
		chromedp.SetValue(`form.filters select[name=status]`, "interrupted", chromedp.ByQuery),
	))
	submit()
	require.NoError(t, br.Run(
		chromedp.WaitVisible(`form.filters`, chromedp.ByQuery),
		chromedp.Evaluate(count, &interrupted),
		chromedp.WaitVisible(`tr[data-run="`+waiting.ID.String()+`"]`, chromedp.ByQuery),
		chromedp.SetValue(`form.filters select[name=status]`, "", chromedp.ByQuery),
		chromedp.SetValue(`form.filters input[name=q]`, "zed", chromedp.ByQuery),
	))
	submit()
	require.NoError(t, br.Run(
		chromedp.WaitVisible(`form.filters`, chromedp.ByQuery),
		chromedp.Evaluate(count, &searched),
		chromedp.Evaluate(`location.href`, &url),
	))
	require.Equal(t, 2, all)
	require.Equal(t, 1, interrupted, "only the interrupted run")
	require.Equal(t, 1, searched, "only the run whose input mentions zed")
	require.Contains(t, url, "q=zed", "the filter is in the address, so it can be shared")
	require.NotContains(t, url, done.ID.String())
	require.Empty(t, br.Problems())
}
