package server

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// travel starts a travel run and returns its pending booking.
func (b *bundle) travel(t *testing.T, dest string) *store.Interrupt {
	t.Helper()
	run := b.startRun(t, "/flow/travelAgent", `{"destination":"`+dest+`"}`, store.RunInterrupted)
	return b.pending(t, run.ID)
}

// TestBrowserInboxCompactListWithDetailPane: each pending item is one compact line of the list
// (two text lines at most) with the selected one in full beside it; j/k and a click move the
// selection and load its detail in place, without a reload; Enter goes into the form; another
// tab that opens an item shows in this tab's row as "local has it open".
func TestBrowserInboxCompactListWithDetailPane(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	i1, i2, i3 := b.travel(t, "Lisbon"), b.travel(t, "Porto"), b.travel(t, "Faro")
	br := browsertest.New(t)
	other := tab(t, br)
	var heights []float64
	var beside bool
	var shown, focused string
	require.NoError(t, br.Run(
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready" && document.documentElement.dataset.live === "live"`),
		chromedp.Evaluate(`[...document.querySelectorAll("#inbox-items .inbox-item")].map((r) => r.getBoundingClientRect().height)`, &heights),
		chromedp.Evaluate(`document.querySelector("#inbox-detail .inbox-detail").getBoundingClientRect().left >= document.getElementById("inbox-items").getBoundingClientRect().right`, &beside),
		chromedp.Evaluate(`window.marker = 1`, nil),
	))
	require.Len(t, heights, 3)
	for _, h := range heights {
		require.Less(t, h, 60.0, "one or two lines per item")
	}
	require.True(t, beside, "the detail pane is beside the list")

	require.NoError(t, br.Run(
		chromedp.KeyEvent("j"),
		wait(fmt.Sprintf(`!!document.getElementById("d-%s")`, i2.ID)),
		chromedp.Evaluate(`document.querySelector(".inbox-item.current").dataset.interrupt`, &shown),
	))
	require.Equal(t, i2.ID.String(), shown)
	require.NoError(t, br.Run(
		browsertest.Click(fmt.Sprintf(`#i-%s [data-open]`, i3.ID)),
		wait(fmt.Sprintf(`!!document.getElementById("d-%s") && window.marker === 1`, i3.ID)),
		chromedp.KeyEvent("k"),
		chromedp.KeyEvent("k"),
		wait(fmt.Sprintf(`!!document.getElementById("d-%s")`, i1.ID)),
		chromedp.KeyEvent("\r"),
		chromedp.Evaluate(`document.activeElement.dataset.pointer ?? document.activeElement.name`, &focused),
		chromedp.KeyEvent("\x1b"),
	))
	require.Equal(t, "/destination", focused, "Enter goes into the form's first field")

	// Typing in an item, moving away and back finds the work as it was left.
	var kept string
	require.NoError(t, br.Run(
		chromedp.Evaluate(`const c = document.querySelector("form[data-resolve] input[name=comment]"); c.value = "half done"; c.dispatchEvent(new Event("input", {bubbles: true})); c.blur(); true`, nil),
		chromedp.KeyEvent("j"),
		wait(fmt.Sprintf(`!!document.getElementById("d-%s")`, i2.ID)),
		chromedp.KeyEvent("k"),
		wait(fmt.Sprintf(`!!document.getElementById("d-%s")`, i1.ID)),
		chromedp.Evaluate(`document.querySelector("form[data-resolve] input[name=comment]").value`, &kept),
	))
	require.Equal(t, "half done", kept, "the draft is kept")
	var search string
	require.NoError(t, br.Run(chromedp.Evaluate(`location.search`, &search)))
	require.Equal(t, "?sel="+i1.ID.String(), search, "the address names the selection")

	// The run page links an item as /inbox?sel=<id>; the older /inbox#i-<id> selects it too.
	_, runPage := get(t, b.url+"/runs/"+i3.RunID.String(), "Accept", "text/html")
	require.Contains(t, runPage, `href="/inbox?sel=`+i3.ID.String()+`"`)
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox#i-"+i3.ID.String()),
		wait(fmt.Sprintf(`!!document.getElementById("d-%s") && document.querySelector(".inbox-item.current")?.id === "i-%s"`, i3.ID, i3.ID)),
	))

	// The other tab opens i2: this tab's row says so, live.
	require.NoError(t, chromedp.Run(other,
		chromedp.Navigate(b.url+"/inbox?sel="+i2.ID.String()),
		wait(`document.documentElement.dataset.inbox === "ready"`),
	))
	var presence string
	require.NoError(t, br.Run(
		wait(fmt.Sprintf(`document.querySelector("#i-%s [data-presence]").textContent.includes("has it open")`, i2.ID)),
		textOf(fmt.Sprintf("#i-%s [data-presence]", i2.ID), &presence),
	))
	require.Contains(t, presence, "local has it open")
	require.Empty(t, br.Problems())
}

