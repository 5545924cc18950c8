package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
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

// toolAnswer is the last tool message of a run's conversation: what the model read as the tool's
// answer.
func (b *bundle) toolAnswer(t *testing.T, run *store.Run) string {
	t.Helper()
	msgs, err := b.store.MessageList(context.Background(), run.ID)
	require.NoError(t, err)
	answer := ""
	for _, m := range msgs {
		if m.Role == "tool" {
			answer = string(m.Content)
		}
	}
	return answer
}

// TestBrowserInboxRespondAndSelectByKeyboard: r opens "Respond with a value instead" and puts the
// cursor in it; the typed answer, submitted, resolves the interrupt as responded with that output,
// and the run goes on with it as the tool's answer. x ticks the current item for a bulk decision
// (and again unticks it), so that j/x/j/x and "Approve selected" approve exactly those items.
func TestBrowserInboxRespondAndSelectByKeyboard(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	i1, i2, i3 := b.travel(t, "Lisbon"), b.travel(t, "Porto"), b.travel(t, "Faro")
	br := browsertest.New(t)

	const answer = `{"confirmation":"BY-PHONE-7","destination":"Lisbon","date":"next Friday","class":"economy","priceEUR":120}`
	var open bool
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox?sel="+i1.ID.String()),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		chromedp.KeyEvent("r"),
		wait(`document.activeElement.name === "output"`),
		chromedp.Evaluate(`document.querySelector("form[data-resolve] [data-respond]").open`, &open),
		chromedp.KeyEvent(answer),
		browsertest.Click(fmt.Sprintf(`#d-%s button[value="respond"]`, i1.ID)),
		chromedp.WaitVisible(`#flash.ok`, chromedp.ByQuery),
	))
	require.True(t, open, "r opens the respond box")
	got, err := b.store.InterruptGet(ctx, i1.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptResponded, got.Status)
	require.Equal(t, "local", *got.ResolvedBy)
	var res struct {
		Output map[string]any `json:"output"`
	}
	require.NoError(t, json.Unmarshal(got.Resolution, &res))
	require.Equal(t, "BY-PHONE-7", res.Output["confirmation"], "the interrupt holds the typed answer")
	run := b.waitStatus(t, i1.RunID, store.RunSucceeded)
	require.Contains(t, b.toolAnswer(t, run), "BY-PHONE-7", "the model read the answer as the tool's")
	require.Contains(t, string(run.Output), "confirmation BY-PHONE-7", "and the run went on with it")

	// x ticks the current item; pressed again it unticks it.
	var picked []string
	require.NoError(t, br.Run(
		wait(`document.documentElement.dataset.inbox === "ready" && document.querySelectorAll(".inbox-item").length === 2`),
		chromedp.KeyEvent("x"),
		wait(`document.getElementById("bulk-count").textContent === "1 selected"`),
		chromedp.KeyEvent("x"),
		wait(`document.getElementById("bulk-count").textContent === "0 selected"`),
		chromedp.KeyEvent("x"),
		chromedp.KeyEvent("j"),
		wait(fmt.Sprintf(`document.querySelector(".inbox-item.current")?.dataset.interrupt === %q`, i3.ID)),
		chromedp.KeyEvent("x"),
		wait(`document.getElementById("bulk-count").textContent === "2 selected"`),
		chromedp.Evaluate(`[...document.querySelectorAll(".inbox-item .pick:checked")].map((c) => c.value)`, &picked),
		browsertest.Click(`#bulk button[value="approve"]`),
		chromedp.WaitVisible(`#bulk-results`, chromedp.ByQuery),
	))
	require.Equal(t, []string{i2.ID.String(), i3.ID.String()}, picked)
	for _, it := range []*store.Interrupt{i2, i3} {
		got, err := b.store.InterruptGet(ctx, it.ID, false)
		require.NoError(t, err)
		require.Equal(t, store.InterruptApproved, got.Status)
	}
	require.Empty(t, br.Problems())
}

