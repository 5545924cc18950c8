package server

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// markPage marks the page shown, so that afterNavigation can tell the next one from it.
var markPage = chromedp.Evaluate(`document.body.dataset.before = "1"`, nil)

// afterNavigation waits until a page that markPage did not mark shows selector: a poll that runs
// while the browser navigates fails, a query waits.
func afterNavigation(selector string) chromedp.Action {
	return chromedp.WaitVisible("body:not([data-before]) "+selector, chromedp.ByQuery)
}

// TestBrowserInboxEmptyStatesSayWhy: filters chosen in the form that match nothing while items
// wait say which filters and how many wait; a filtered list emptied live (its items resolved
// elsewhere) says the same, not "Nothing waits"; an unfiltered one emptied live says nothing waits.
func TestBrowserInboxEmptyStatesSayWhy(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	l, p := b.travel(t, "Lisbon"), b.travel(t, "Porto")
	tr := b.pending(t, b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":5,"currency":"EUR"}`, store.RunInterrupted).ID)
	br := browsertest.New(t)
	var text string
	var hidden bool
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		chromedp.SetValue(`form.filters select[name=tool]`, "transfer", chromedp.ByQuery),
		chromedp.SetValue(`form.filters select[name=action]`, "/flow/travelAgent", chromedp.ByQuery),
		markPage,
		chromedp.Click(`form.filters button[type=submit]`, chromedp.ByQuery),
		afterNavigation(`#inbox-empty`),
		wait(`location.search.includes("tool=transfer") && document.documentElement.dataset.inbox === "ready"`),
		chromedp.Evaluate(`document.getElementById("inbox-empty").hidden`, &hidden),
		textOf(`#inbox-empty`, &text),
	))
	require.False(t, hidden)
	require.Equal(t, "No item matches tool=transfer, action=/flow/travelAgent; 3 others wait. Show all", text)

	// Filtered on the bookings, both resolved elsewhere: the transfer still waits, and the page says so.
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox?tool=bookFlight"),
		wait(`document.documentElement.dataset.inbox === "ready" && document.documentElement.dataset.live === "live"`),
		wait(`document.querySelectorAll(".inbox-item").length === 2`),
		chromedp.Evaluate(`window.marker = 1`, nil),
	))
	for _, it := range []*store.Interrupt{l, p} {
		_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "alice"})
		require.NoError(t, err)
	}
	require.NoError(t, br.Run(
		wait(`document.querySelectorAll(".inbox-item").length === 0 && !document.getElementById("inbox-empty").hidden && window.marker === 1`),
		wait(`document.getElementById("inbox-empty").innerText.endsWith("Show all")`),
		textOf(`#inbox-empty`, &text),
	))
	require.Equal(t, "No item matches tool=bookFlight; 1 other waits. Show all", text)

	// Unfiltered, the last item resolved elsewhere: nothing waits.
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready" && document.documentElement.dataset.live === "live"`),
		wait(`document.querySelectorAll(".inbox-item").length === 1`),
		chromedp.Evaluate(`window.marker = 1`, nil),
	))
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: tr.ID, Action: runs.ActionDeny, Actor: "alice", Comment: "no"})
	require.NoError(t, err)
	require.NoError(t, br.Run(
		wait(`document.querySelectorAll(".inbox-item").length === 0 && !document.getElementById("inbox-empty").hidden && window.marker === 1`),
		wait(`document.getElementById("inbox-empty").innerText.startsWith("Nothing waits") && document.getElementById("inbox-count").textContent === "0 pending"`),
		textOf(`#inbox-empty`, &text),
	))
	require.Equal(t, "Nothing waits for a reviewer. See what was resolved", text)
	require.Empty(t, br.Problems())
}