// TestInboxDenyAsksToConfirmAndTheModelGetsTheReason: without JS, Deny first shows the
// confirmation step (nothing applied); confirming without a reason is refused at the reason; with
// one, the run resumes and the tool's answer that the model reads carries the reason.
func TestInboxDenyAsksToConfirmAndTheModelGetsTheReason(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/transferMoney", `{"to":"mallory","amount":99999,"currency":"JPY"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)
	u := b.url + "/inbox/" + it.ID.String() + "/resolve"
	form := url.Values{"action": {"deny"}, "version": {fmt.Sprint(it.Version)}}

	resp, body := postForm(t, noRedirect, u, form)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	detail := inboxItemHTML(t, body, it.ID.String())
	require.Contains(t, detail, `<div class="confirm-step" data-confirm-step role="group"`, "the step is shown")
	require.Contains(t, detail, `name="confirm" value="1" data-confirm-flag`, "and armed")
	require.Contains(t, detail, "Confirm deny")
	require.Contains(t, detail, "it moves an amount (99999 JPY)")
	got, err := b.store.InterruptGet(context.Background(), it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, got.Status, "nothing is applied before confirming")

	form.Set("confirm", "1")
	resp, body = postForm(t, noRedirect, u, form)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, inboxItemHTML(t, body, it.ID.String()), "Say why you deny it: the model receives the reason.")

	form.Set("reason", "looks like fraud")
	resp, _ = postForm(t, noRedirect, u, form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err = b.store.InterruptGet(context.Background(), it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptDenied, got.Status)
	require.Equal(t, "looks like fraud", *got.Comment)

	b.startRun(t, "/flow/countdown", `{"from":1}`) // unrelated traffic
	require.Eventually(t, func() bool {
		r, err := b.store.RunGet(context.Background(), run.ID)
		require.NoError(t, err)
		return r.Status == store.RunSucceeded
	}, 30*time.Second, 20*time.Millisecond)
	msgs, err := b.store.MessageList(context.Background(), run.ID)
	require.NoError(t, err)
	var toolMsg string
	for _, m := range msgs {
		if m.Role == "tool" {
			toolMsg = string(m.Content)
		}
	}
	require.Contains(t, toolMsg, `"reason":"looks like fraud"`, "the model receives the reason")
}

// TestInterruptRiskNamesAmountsAndIrreversibleTools: what makes every decision ask to confirm.
func TestInterruptRiskNamesAmountsAndIrreversibleTools(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ input, metadata, want string }{
		{`{"to":"bob","amount":5,"currency":"EUR"}`, `true`, "it moves an amount (5 EUR)"},
		{`{"destination":"Lisbon"}`, `{"message":"ok?","irreversible":true}`, "the tool is marked irreversible"},
		{`{"destination":"Lisbon"}`, `{"message":"ok?","price":299}`, ""},
		{`{"amount":"lots"}`, `{"irreversible":"yes"}`, ""},
	} {
		got := interruptRisk(&store.Interrupt{Input: json.RawMessage(c.input), Metadata: json.RawMessage(c.metadata)})
		require.Equal(t, c.want, got, "%s %s", c.input, c.metadata)
	}
}