// TestBrowserInboxRowsShowToolQuestionRunAndAge: every line of the compact list shows, visibly,
// its tool, the question it asks (the message, not the metadata), its run and how long it waits.
func TestBrowserInboxRowsShowToolQuestionRunAndAge(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	booking := b.travel(t, "Lisbon")
	tr := b.pending(t, b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted).ID)
	br := browsertest.New(t)
	type row struct {
		ID, Tool, Prompt, Line2, Age string
		Visible                      bool
	}
	var rows []row
	require.NoError(t, br.Run(
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		chromedp.Evaluate(`[...document.querySelectorAll("#inbox-items .inbox-item")].map((r) => {
			const shown = (sel) => { const el = r.querySelector(sel); const box = el?.getBoundingClientRect(); return !!box && box.width > 0 && box.height > 0 && getComputedStyle(el).visibility !== "hidden"; };
			return {ID: r.dataset.interrupt, Tool: r.querySelector(".tool")?.innerText ?? "", Prompt: r.querySelector(".prompt")?.innerText ?? "",
				Line2: r.querySelector(".line2")?.innerText ?? "", Age: r.querySelector(".age")?.innerText ?? "",
				Visible: [".tool", ".prompt", ".line2", ".age"].every(shown)};
		})`, &rows),
	))
	require.Len(t, rows, 2)
	for i, want := range []struct {
		it           *store.Interrupt
		tool, prompt string
	}{
		{booking, "bookFlight", interruptMessage(booking.Metadata)},
		{tr, "transfer", "Confirm transfer of ¥500 to bob?"},
	} {
		r := rows[i]
		require.Equal(t, want.it.ID.String(), r.ID)
		require.True(t, r.Visible, "row %d: tool, question, run and age are on screen", i)
		require.Equal(t, want.tool, r.Tool)
		require.Equal(t, want.prompt, r.Prompt)
		require.Contains(t, r.Prompt, "?", "the question, not the metadata")
		require.Contains(t, r.Line2, "run "+shortRunID(want.it.RunID))
		require.Regexp(t, `^\d+[smhd]$`, r.Age)
	}
	require.Contains(t, rows[0].Prompt, "Approve booking a economy flight to Lisbon")
	require.Empty(t, br.Problems())
}

