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
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// inboxItemHTML cuts the item shown in full (the detail beside the list) out of an inbox page.
func inboxItemHTML(t *testing.T, body, id string) string {
	t.Helper()
	start := strings.Index(body, `id="d-`+id+`"`)
	require.NotEqual(t, -1, start, "interrupt %s is shown in full on the page", id)
	item := body[start:]
	if end := strings.Index(item, "</article>"); end >= 0 {
		item = item[:end]
	}
	return item
}

// resolvedInput is the input an edit resolution carries.
func resolvedInput(t *testing.T, it *store.Interrupt) map[string]any {
	t.Helper()
	var res struct {
		Input map[string]any `json:"input"`
	}
	require.NoError(t, json.Unmarshal(it.Resolution, &res))
	return res.Input
}

// TestInboxApproveWithChangedArgumentsIsAnEdit: without the script, "Approve" on a form whose
// arguments were changed applies the change (as "edited"), never the original arguments; the same
// arguments merely laid out differently are a plain approval; changed arguments that are not JSON
// are refused, and the reviewer's text comes back.
func TestInboxApproveWithChangedArgumentsIsAnEdit(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	const in = `{"to":"bob","amount":500,"currency":"JPY"}`
	same := b.startRun(t, "/flow/transferMoney", in, store.RunInterrupted)
	changed := b.startRun(t, "/flow/transferMoney", in, store.RunInterrupted)
	broken := b.startRun(t, "/flow/transferMoney", in, store.RunInterrupted)
	iSame, iChanged, iBroken := b.pending(t, same.ID), b.pending(t, changed.ID), b.pending(t, broken.ID)

	_, body := get(t, b.url+"/inbox?sel="+iChanged.ID.String(), "Accept", "text/html")
	item := inboxItemHTML(t, body, iChanged.ID.String())
	require.NotContains(t, item, "edit to approve with changes")
	require.Contains(t, item, "Approve applies your changes", "the form says what Approve does with changed arguments")
	require.Contains(t, item, `data-run="`+changed.ID.String()+`"`)

	approve := func(it *store.Interrupt, input string) (*http.Response, string) {
		return postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/resolve", url.Values{
			"action": {"approve"}, "version": {fmt.Sprint(it.Version)}, "input": {input}, "comment": {"ok"}, "confirm": {"1"}})
	}
	// The same arguments, laid out as a browser sends a textarea.
	resp, _ := approve(iSame, "{\r\n  \"currency\": \"JPY\",\r\n  \"to\": \"bob\",\r\n  \"amount\": 500\r\n}\r\n")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err := b.store.InterruptGet(context.Background(), iSame.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptApproved, got.Status)

	resp, _ = approve(iChanged, `{"to":"bob","amount":7,"currency":"JPY"}`)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err = b.store.InterruptGet(context.Background(), iChanged.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptEdited, got.Status, "the edit is applied, not dropped")
	require.Equal(t, float64(7), resolvedInput(t, got)["amount"])

	resp, body = approve(iBroken, `{"to":"bob","amount":7,`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	got, err = b.store.InterruptGet(context.Background(), iBroken.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, got.Status, "broken changed arguments are not approved as the original")
	item = inboxItemHTML(t, body, iBroken.ID.String())
	require.Contains(t, item, "not valid JSON")
	require.Contains(t, item, html.EscapeString(`{"to":"bob","amount":7,`))
}

