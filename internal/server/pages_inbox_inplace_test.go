package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserInboxDecisionsInPlace: approving by key and by mouse, and denying, update the list,
// the count and the detail (the next item) without a page load; an edited approval of an item
// that needs confirming shows the edited arguments it will send, not the original question, and
// sends them.
func TestBrowserInboxDecisionsInPlace(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	l, p, f := b.travel(t, "Lisbon"), b.travel(t, "Porto"), b.travel(t, "Faro")
	tr := b.pending(t, b.startRun(t, "/flow/transferMoney", `{"to":"judy","amount":10000,"currency":"USD"}`, store.RunInterrupted).ID)
	br := browsertest.New(t)
	shown := func(id fmt.Stringer) chromedp.Action {
		return wait(fmt.Sprintf(`document.querySelector("#inbox-detail .inbox-detail")?.dataset.interrupt === %q && !document.querySelector("#inbox-detail form[data-resolve]")?.dataset.submitting`, id))
	}
	var count, flash string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready" && document.documentElement.dataset.live === "live"`),
		chromedp.Evaluate(`window.marker = 1`, nil),
		shown(l.ID),
		// a, by keyboard: the next item comes in place.
		chromedp.KeyEvent("a"),
		shown(p.ID),
		wait(`document.querySelectorAll(".inbox-item").length === 3`),
		wait(`document.getElementById("inbox-count").textContent === "3 pending"`),
		chromedp.Text(`#flash.ok`, &flash, chromedp.ByQuery),
		// Approve by mouse.
		browsertest.Click(fmt.Sprintf(`#d-%s button[data-key="a"]`, p.ID)),
		shown(f.ID),
		// Deny with a reason: d, the reason, Enter.
		chromedp.KeyEvent("d"),
		wait(`document.activeElement.name === "reason"`),
		chromedp.KeyEvent("no flights on Fridays"),
		chromedp.KeyEvent("\r"),
		shown(tr.ID),
		wait(`document.getElementById("inbox-count").textContent === "1 pending"`),
	))
	require.Contains(t, flash, "approved by local")
	for it, want := range map[*store.Interrupt]string{l: store.InterruptApproved, p: store.InterruptApproved, f: store.InterruptDenied} {
		got, err := b.store.InterruptGet(ctx, it.ID, false)
		require.NoError(t, err)
		require.Equal(t, want, got.Status)
	}

	// The transfer, edited to 50: its confirmation shows the amount that will be sent.
	var what, args, changes string
	var promptHidden bool
	require.NoError(t, br.Run(
		chromedp.SetValue(fmt.Sprintf(`#d-%s [data-pointer="/amount"]`, tr.ID), "50", chromedp.ByQuery),
		chromedp.Evaluate(fmt.Sprintf(`document.querySelector('#d-%s [data-pointer="/amount"]').dispatchEvent(new Event("input", {bubbles: true}))`, tr.ID), nil),
		chromedp.KeyEvent("a"),
		chromedp.WaitVisible(fmt.Sprintf("#d-%s [data-confirm-step]", tr.ID), chromedp.ByQuery),
		chromedp.Text(`[data-confirm-what]`, &what, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector("[data-confirm-prompt]").hidden`, &promptHidden),
		chromedp.Text(`[data-confirm-json]`, &args, chromedp.ByQuery),
		chromedp.Text(`[data-confirm-changes]`, &changes, chromedp.ByQuery),
		chromedp.KeyEvent("\r"),
		wait(`document.querySelectorAll(".inbox-item").length === 0`),
		wait(`document.getElementById("inbox-count").textContent === "0 pending"`), // asked of the server after the event
		chromedp.Text(`#inbox-count`, &count, chromedp.ByQuery),
	))
	require.Equal(t, "Confirm approve edited", what)
	require.True(t, promptHidden, "the original question ($10000 to judy?) is not what is confirmed")
	require.Contains(t, args, `"amount": 50`)
	require.Contains(t, changes, "amount: 10000 → 50")
	require.Equal(t, "0 pending", count)
	got, err := b.store.InterruptGet(ctx, tr.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptEdited, got.Status)
	require.Contains(t, string(got.Resolution), `"amount": 50`)

	var marker int
	require.NoError(t, br.Run(chromedp.Evaluate(`window.marker`, &marker)))
	require.Equal(t, 1, marker, "no decision loaded a page")
	require.Empty(t, br.Problems())
}