// TestBrowserInboxHistoryWhoWhenHowCommentFilterAndRun: the history lists every resolved item with
// who resolved it, when, how (approved, edited, responded, denied) and the comment; the form's
// filters narrow the list; a row's run link opens that run's page.
func TestBrowserInboxHistoryWhoWhenHowCommentFilterAndRun(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	ap, ed, rs := b.travel(t, "Lisbon"), b.travel(t, "Porto"), b.travel(t, "Faro")
	dn := b.pending(t, b.startRun(t, "/flow/transferMoney", `{"to":"mallory","amount":99999,"currency":"JPY"}`, store.RunInterrupted).ID)
	for _, p := range []runs.ResolveParams{
		{InterruptID: ap.ID, Action: runs.ActionApprove, Actor: "alice", Comment: "fine by me"},
		{InterruptID: ed.ID, Action: runs.ActionEdit, Actor: "bob", Comment: "business, as agreed",
			Input: json.RawMessage(`{"destination":"Porto","date":"next Friday","class":"business"}`)},
		{InterruptID: rs.ID, Action: runs.ActionRespond, Actor: "carol", Comment: "booked by phone",
			Output: json.RawMessage(`{"confirmation":"PH-1","destination":"Faro","date":"next Friday","class":"economy","priceEUR":99}`)},
		{InterruptID: dn.ID, Action: runs.ActionDeny, Actor: "dave", Comment: "looks like fraud"},
	} {
		_, err := b.runs.Resolve(ctx, p)
		require.NoError(t, err)
	}
	br := browsertest.New(t)
	type row struct{ ID, When, Datetime, Who, How, Tool, Comment, Run string }
	var rows []row
	read := chromedp.Evaluate(`[...document.querySelectorAll("#history tbody tr")].map((r) => ({ID: r.dataset.interrupt,
		When: r.querySelector("time")?.innerText ?? "", Datetime: r.querySelector("time")?.getAttribute("datetime") ?? "",
		Who: r.cells[1].innerText, How: r.querySelector("[data-status]")?.dataset.status ?? "", Tool: r.cells[3].querySelector("code").innerText,
		Comment: r.querySelector("td.comment").innerText, Run: r.querySelector("a[href^='/runs/']")?.getAttribute("href") ?? ""}))`, &rows)
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox/history"),
		chromedp.WaitVisible(`#history`, chromedp.ByQuery),
		read,
	))
	want := []struct {
		it                *store.Interrupt
		who, how, comment string
		tool              string
	}{ // newest first
		{dn, "dave", store.InterruptDenied, "looks like fraud", "transfer"},
		{rs, "carol", store.InterruptResponded, "booked by phone", "bookFlight"},
		{ed, "bob", store.InterruptEdited, "business, as agreed", "bookFlight"},
		{ap, "alice", store.InterruptApproved, "fine by me", "bookFlight"},
	}
	require.Len(t, rows, len(want))
	for i, w := range want {
		r := rows[i]
		require.Equal(t, w.it.ID.String(), r.ID, "row %d", i)
		require.Equal(t, w.who, r.Who)
		require.Equal(t, w.how, r.How)
		require.Equal(t, w.comment, r.Comment)
		require.Equal(t, w.tool, r.Tool)
		require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`, r.When)
		at, err := time.Parse(time.RFC3339, r.Datetime)
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), at, time.Minute)
		require.Equal(t, "/runs/"+w.it.RunID.String(), r.Run)
	}

	// The filter form narrows the list: by how, then by tool.
	var search string
	require.NoError(t, br.Run(
		chromedp.SetValue(`#page form.filters select[name=status]`, store.InterruptDenied, chromedp.ByQuery),
		markPage,
		browsertest.Click(`#page form.filters button[type=submit]`),
		afterNavigation(`#history`),
		wait(`location.search.includes("status=denied") && document.querySelectorAll("#history tbody tr").length === 1`),
		read,
		chromedp.Evaluate(`location.search`, &search),
	))
	require.Len(t, rows, 1)
	require.Equal(t, dn.ID.String(), rows[0].ID)
	require.NoError(t, br.Run(
		chromedp.SetValue(`#page form.filters select[name=status]`, "", chromedp.ByQuery),
		chromedp.SetValue(`#page form.filters input[name=tool]`, "bookFlight", chromedp.ByQuery),
		markPage,
		browsertest.Click(`#page form.filters button[type=submit]`),
		afterNavigation(`#history`),
		wait(`location.search.includes("tool=bookFlight") && document.querySelectorAll("#history tbody tr").length === 3`),
		read,
	))
	require.Len(t, rows, 3)
	for _, r := range rows {
		require.Equal(t, "bookFlight", r.Tool)
	}

	// A row's run link opens the run.
	var path, heading string
	require.NoError(t, br.Run(
		markPage,
		browsertest.Click(fmt.Sprintf(`#history tr[data-interrupt="%s"] a[href^="/runs/"]`, ed.ID)),
		afterNavigation(`.run-header`),
		chromedp.Evaluate(`location.pathname`, &path),
		textOf(`.run-header`, &heading),
	))
	require.Equal(t, "/runs/"+ed.RunID.String(), path)
	require.Contains(t, heading, "/flow/travelAgent")
	require.Empty(t, br.Problems())
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
		browsertest.Click(`form.filters button[type=submit]`),
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