// TestBrowserInboxBulkApprovesEachAndSaysWhatBecameOfIt: selecting items and approving them
// resolves each on its own, audited; an item claimed by another reviewer is refused and the page
// says so, item by item. A bulk denial without a reason is refused as a whole.
func TestBrowserInboxBulkApprovesEachAndSaysWhatBecameOfIt(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	items := []*store.Interrupt{b.travel(t, "Lisbon"), b.travel(t, "Porto"), b.travel(t, "Faro")}
	ctx := context.Background()
	_, err := b.store.InterruptClaim(ctx, store.InterruptClaimParams{ID: items[2].ID, To: "alice"})
	require.NoError(t, err)
	br := browsertest.New(t)
	var results []map[string]string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		// A denial without a reason: the browser refuses it before sending.
		browsertest.Click(`[data-select-all]`),
		wait(`document.getElementById("bulk-count").textContent === "3 selected"`),
		browsertest.Click(`#bulk button[value="deny"]`),
		chromedp.Sleep(100*time.Millisecond),
	))
	for _, it := range items {
		got, err := b.store.InterruptGet(ctx, it.ID, false)
		require.NoError(t, err)
		require.Equal(t, store.InterruptPending, got.Status)
	}
	require.NoError(t, br.Run(
		browsertest.Click(`#bulk button[value="approve"]`),
		chromedp.WaitVisible(`#bulk-results`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("[data-bulk-result]")].map((r) => ({id: r.dataset.bulkResult, ok: r.dataset.ok, text: r.innerText}))`, &results),
	))
	require.Len(t, results, 3)
	for i, r := range results {
		require.Equal(t, items[i].ID.String(), r["id"])
		if i < 2 {
			require.Equal(t, "true", r["ok"])
			require.Contains(t, r["text"], "approved")
		} else {
			require.Equal(t, "false", r["ok"])
			require.Contains(t, r["text"], "claimed by alice")
		}
	}
	for i, it := range items {
		got, err := b.store.InterruptGet(ctx, it.ID, false)
		require.NoError(t, err)
		audit, err := b.store.AuditList(ctx, "interrupt", it.ID.String())
		require.NoError(t, err)
		if i < 2 {
			require.Equal(t, store.InterruptApproved, got.Status)
			require.Len(t, audit, 1, "each item is audited on its own")
			require.Equal(t, "interrupt.approve", audit[0].Action)
		} else {
			require.Equal(t, store.InterruptPending, got.Status)
		}
	}
	// It ends on a result page of its own, a GET: reloading it shows the same results and sends nothing.
	var path string
	require.NoError(t, br.Run(chromedp.Evaluate(`location.pathname`, &path)))
	require.Regexp(t, `^/inbox/bulk/[0-9a-f-]{36}$`, path)
	require.NoError(t, br.Run(
		chromedp.Reload(),
		chromedp.WaitVisible(`#bulk-results`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("[data-bulk-result]")].map((r) => ({id: r.dataset.bulkResult, ok: r.dataset.ok, text: r.innerText}))`, &results),
	))
	require.Len(t, results, 3)
	require.Contains(t, results[0]["text"], "approved", "the reload shows what the decision did, not a second attempt")
	for i, it := range items {
		audit, err := b.store.AuditList(ctx, "interrupt", it.ID.String())
		require.NoError(t, err)
		if i < 2 {
			require.Len(t, audit, 1, "nothing was applied twice")
		}
	}
	require.Empty(t, br.Problems())
}

