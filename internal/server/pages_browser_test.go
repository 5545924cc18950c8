package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// tab opens another tab in the same browser.
func tab(t *testing.T, br *browsertest.Browser) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(br.Ctx)
	t.Cleanup(cancel)
	return ctx
}

// wait polls expr until it is true. Its bound is for a page that never gets there: at load 20
// (#24's load protocol) a 10,000-span waterfall took more than the 20 s it used to have to redraw
// after a minimap drag.
func wait(expr string) chromedp.Action {
	return chromedp.Poll(expr, nil, chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(25*time.Millisecond))
}

// TestBrowserInboxResolveLiveKeyboardAndStaleForm works the inbox in two tabs: keyboard j/k moves,
// e opens the editor whose JSON is checked against the schema before submit, a approves, d denies;
// the other tab sees resolved interrupts disappear and new ones appear without reloading, and a
// stale form submitted anyway says who resolved it and when.
func TestBrowserInboxResolveLiveKeyboardAndStaleForm(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	first := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	second := b.startRun(t, "/flow/travelAgent", `{"destination":"Lisbon"}`, store.RunInterrupted)
	i1, i2 := b.pending(t, first.ID), b.pending(t, second.ID)
	br := browsertest.New(t)
	a, other := br.Ctx, tab(t, br)

	for _, ctx := range []context.Context{a, other} {
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Navigate(b.url+"/inbox"),
			wait(`document.documentElement.dataset.live === "live"`),
			wait(`document.querySelectorAll(".inbox-item").length === 2`),
		))
	}
	var current string
	require.NoError(t, chromedp.Run(a,
		chromedp.Evaluate(`document.querySelector(".inbox-item.current").dataset.interrupt`, &current)))
	require.Equal(t, i1.ID.String(), current, "oldest first, and the first one is selected")
	// Each move waits for the pane to show the item it selected: the pane loads it after the key,
	// and a key pressed before then acts on what the pane showed (under load the edit below went to
	// a form loaded after the test had typed in the one before it).
	shown := func(id uuid.UUID) chromedp.Action {
		return wait(`document.querySelector("#inbox-detail .inbox-detail")?.dataset.interrupt === "` + id.String() + `"`)
	}
	require.NoError(t, chromedp.Run(a, chromedp.KeyEvent("j"),
		chromedp.Evaluate(`document.querySelector(".inbox-item.current").dataset.interrupt`, &current), shown(i2.ID)))
	require.Equal(t, i2.ID.String(), current)
	require.NoError(t, chromedp.Run(a, chromedp.KeyEvent("k"),
		chromedp.Evaluate(`document.querySelector(".inbox-item.current").dataset.interrupt`, &current), shown(i1.ID)))
	require.Equal(t, i1.ID.String(), current)

	// The other tab keeps a copy of the first form, as a page that lost its connection would.
	require.NoError(t, chromedp.Run(other, chromedp.Evaluate(
		fmt.Sprintf(`window.stale = document.querySelector("#d-%s form[data-resolve]").cloneNode(true); true`, i1.ID), nil)))

	// e: edit with an amount the schema refuses; the browser blocks the submit and says why.
	var focused, errText string
	var stillHere bool
	require.NoError(t, chromedp.Run(a,
		chromedp.KeyEvent("e"),
		chromedp.Evaluate(`document.activeElement.name`, &focused),
		chromedp.Evaluate(`document.activeElement.value = '{"to":"bob","amount":-5,"currency":"JPY"}'; true`, nil),
		browsertest.Click(fmt.Sprintf(`#d-%s button[value="edit"]`, i1.ID)),
		wait(fmt.Sprintf(`!document.querySelector("#d-%s .form-error").hidden`, i1.ID)),
		chromedp.Text(fmt.Sprintf(`#d-%s .form-error`, i1.ID), &errText, chromedp.ByQuery),
		chromedp.Evaluate(fmt.Sprintf(`!!document.getElementById("i-%s")`, i1.ID), &stillHere),
	))
	require.Equal(t, "input", focused)
	require.Contains(t, errText, "/amount: must be > 0")
	require.True(t, stillHere)
	it, err := b.store.InterruptGet(context.Background(), i1.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, it.Status, "nothing was sent")

	// a: approve (the refused edit undone first; Escape leaves the editor).
	require.NoError(t, chromedp.Run(a,
		browsertest.Click(fmt.Sprintf("#d-%s [data-reset]", i1.ID)),
		chromedp.KeyEvent("\x1b"),
		chromedp.KeyEvent("a"),
		// The transfer moves an amount: a asks to confirm; Enter confirms.
		chromedp.WaitVisible(fmt.Sprintf("#d-%s [data-confirm-step]", i1.ID), chromedp.ByQuery),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(`#flash.ok`, chromedp.ByQuery),
		wait(`document.querySelectorAll(".inbox-item").length === 1`),
	))
	it, err = b.store.InterruptGet(context.Background(), i1.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptApproved, it.Status)

	// The other tab: gone live, without a reload.
	require.NoError(t, chromedp.Run(other,
		chromedp.Evaluate(`window.marker = 1`, nil),
		wait(fmt.Sprintf(`!document.getElementById("i-%s") && window.marker === 1`, i1.ID)),
	))
	// A new interrupt appears live in the other tab.
	third := b.startRun(t, "/flow/transferMoney", `{"to":"carol","amount":7,"currency":"EUR"}`, store.RunInterrupted)
	i3 := b.pending(t, third.ID)
	require.NoError(t, chromedp.Run(other, wait(fmt.Sprintf(`!!document.getElementById("i-%s") && window.marker === 1`, i3.ID))))

	// The stale form, submitted anyway.
	var flash string
	require.NoError(t, chromedp.Run(other,
		chromedp.Evaluate(`document.getElementById("inbox-items").prepend(window.stale); window.stale.querySelector('button[value="approve"]').click(); true`, nil),
		chromedp.WaitVisible(`#flash`, chromedp.ByQuery),
		chromedp.Text(`#flash`, &flash, chromedp.ByQuery),
	))
	require.Regexp(t, `^Already resolved by local at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(approved\)`, flash)

	// d: deny the selected one (the travel booking is first now).
	require.NoError(t, chromedp.Run(a,
		chromedp.Navigate(b.url+"/inbox"),
		wait(`document.querySelectorAll(".inbox-item").length === 2`),
		chromedp.KeyEvent("d"),
		// d asks to confirm, with a reason that the model receives; Enter confirms.
		chromedp.WaitVisible(fmt.Sprintf("#d-%s [data-confirm-step]", i2.ID), chromedp.ByQuery),
		wait(`document.activeElement.name === "reason"`),
		chromedp.KeyEvent("too expensive"),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(`#flash.ok`, chromedp.ByQuery),
	))
	it, err = b.store.InterruptGet(context.Background(), i2.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptDenied, it.Status)
	require.Equal(t, "too expensive", *it.Comment)
	require.Empty(t, br.Problems())
}