// TestBrowserInboxDenyWithAReasonReachesTheModel: d shows the confirmation step (nothing is
// applied), the reason typed there and confirmed with the button denies the item, and the tool's
// answer that the model reads carries that reason.
func TestBrowserInboxDenyWithAReasonReachesTheModel(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	it := b.pending(t, b.startRun(t, "/flow/transferMoney", `{"to":"mallory","amount":99999,"currency":"JPY"}`, store.RunInterrupted).ID)
	br := browsertest.New(t)
	var what string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		chromedp.KeyEvent("d"),
		chromedp.WaitVisible(fmt.Sprintf("#d-%s [data-confirm-step]", it.ID), chromedp.ByQuery),
		wait(`document.activeElement.name === "reason"`),
		textOf(fmt.Sprintf("#d-%s [data-confirm-what]", it.ID), &what),
	))
	require.Equal(t, "Confirm deny", what)
	got, err := b.store.InterruptGet(ctx, it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, got.Status, "d alone applies nothing")

	require.NoError(t, br.Run(
		chromedp.KeyEvent("the payee is on a watch list"),
		browsertest.Click(fmt.Sprintf("#d-%s [data-confirm-submit]", it.ID)),
		chromedp.WaitVisible(`#flash.ok`, chromedp.ByQuery),
	))
	got, err = b.store.InterruptGet(ctx, it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptDenied, got.Status)
	require.Equal(t, "the payee is on a watch list", *got.Comment)
	run := b.waitStatus(t, it.RunID, store.RunSucceeded)
	require.Contains(t, b.toolAnswer(t, run), `"reason":"the payee is on a watch list"`, "the model receives the reason")
	require.Contains(t, string(run.Output), "the payee is on a watch list", "and answers with it")
	require.Empty(t, br.Problems())
}

// defineDropTable adds a dbaAgent flow whose dropTable tool is marked irreversible in its
// interrupt's metadata and has no amount in its arguments.
func defineDropTable(reg *engine.Registry) {
	type table struct {
		Table string `json:"table"`
	}
	drop := engine.DefineTool(reg, "dropTable", "Drops a table; it cannot be undone.",
		func(tc *engine.ToolContext, in table) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": "Drop the table " + in.Table + "?", "irreversible": true}})
			}
			return "dropped " + in.Table, nil
		})
	scripted.DefineFunc(reg, "test/dba", func(req *engine.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(scripted.ToolCall("dropTable", "drop-1", map[string]any{"table": "orders"})), nil
		}
		return scripted.Text("The table is gone."), nil
	})
	engine.DefineFlow(reg, "dbaAgent", func(ctx context.Context, in table) (string, error) {
		resp, err := engine.Generate(ctx, reg, engine.WithModelName("test/dba"), engine.WithPrompt("Drop "+in.Table+"."), engine.WithTools(drop))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// TestBrowserInboxIrreversibleToolAsksToConfirmApprove: an item whose tool is marked irreversible
// says so, and even a plain approve (a) stops at the confirmation step; only confirming applies it.
func TestBrowserInboxIrreversibleToolAsksToConfirmApprove(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, define: []func(*engine.Registry){defineDropTable}})
	ctx := context.Background()
	it := b.pending(t, b.startRun(t, "/flow/dbaAgent", `{"table":"orders"}`, store.RunInterrupted).ID)
	br := browsertest.New(t)
	var note, what string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.documentElement.dataset.inbox === "ready"`),
		textOf(fmt.Sprintf("#d-%s [data-risk-note]", it.ID), &note),
		chromedp.KeyEvent("a"),
		chromedp.WaitVisible(fmt.Sprintf("#d-%s [data-confirm-step]", it.ID), chromedp.ByQuery),
		textOf(fmt.Sprintf("#d-%s [data-confirm-what]", it.ID), &what),
	))
	require.Contains(t, note, "the tool is marked irreversible")
	require.Equal(t, "Confirm approve", what)
	got, err := b.store.InterruptGet(ctx, it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, got.Status, "a alone applies nothing")

	require.NoError(t, br.Run(
		browsertest.Click(fmt.Sprintf("#d-%s [data-confirm-submit]", it.ID)),
		chromedp.WaitVisible(`#flash.ok`, chromedp.ByQuery),
	))
	got, err = b.store.InterruptGet(ctx, it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptApproved, got.Status)
	run := b.waitStatus(t, it.RunID, store.RunSucceeded)
	require.Contains(t, b.toolAnswer(t, run), "dropped orders")
	require.Empty(t, br.Problems())
}