// TestInboxBulkNeedsReasonAndConfirmation: without the script, a bulk denial needs a reason and
// the confirm box, and a bulk approval that includes an amount needs the box; a refusal resolves
// nothing. With both, each item is denied with the reason as its comment.
func TestInboxBulkNeedsReasonAndConfirmation(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	tr := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":5,"currency":"EUR"}`, store.RunInterrupted)
	ids := []string{b.pending(t, tr.ID).ID.String(), b.travel(t, "Lisbon").ID.String()}
	post := func(v url.Values) (*http.Response, string) {
		v["id"] = ids
		return postForm(t, noRedirect, b.url+"/inbox/bulk", v)
	}
	resp, body := post(url.Values{"action": {"deny"}, "confirm": {"1"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "a denial needs a reason")
	resp, body = post(url.Values{"action": {"deny"}, "reason": {"no"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "confirm that you have checked the 2 selected items")
	resp, body = post(url.Values{"action": {"approve"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "1 of the selected items move an amount or are irreversible")
	list, err := b.store.InterruptList(context.Background(), store.InterruptListParams{Status: store.InterruptPending})
	require.NoError(t, err)
	require.Len(t, list, 2, "nothing was resolved")

	resp, _ = post(url.Values{"action": {"deny"}, "reason": {"budget frozen"}, "confirm": {"1"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "POST, redirect, GET: a reload does not re-post")
	require.Regexp(t, `^/inbox/bulk/[0-9a-f-]{36}$`, resp.Header.Get("Location"))
	resp, body = get(t, b.url+resp.Header.Get("Location"), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Denied 2 of 2 selected items")
	for _, id := range ids {
		got, err := b.store.InterruptGet(context.Background(), uuid.MustParse(id), false)
		require.NoError(t, err)
		require.Equal(t, store.InterruptDenied, got.Status)
		require.Equal(t, "budget frozen", *got.Comment)
	}
}

// TestInboxClaimKeepsTwoReviewersApart: an item claimed by another reviewer says so in the list
// and the detail, and the server refuses anyone else's decision on it (inbox and API) until it is
// taken over; claims are audited.
func TestInboxClaimKeepsTwoReviewersApart(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	it := b.travel(t, "Lisbon")
	ctx := context.Background()
	_, err := b.store.InterruptClaim(ctx, store.InterruptClaimParams{ID: it.ID, To: "alice"})
	require.NoError(t, err)

	_, body := get(t, b.url+"/inbox", "Accept", "text/html")
	require.Contains(t, body, `<span class="claim">claimed by <strong>alice</strong></span>`, "the list says who has it")
	require.Contains(t, inboxItemHTML(t, body, it.ID.String()), `data-claimed-by="alice"`)

	u := b.url + "/inbox/" + it.ID.String() + "/resolve"
	resp, body := postForm(t, noRedirect, u, url.Values{"action": {"approve"}, "version": {fmt.Sprint(it.Version)}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "alice has claimed this item")
	require.Equal(t, http.StatusConflict, call(t, "POST", b.url+"/api/v1/interrupts/"+it.ID.String()+"/resolve", `{"action":"approve"}`, nil))

	resp, body = postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/claim", url.Values{"op": {"claim"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "alice has claimed this item already")

	resp, _ = postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/claim", url.Values{"op": {"assign"}, "to": {"bob"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err := b.store.InterruptGet(ctx, it.ID, false)
	require.NoError(t, err)
	require.Equal(t, "bob", *got.ClaimedBy, "assigned to bob")

	resp, _ = postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/claim", url.Values{"op": {"take"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/inbox?sel="+it.ID.String(), resp.Header.Get("Location"))
	_, body = get(t, b.url+"/inbox", "Accept", "text/html")
	require.Contains(t, inboxItemHTML(t, body, it.ID.String()), "You have claimed it")
	resp, _ = postForm(t, noRedirect, u, url.Values{"action": {"approve"}, "version": {fmt.Sprint(it.Version)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the claimant decides")
	audit, err := b.store.AuditList(ctx, "interrupt", it.ID.String())
	require.NoError(t, err)
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action)
	}
	require.Contains(t, actions, "interrupt.assign")
	require.Contains(t, actions, "interrupt.take")
	require.Contains(t, actions, "interrupt.approve")
}

// TestBrowserInboxClaimShowsInTheOtherTab: claiming an item in one tab marks it claimed in the
// other tab's list, live.
func TestBrowserInboxClaimShowsInTheOtherTab(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	it := b.travel(t, "Lisbon")
	br := browsertest.New(t)
	other := tab(t, br)
	require.NoError(t, chromedp.Run(other,
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready" && document.documentElement.dataset.live === "live"`),
		chromedp.Evaluate(`window.marker = 1`, nil),
	))
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		browsertest.Click(`[data-claim]`),
		chromedp.WaitVisible(`[data-release]`, chromedp.ByQuery),
	))
	var claim string
	require.NoError(t, chromedp.Run(other,
		wait(fmt.Sprintf(`!!document.querySelector("#i-%s .claim") && window.marker === 1`, it.ID)),
		textOf(fmt.Sprintf("#i-%s .claim", it.ID), &claim),
	))
	require.Equal(t, "claimed by local", claim)
	require.Empty(t, br.Problems())
}

// TestInboxHistoryListsWhoWhenHowAndComment: resolved items, newest first, with who resolved
// them, when, how and the comment, each linked to its run; filters narrow it and say so when
// nothing matches.
func TestInboxHistoryListsWhoWhenHowAndComment(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	a, d := b.travel(t, "Lisbon"), b.travel(t, "Porto")
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: a.ID, Action: runs.ActionApprove, Actor: "alice", Comment: "fine by me"})
	require.NoError(t, err)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: d.ID, Action: runs.ActionDeny, Actor: "bob", Comment: "too <dear>"})
	require.NoError(t, err)

	_, body := get(t, b.url+"/inbox/history", "Accept", "text/html")
	ia, id := strings.Index(body, `data-interrupt="`+a.ID.String()+`"`), strings.Index(body, `data-interrupt="`+d.ID.String()+`"`)
	require.True(t, id > 0 && ia > id, "newest first")
	row := body[id:ia]
	require.Contains(t, row, "<td>bob</td>")
	require.Contains(t, row, `data-status="denied"`)
	require.Contains(t, row, html.EscapeString("too <dear>"))
	require.Contains(t, row, `href="/runs/`+d.RunID.String()+`"`)
	require.Regexp(t, `<time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>`, row)

	for q, want := range map[string][]string{
		"?status=denied": {d.ID.String()}, "?by=alice": {a.ID.String()}, "?q=FINE": {a.ID.String()},
		"?tool=bookFlight": {a.ID.String(), d.ID.String()}, "?by=nobody": nil,
	} {
		_, body := get(t, b.url+"/inbox/history"+q, "Accept", "text/html")
		require.Equal(t, len(want), strings.Count(body, "<tr data-interrupt="), q)
		for _, w := range want {
			require.Contains(t, body, `data-interrupt="`+w+`"`, q)
		}
		if want == nil {
			require.Contains(t, body, "No resolved item matches these filters.")
		}
	}
}

// TestBrowserInboxSuggestionPrefillsAndApplies: a replay's suggested decision pre-fills the form
// (edited arguments and comment), and "Apply suggestion" applies it.
func TestBrowserInboxSuggestionPrefillsAndApplies(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	it := b.travel(t, "Lisbon")
	ctx := context.Background()
	var in map[string]any
	require.NoError(t, json.Unmarshal(it.Input, &in))
	in["class"] = "business"
	edited, err := json.Marshal(in)
	require.NoError(t, err)
	sg := fmt.Sprintf(`{"source_run_id":%q,"status":"edited","resolved_by":"alice","comment":"business, as agreed","resolution":{"action":"edit","input":%s}}`,
		uuid.NewString(), edited)
	require.NoError(t, b.store.InterruptSuggest(ctx, it.ID, json.RawMessage(sg)))

	br := browsertest.New(t)
	var comment, class, approve string
	var input map[string]any
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		chromedp.Evaluate(`document.querySelector("form[data-resolve] input[name=comment]").value`, &comment),
		chromedp.Evaluate(`JSON.parse(document.querySelector("form[data-resolve] textarea[name=input]").value)`, &input),
		chromedp.Evaluate(`document.querySelector("form[data-resolve] [data-pointer='/class']").value`, &class),
		chromedp.Evaluate(`document.querySelector("form[data-resolve] button[data-key=a]").textContent.trim()`, &approve),
	))
	require.Equal(t, "business, as agreed", comment, "the form is pre-filled")
	require.Equal(t, "business", input["class"])
	require.Equal(t, `"business"`, class, "the editor's field too")
	require.Equal(t, "Approve edited", approve)
	require.NoError(t, br.Run(
		browsertest.Click(`[data-apply-suggestion]`),
		chromedp.WaitVisible(`#flash.ok`, chromedp.ByQuery),
	))
	got, err := b.store.InterruptGet(ctx, it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptEdited, got.Status)
	require.Equal(t, "business", resolvedInput(t, got)["class"])
	require.Equal(t, "business, as agreed", *got.Comment)
	require.Empty(t, br.Problems())
}

// TestBrowserInboxArgumentsEditorFromSchema: the editor has a field per property (an enum as a
// select, a number with its bounds) kept in step with the raw JSON both ways; a value the schema
// refuses is shown at its field, in the browser and from the server.
func TestBrowserInboxArgumentsEditorFromSchema(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	booking := b.travel(t, "Lisbon")
	run := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	tr := b.pending(t, run.ID)
	br := browsertest.New(t)
	var options []string
	var kind, bounds, class, amountErr, boxErr string
	var fromField map[string]any
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox?sel="+booking.ID.String()),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		chromedp.Evaluate(`[...document.querySelectorAll("[data-pointer='/class'] option")].map((o) => o.textContent)`, &options),
		chromedp.Evaluate(`document.querySelector("[data-pointer='/class']").tagName`, &kind),
		// A field changes the JSON.
		chromedp.SetValue(`[data-pointer='/class']`, `"business"`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector("[data-pointer='/class']").dispatchEvent(new Event("change", {bubbles: true})); true`, nil),
		chromedp.Evaluate(`JSON.parse(document.querySelector("textarea[name=input]").value)`, &fromField),
		// The JSON changes the field.
		chromedp.Evaluate(`const ta = document.querySelector("textarea[name=input]"); const v = JSON.parse(ta.value); v.class = "economy";
			ta.value = JSON.stringify(v); ta.dispatchEvent(new Event("input", {bubbles: true})); true`, nil),
		chromedp.Evaluate(`document.querySelector("[data-pointer='/class']").value`, &class),
	))
	require.Equal(t, "SELECT", kind)
	require.Contains(t, options, "economy")
	require.Contains(t, options, "business")
	require.Equal(t, "business", fromField["class"])
	require.Equal(t, `"economy"`, class)

	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox?sel="+tr.ID.String()),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		textOf(`[data-field='/amount'] .bounds`, &bounds),
		chromedp.SetValue(`[data-pointer='/amount']`, "-5", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector("[data-pointer='/amount']").dispatchEvent(new Event("input", {bubbles: true})); true`, nil),
		browsertest.Click(`form[data-resolve] button[data-key=a]`),
		wait(`!document.querySelector("[data-error-for='/amount']").hidden`),
		textOf(`[data-error-for='/amount']`, &amountErr),
		textOf(`form[data-resolve] .form-error`, &boxErr),
	))
	require.Equal(t, "> 0", bounds)
	require.Equal(t, "must be > 0", amountErr, "the error is at the field it names")
	require.Contains(t, boxErr, "/amount")
	got, err := b.store.InterruptGet(context.Background(), tr.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, got.Status)
	require.Empty(t, br.Problems())

	// The server's refusal lands at the field too.
	resp, body := postForm(t, noRedirect, b.url+"/inbox/"+tr.ID.String()+"/resolve", url.Values{"action": {"edit"},
		"version": {fmt.Sprint(tr.Version)}, "input": {`{"to":"bob","amount":-1,"currency":"JPY"}`}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Regexp(t, `<div class="field-error" data-error-for="/amount">[^<]+</div>`, inboxItemHTML(t, body, tr.ID.String()))
}

// TestInboxEmptyStatesSayWhy: filters that hide every waiting item say so and how many wait;
// an empty inbox says nothing waits.
func TestInboxEmptyStatesSayWhy(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	_, body := get(t, b.url+"/inbox", "Accept", "text/html")
	require.Regexp(t, `id="inbox-empty" data-total="0">\s*Nothing waits for a reviewer\.`, body)
	b.travel(t, "Lisbon")
	b.travel(t, "Porto")
	_, body = get(t, b.url+"/inbox?tool=transfer", "Accept", "text/html")
	require.Contains(t, body, "No item matches tool=transfer; 2 others wait.")
	require.Contains(t, body, `<a href="/inbox">Show all</a>`)
	_, body = get(t, b.url+"/inbox?tool=bookFlight&action=/flow/transferMoney", "Accept", "text/html")
	require.Contains(t, body, "No item matches tool=bookFlight, action=/flow/transferMoney; 2 others wait.")
}

// TestInboxRolesAreEnforcedOnTheServer: a viewer sees the inbox but no form, and the server
// refuses their claim, bulk decision and resolve; a reviewer's claim carries their name.
func TestInboxRolesAreEnforcedOnTheServer(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false, stack: true})
	it := b.travel(t, "Lisbon")
	ctx := context.Background()
	token := func(name, role string) string {
		svc := auth.New(b.store)
		_, err := svc.AddUser(ctx, name, "correct horse battery", role)
		require.NoError(t, err)
		tok, err := svc.CreateToken(ctx, name, "t")
		require.NoError(t, err)
		return "Bearer " + tok
	}
	viewer, reviewer := token("vic", store.RoleViewer), token("rita", store.RoleReviewer)
	post := func(auth, path string, form url.Values) int {
		req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", auth)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	id := it.ID.String()
	for path, form := range map[string]url.Values{
		"/inbox/" + id + "/claim":   {"op": {"claim"}},
		"/inbox/bulk":               {"action": {"approve"}, "id": {id}},
		"/inbox/" + id + "/resolve": {"action": {"approve"}},
	} {
		require.Equal(t, http.StatusForbidden, post(viewer, path, form), path)
	}
	require.Equal(t, http.StatusSeeOther, post(reviewer, "/inbox/"+id+"/claim", url.Values{"op": {"claim"}}))
	_, body := get(t, b.url+"/inbox", "Accept", "text/html", "Authorization", viewer)
	require.Contains(t, body, "Resolving needs the reviewer role")
	require.NotContains(t, body, `id="bulk"`)
	require.Contains(t, body, `claimed by <strong>rita</strong>`)
}