// TestBrowserActionStartsRunAndStreamsLive starts a countdown from the actions page: the browser
// checks the input against the schema first, the run page opens and its chunks arrive while the
// run runs; the runs list, open in another tab, shows the new run live; after completion the
// stream can be played back.
func TestBrowserActionStartsRunAndStreamsLive(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	br := browsertest.New(t)
	runsTab, dashTab := tab(t, br), tab(t, br)
	require.NoError(t, chromedp.Run(runsTab,
		chromedp.Navigate(b.url+"/runs"),
		wait(`document.documentElement.dataset.live === "live"`),
	))
	require.NoError(t, chromedp.Run(dashTab,
		chromedp.Navigate(b.url+"/"),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`document.querySelector('[data-count="total"] .value').textContent === "0"`),
	))

	var errText, path string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/actions/flow/countdown"),
		chromedp.WaitVisible(`.action-page textarea[name=input]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector(".action-page textarea[name=input]").value = '{"from": 0}'; true`, nil),
		browsertest.Click(`.action-page button[type=submit]`),
		wait(`!document.querySelector('.action-page [data-error-for="/from"]').hidden`),
		chromedp.Text(`.action-page [data-error-for="/from"]`, &errText, chromedp.ByQuery),
		chromedp.Evaluate(`location.pathname`, &path),
	))
	require.Equal(t, "must be ≥ 1", errText, "said at the field")
	require.Equal(t, "/actions/flow/countdown", path)

	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Evaluate(`document.querySelector(".action-page textarea[name=input]").value = '{"from": 50}'; true`, nil),
		browsertest.Click(`.action-page button[type=submit]`),
		chromedp.WaitVisible(`.run-header`, chromedp.ByQuery),
		chromedp.Evaluate(`location.pathname`, &path),
	))
	runID := strings.TrimPrefix(path, "/runs/")
	require.NoError(t, uuid.Validate(runID))
	// The stream is a tab of the run page.
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`nav.run-tabs a[data-tab="stream"]`),
		chromedp.WaitVisible(`#chunks`, chromedp.ByQuery),
	))

	// Sample the stream while it runs (10 s: a loaded machine may take seconds to open the tab):
	// some chunks, then all of them.
	var counts []int
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		require.NoError(t, chromedp.Run(br.Ctx, chromedp.Evaluate(`document.querySelectorAll("#chunks span[data-seq]").length`, &n)))
		counts = append(counts, n)
		if n == 50 {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
	require.Equal(t, 50, counts[len(counts)-1], "every chunk arrives")
	partial := false
	for _, n := range counts {
		partial = partial || (n > 0 && n < 50)
	}
	require.True(t, partial, "chunks arrive while the run runs, not all at the end: %v", counts)

	var text string
	require.NoError(t, chromedp.Run(br.Ctx,
		wait(`document.querySelector(".run-header").dataset.status === "succeeded"`),
		wait(`!document.getElementById("playback").hidden`),
		browsertest.Click(`#playback`),
		wait(`document.querySelectorAll("#chunks span[data-seq]").length === 50`),
		chromedp.Text(`#chunks`, &text, chromedp.ByQuery),
	))
	require.Contains(t, text, `{"n":50}`)
	require.NoError(t, chromedp.Run(runsTab, wait(fmt.Sprintf(`!!document.querySelector('tr[data-run="%s"]')`, runID))))
	require.NoError(t, chromedp.Run(dashTab,
		wait(`document.querySelector('[data-count="succeeded"] .value').textContent === "1"`),
		wait(`document.querySelector('[data-chart="total"]').textContent === "1"`),
	), "the dashboard's counts and chart follow live")
	require.Empty(t, br.Problems())
}