// TestInboxResolveInPlaceAnswersJSON: the inbox script's POST (Accept: application/json) gets
// what became of the item, or the item to show again with why; the same form without the header
// still redirects to the inbox, as a browser without JS needs.
func TestInboxResolveInPlaceAnswersJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	l, p := b.travel(t, "Lisbon"), b.travel(t, "Porto")
	post := func(id fmt.Stringer, form url.Values, accept string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodPost, b.url+"/inbox/"+id.String()+"/resolve", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}
	resp, body := post(l.ID, url.Values{"action": {"approve"}}, "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var out inboxDecision
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Equal(t, store.InterruptApproved, out.Status)
	require.Contains(t, out.Flash, "approved by local")

	resp, body = post(p.ID, url.Values{"action": {"edit"}, "input": {"{not json"}}, "application/json")
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	out = inboxDecision{}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Empty(t, out.Status)
	require.True(t, out.FlashError)
	require.Contains(t, out.Detail, `id="d-`+p.ID.String()+`"`)
	require.Contains(t, out.Detail, "{not json", "what the reviewer typed is kept")
	require.NotContains(t, out.Detail, "<html", "the item alone")

	resp, _ = post(p.ID, url.Values{"action": {"approve"}}, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "without the script, a plain form POST and its redirect")
	require.Contains(t, resp.Header.Get("Location"), "done="+p.ID.String())
}

// TestInboxItemOpenedAloneIsAPage: /inbox/items/{id} in a tab has the layout and the stylesheet;
// asked for as a fragment it is the detail alone. The question renders as Markdown, sanitised;
// the metadata is a table of its keys.
func TestInboxItemOpenedAloneIsAPage(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	ctx := context.Background()
	var id string
	require.NoError(t, b.store.Pool().QueryRow(ctx, `
		WITH r AS (INSERT INTO runs (action, input, status) VALUES ('/flow/transferMoney', '{}', 'interrupted') RETURNING id)
		INSERT INTO interrupts (run_id, turn, tool, ref, input, metadata)
		SELECT id, 0, 'transfer', 'transfer-1', '{"to":"judy","amount":10000}',
			'{"message":"Confirm transfer of **$10000** to judy? <script>alert(1)</script> [x](javascript:alert(1))","irreversible":true,"limits":{"daily":500}}'
		FROM r RETURNING id::text`).Scan(&id))

	resp, page := get(t, b.url+"/inbox/items/"+id, "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, `<link rel="stylesheet"`, "opened alone, it has the layout")
	require.Contains(t, page, `data-page="inbox-item"`)
	require.Contains(t, page, "Confirm transfer of <strong>$10000</strong> to judy?")
	require.NotContains(t, page, "<script>alert(1)")
	require.NotContains(t, page, `href="javascript:`, "as text it is shown escaped; as a link it is dropped")
	require.Contains(t, page, `<th scope="row">irreversible</th><td><code class="json-inline">true</code></td>`)
	require.Contains(t, page, `<th scope="row">limits</th><td><code class="json-inline">{&#34;daily&#34;:500}</code></td>`)

	resp, frag := get(t, b.url+"/inbox/items/"+id, "Accept", "text/html", "X-Loupe-Fragment", "1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(strings.TrimSpace(frag), `<article class="inbox-detail`), "asked as a fragment: %.80s", frag)
	require.Contains(t, resp.Header.Values("Vary"), "X-Loupe-Fragment")
}