// TestInboxFailedSubmitKeepsWorkAndFilters: a refused submit shows the form again with the
// reviewer's arguments, response and comment and the page's filters, and says why next to the
// form; a version that is not a whole number is refused so; success keeps the filters, and the
// done message names a real interrupt only.
func TestInboxFailedSubmitKeepsWorkAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)
	filters := "?tool=" + url.QueryEscape(it.Tool) + "&action=" + url.QueryEscape(run.Action)

	_, body := get(t, b.url+"/inbox"+filters, "Accept", "text/html")
	item := inboxItemHTML(t, body, it.ID.String())
	require.Contains(t, item, `action="/inbox/`+it.ID.String()+`/resolve`+html.EscapeString(filters)+`"`, "the form carries the filters")

	post := func(form url.Values) (*http.Response, string) {
		return postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/resolve"+filters, form)
	}
	const bad = `{"to":"bob","amount":-1,"currency":"JPY"}`
	requireKept := func(body, input, comment string) {
		t.Helper()
		require.Contains(t, body, `data-filter-tool="`+it.Tool+`"`)
		require.Contains(t, body, `data-filter-action="`+run.Action+`"`)
		require.Contains(t, body, `<option value="`+run.Action+`" selected>`)
		item := inboxItemHTML(t, body, it.ID.String())
		require.Contains(t, item, ">"+html.EscapeString(input)+"</textarea>", "the arguments as submitted")
		require.Contains(t, item, `value="`+html.EscapeString(comment)+`"`, "the comment as submitted")
		require.Contains(t, item, `/resolve`+html.EscapeString(filters)+`"`)
	}

	resp, body := post(url.Values{"action": {"edit"}, "version": {fmt.Sprint(it.Version)}, "input": {bad}, "comment": {"too <much>"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	requireKept(body, bad, "too <much>")
	require.Regexp(t, `class="form-error" role="alert">[^<]*Not resolved: input/amount`, inboxItemHTML(t, body, it.ID.String()), "the reason is next to the form")

	resp, body = post(url.Values{"action": {"respond"}, "version": {fmt.Sprint(it.Version)}, "input": {bad}, "output": {`{"status":`}, "comment": {"r"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	requireKept(body, bad, "r")
	require.Contains(t, body, html.EscapeString(`{"status":`)+"</textarea>", "the response as submitted")
	require.Contains(t, body, `<details class="respond" data-respond open>`)

	for _, v := range []string{"1x", "abc", "-1", "1.5"} {
		resp, body = post(url.Values{"action": {"deny"}, "version": {v}, "input": {bad}, "comment": {"no " + v}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "version %q", v)
		requireKept(body, bad, "no "+v)
		require.Contains(t, inboxItemHTML(t, body, it.ID.String()), "not a whole number")
		got, err := b.store.InterruptGet(context.Background(), it.ID, false)
		require.NoError(t, err)
		require.Equal(t, store.InterruptPending, got.Status, "version %q is not read as a number", v)
	}

	resp, _ = post(url.Values{"action": {"deny"}, "version": {fmt.Sprint(it.Version)}, "comment": {"no"}, "confirm": {"1"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/inbox", loc.Path)
	require.Equal(t, it.Tool, loc.Query().Get("tool"))
	require.Equal(t, run.Action, loc.Query().Get("action"))
	require.Equal(t, it.ID.String(), loc.Query().Get("done"))
	_, body = get(t, b.url+loc.String(), "Accept", "text/html")
	require.Regexp(t, `id="flash">Resolved `+it.Tool+` in `+run.Action+` \(run [0-9a-f]{8}\): denied by local\. Reason: no<`, body)

	// A stale submit (409) keeps the work too, and shows the item as resolved.
	resp, body = post(url.Values{"action": {"approve"}, "version": {fmt.Sprint(it.Version)}, "input": {bad}, "comment": {"late"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Regexp(t, `Already resolved by local at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(denied\)`, body)
	requireKept(body, bad, "late")
	item = inboxItemHTML(t, body, it.ID.String())
	require.Contains(t, item, "Resolved by local at")
	require.Contains(t, item, `data-dismiss`)

	for _, done := range []string{"hello world", "<b>x</b>", "00000000-0000-0000-0000-000000000000"} {
		_, body = get(t, b.url+"/inbox?done="+url.QueryEscape(done), "Accept", "text/html")
		require.NotContains(t, body, `id="flash"`, "done=%q", done)
		require.NotContains(t, body, "hello world")
	}
}

// TestInboxItemNotice: the live inbox asks for a resolved item's notice: who resolved it, when and
// how; a pending one has none.
func TestInboxItemNotice(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)
	resp, _ := get(t, b.url+"/inbox/items/"+it.ID.String()+"?notice=1", "Accept", "text/html")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	_, err := b.runs.Resolve(context.Background(), runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "alice"})
	require.NoError(t, err)
	resp, body := get(t, b.url+"/inbox/items/"+it.ID.String()+"?notice=1", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `Resolved by alice at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(approved\)`, body)
}

// TestBrowserInboxApproveKeepsEdits: changing the arguments turns "Approve" into "Approve edited"
// (and says so); the a key then applies the edit; undoing the change turns it back.
func TestBrowserInboxApproveKeepsEdits(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)
	br := browsertest.New(t)
	sel := fmt.Sprintf("#d-%s", it.ID)
	var label, note, labelBack string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`!!document.querySelector("`+sel+`")`),
		chromedp.KeyEvent("e"),
		chromedp.Evaluate(`document.activeElement.value = '{"to":"bob","amount":9,"currency":"JPY"}'; document.activeElement.dispatchEvent(new Event("input", {bubbles: true})); true`, nil),
		wait(`document.querySelector("`+sel+` button[data-key=a]").textContent.trim() === "Approve edited"`),
		textOf(sel+` [data-edited-note]`, &note),
		// Back to the original, laid out differently: a plain approval again.
		chromedp.Evaluate(`document.activeElement.value = '{"to": "bob", "amount": 500, "currency": "JPY"}'; document.activeElement.dispatchEvent(new Event("input", {bubbles: true})); true`, nil),
		chromedp.Evaluate(`document.querySelector("`+sel+` button[data-key=a]").textContent.trim()`, &labelBack),
		chromedp.Evaluate(`document.activeElement.value = '{"to":"bob","amount":9,"currency":"JPY"}'; document.activeElement.dispatchEvent(new Event("input", {bubbles: true})); true`, nil),
		chromedp.Evaluate(`document.querySelector("`+sel+` button[data-key=a]").textContent.trim()`, &label),
		chromedp.KeyEvent("\x1b"),
		chromedp.KeyEvent("a"),
		// A transfer moves an amount: a asks to confirm, and Enter in the reason confirms.
		chromedp.WaitVisible(sel+` [data-confirm-step]`, chromedp.ByQuery),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(`#flash.ok`, chromedp.ByQuery),
	))
	require.Equal(t, "Approve edited", label)
	require.Equal(t, "Approve", labelBack)
	require.Contains(t, note, "Approve applies your changes")
	got, err := b.store.InterruptGet(context.Background(), it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptEdited, got.Status)
	require.Equal(t, float64(9), resolvedInput(t, got)["amount"])
	require.Empty(t, br.Problems())
}

// TestBrowserInboxCancelledRunLeaves: cancelling a run takes its pending items out of an open
// inbox at once; the other run's item stays.
func TestBrowserInboxCancelledRunLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	first := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	second := b.startRun(t, "/flow/transferMoney", `{"to":"carol","amount":5,"currency":"EUR"}`, store.RunInterrupted)
	i1, i2 := b.pending(t, first.ID), b.pending(t, second.ID)
	br := browsertest.New(t)
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`document.querySelectorAll(".inbox-item").length === 2`),
		chromedp.Evaluate(`window.marker = 1`, nil),
	))
	_, err := b.runs.Cancel(context.Background(), first.ID, "carol")
	require.NoError(t, err)
	var count string
	var marker int
	require.NoError(t, br.Run(
		wait(fmt.Sprintf(`!document.getElementById("i-%s") && !!document.getElementById("i-%s")`, i1.ID, i2.ID)),
		wait(`document.getElementById("inbox-count").textContent.trim() === "1 pending"`), // asked of the server after the event
		textOf(`#inbox-count`, &count),
		chromedp.Evaluate(`window.marker ?? 0`, &marker),
	))
	require.Equal(t, "1 pending", count)
	require.Equal(t, 1, marker, "without a reload")
	require.Empty(t, br.Problems())
}

// TestBrowserInboxFailedSubmitKeepsWork: a submit the server refuses comes back in place, without
// a page load, with the edited arguments, the comment and the filters, at an address that reloads
// the inbox.
func TestBrowserInboxFailedSubmitKeepsWork(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)
	br := browsertest.New(t)
	sel := fmt.Sprintf("#d-%s", it.ID)
	filters := "?tool=" + url.QueryEscape(it.Tool) + "&action=" + url.QueryEscape(run.Action)
	const edited = `{"to":"bob","amount":-3,"currency":"JPY"}`
	var input, comment, path, search, errText string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"+filters),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`!!document.querySelector("`+sel+`")`),
		// The server refuses what the browser did not check: no schema here.
		chromedp.Evaluate(`const f = document.querySelector("`+sel+` form[data-resolve]"); delete f.dataset.inputSchema;
			f.elements.input.value = '`+edited+`'; f.elements.comment.value = "my reasons"; window.marker = 1;
			setTimeout(() => f.querySelector('button[value="edit"]').click(), 0); true`, nil),
		// An amount: the edit asks to confirm first; the server then refuses it.
		chromedp.WaitVisible(sel+` [data-confirm-step]`, chromedp.ByQuery),
		chromedp.Evaluate(`setTimeout(() => document.querySelector("`+sel+` [data-confirm-submit]").click(), 0); true`, nil),
		chromedp.WaitVisible(sel+` .form-error`, chromedp.ByQuery),
		wait(`window.marker === 1 && location.pathname === "/inbox"`),
		chromedp.Evaluate(`document.querySelector("`+sel+` textarea[name=input]").value`, &input),
		chromedp.Evaluate(`document.querySelector("`+sel+` input[name=comment]").value`, &comment),
		chromedp.Evaluate(`location.pathname`, &path),
		chromedp.Evaluate(`location.search`, &search),
		textOf(sel+` .form-error`, &errText),
	))
	require.Equal(t, edited, input)
	require.Equal(t, "my reasons", comment)
	require.Equal(t, "/inbox", path, "a reload shows the inbox, not a resubmit")
	require.Equal(t, filters+"&sel="+it.ID.String(), search)
	require.Contains(t, errText, "input/amount")
	for _, p := range br.Problems() {
		require.Contains(t, p, "status of 422", "the refusal is the only problem")
	}
}