// TestBrowserSpanTreeExpandsSelectsAndDeepLinks opens a research run: turns start collapsed, a
// turn expands (its children load) and collapses, selecting a span loads its panel and puts its
// deep link in the address bar, and that link opens the page with the span selected.
func TestBrowserSpanTreeExpandsSelectsAndDeepLinks(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/researchAgent", `{"topic":"x","depth":4}`, store.RunSucceeded)
	b.flushSpans(t, run.ID, 25)
	br := browsertest.New(t)

	var rowsBefore, rowsOpen, rowsClosed int
	var panel, href string
	turn2 := `[...document.querySelectorAll(".span-row")].find(r => r.querySelector(".span-label")?.textContent === "turn 2")`
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()),
		chromedp.WaitVisible(`.spantree`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &rowsBefore),
		chromedp.Evaluate(turn2+`.querySelector("[data-toggle]").click(); true`, nil),
		wait(turn2+`.getAttribute("aria-expanded") === "true"`),
		chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &rowsOpen),
		chromedp.Evaluate(turn2+`.nextElementSibling.querySelector("[data-select]").click(); true`, nil),
		wait(`!!document.querySelector("#span-detail .span-panel")`),
		chromedp.Text(`#span-detail`, &panel, chromedp.ByQuery),
		chromedp.Evaluate(`location.href`, &href),
		chromedp.Evaluate(turn2+`.querySelector("[data-toggle]").click(); true`, nil),
		wait(turn2+`.getAttribute("aria-expanded") === "false"`),
		chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &rowsClosed),
	))
	require.Equal(t, 1+5, rowsBefore, "the flow and its five turns, each collapsed")
	require.Equal(t, rowsBefore+7, rowsOpen, "the model call and six searches of turn 2")
	require.Equal(t, rowsBefore, rowsClosed)
	require.Contains(t, panel, "genkit:input")
	require.Contains(t, href, "span=")

	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(href),
		chromedp.WaitVisible(`.span-row.selected`, chromedp.ByQuery),
		// textContent, not innerText: the page may still be laying the tree out.
		wait(`document.querySelector(".span-row.selected .span-name")?.textContent === "demo/research"`),
		wait(`document.querySelector("#span-detail")?.textContent.includes("genkit:output")`),
	), "the deep link opens the page with the span selected and its panel shown")
	require.Empty(t, br.Problems())
}

// TestBrowserHostileContentNeverExecutes stores a run whose messages, tool outputs, chunks,
// interrupt metadata and span attributes carry <script> tags, event-handler attributes and
// javascript: URLs, renders every page that shows them, and proves nothing ran: no flag set, no
// CSP violation (which an injected inline handler would cause), and the text shown as text.
func TestBrowserHostileContentNeverExecutes(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	const (
		script = `<script>window.__xss=1</script>`
		img    = `<img src=x onerror="window.__xss=2">`
		jsURL  = `javascript:window.__xss=3`
		svg    = `<svg onload="window.__xss=4"></svg>`
	)
	hostile := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/" + script, Input: json.RawMessage(`{"q":` + hostile(img) + `}`)})
	require.NoError(t, err)
	parts := fmt.Sprintf(`{"role":"model","content":[{"text":%s},{"media":{"url":%s,"contentType":"text/html"}},{"toolRequest":{"name":%s,"ref":"r1","input":{"x":%s}},"metadata":{"interrupt":{"message":%s}}}]}`,
		hostile(script+img), hostile(jsURL), hostile(svg), hostile(jsURL), hostile(img))
	require.NoError(t, b.store.MessagePut(ctx, run.ID, 0, 0, "model", json.RawMessage(parts)))
	require.NoError(t, b.store.MessagePut(ctx, run.ID, 1, 0, "tool", json.RawMessage(fmt.Sprintf(
		`{"role":"tool","content":[{"toolResponse":{"name":"t","ref":"r0","output":{"html":%s,"link":%s}}}]}`, hostile(script+svg), hostile(jsURL)))))
	_, _, err = b.store.ToolCallStart(ctx, store.Fence{}, store.ToolCallStartParams{RunID: run.ID, Turn: 0, Ref: "r0", Tool: svg, Input: json.RawMessage(`{"a":` + hostile(img) + `}`), IdempotencyKey: "k"})
	require.NoError(t, err)
	require.NoError(t, b.store.ChunkInsert(ctx, []store.RunChunk{{RunID: run.ID, Seq: 1, Role: "model", Content: json.RawMessage(`{"text":` + hostile(script+img) + `}`)}}))
	_, err = b.store.InterruptCreate(ctx, []store.InterruptCreateParams{{RunID: run.ID, Turn: 0, Tool: svg, Ref: "r1",
		Input: json.RawMessage(`{"x":` + hostile(jsURL) + `}`), Metadata: json.RawMessage(`{"message":` + hostile(img+script) + `}`)}})
	require.NoError(t, err)
	traceID := strings.ReplaceAll(uuid.NewString(), "-", "")
	now := time.Now().UnixNano()
	attrs := fmt.Sprintf(`{"loupe.run.id":%q,"genkit:input":%s,"genkit:output":%s}`, run.ID, hostile(script), hostile(img+jsURL))
	_, err = b.store.SpanIngest(ctx, []store.Span{
		{TraceID: traceID, SpanID: "00000000000000a1", Name: svg, StartTime: now - 1e6, EndTime: now, Attributes: json.RawMessage(attrs),
			Events: json.RawMessage(`[{"name":` + hostile(script) + `}]`), Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{}`), Source: store.SpanSourceOTLP},
	})
	require.NoError(t, err)

	br := browsertest.New(t)
	for _, u := range []string{"/runs/" + run.ID.String() + "?span=00000000000000a1", "/runs/" + run.ID.String() + "?tab=conversation",
		"/inbox", "/runs", "/traces", "/traces/" + traceID + "?span=00000000000000a1", "/"} {
		var flag any
		var text string
		require.NoError(t, br.Run(
			chromedp.Navigate(b.url+u),
			chromedp.WaitVisible(`main`, chromedp.ByQuery),
			wait(`document.readyState === "complete"`),
			chromedp.Sleep(150*time.Millisecond), // let live updates and lazy loads land
			chromedp.Evaluate(`window.__xss ?? null`, &flag),
			chromedp.Evaluate(`document.body.innerText`, &text),
		), u)
		require.Nil(t, flag, "%s: hostile content executed", u)
		require.Empty(t, br.Problems(), "%s: no CSP violation, no error", u)
		if u != "/" && u != "/traces" {
			require.Contains(t, text, "<script>", "%s shows the text as text", u)
		}
		var jsLinks int
		require.NoError(t, br.Run(chromedp.Evaluate(`[...document.querySelectorAll("a[href]")].filter(a => a.protocol === "javascript:").length`, &jsLinks)))
		require.Zero(t, jsLinks, "%s: no javascript: link", u)
	}
	var streamed string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()+"?tab=stream"),
		wait(`document.querySelectorAll("#chunks span[data-seq]").length === 1`),
		chromedp.Text(`#chunks`, &streamed, chromedp.ByQuery),
	))
	require.Contains(t, streamed, script, "a streamed chunk is text too")
	var flag any
	require.NoError(t, br.Run(chromedp.Evaluate(`window.__xss ?? null`, &flag)))
	require.Nil(t, flag)
	require.Empty(t, br.Problems())
}