// TestBrowserInboxResolvedElsewhereStays: an item the reviewer is working on stays when another
// reviewer resolves it, marked with who and when, its buttons disabled, the typing kept, until it
// is dismissed; an untouched item resolved elsewhere just leaves.
func TestBrowserInboxResolvedElsewhereStays(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	first := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	second := b.startRun(t, "/flow/transferMoney", `{"to":"carol","amount":5,"currency":"EUR"}`, store.RunInterrupted)
	i1, i2 := b.pending(t, first.ID), b.pending(t, second.ID)
	br := browsertest.New(t)
	// i1 is shown in full (the first item); i2 is a row of the list.
	s1, s2 := fmt.Sprintf("#d-%s", i1.ID), fmt.Sprintf("#i-%s", i2.ID)
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`document.querySelectorAll(".inbox-item").length === 2`),
		chromedp.Evaluate(`document.querySelector("`+s1+` input[name=comment]").value = "half a thought"; document.querySelector("`+s1+` input[name=comment]").dispatchEvent(new Event("input", {bubbles: true})); true`, nil),
	))
	ctx := context.Background()
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: i1.ID, Action: runs.ActionDeny, Actor: "alice"})
	require.NoError(t, err)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: i2.ID, Action: runs.ActionApprove, Actor: "alice"})
	require.NoError(t, err)
	var notice, comment, count string
	var enabled int
	require.NoError(t, br.Run(
		wait(`!document.querySelector("`+s2+`")`),
		wait(`!!document.querySelector("`+s1+` .resolved-note")`),
		textOf(s1+` .resolved-note`, &notice),
		chromedp.Evaluate(`document.querySelector("`+s1+` input[name=comment]").value`, &comment),
		chromedp.Evaluate(`document.querySelectorAll("`+s1+` form[data-resolve] button:not([disabled])").length`, &enabled),
		// The count is asked of the server a moment after the last live event.
		wait(`document.getElementById("inbox-count").textContent.trim() === "0 pending"`),
		textOf(`#inbox-count`, &count),
	))
	require.Regexp(t, `Resolved by alice at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(denied\)`, notice)
	require.Equal(t, "half a thought", comment)
	require.Equal(t, 0, enabled, "its buttons are disabled")
	require.Equal(t, "0 pending", count)
	// Keyboard shortcuts do nothing to it.
	require.NoError(t, br.Run(chromedp.KeyEvent("d"), chromedp.Sleep(200*time.Millisecond)))
	require.NoError(t, br.Run(
		chromedp.Evaluate(`document.querySelector("`+s1+` [data-dismiss]").click(); true`, nil),
		wait(`!document.querySelector("`+s1+`")`),
	))
	require.Empty(t, br.Problems())
}

// TestInboxResolveAddressRedirectsOnGet: the address a refused form leaves behind (without JS)
// shows the inbox at the item when reloaded, instead of 405.
func TestInboxResolveAddressRedirectsOnGet(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	id := "01a22b5f-d762-72b8-a618-286b431a3365"
	resp, err := noRedirect.Get(b.url + "/inbox/" + id + "/resolve")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/inbox?sel="+id, resp.Header.Get("Location"))
}
