package server

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
)

// findView is what the tree shows of a search, read in the browser.
type findView struct {
	Count     string
	Current   string
	Selected  string
	Matches   []string
	Rows      []string
	Focused   string
	Active    string
	Weather   string
	ChildText string
}

const readFindView = `(() => {
	const row = (sel) => (document.querySelector(sel) || {dataset: {}}).dataset.span || "";
	const w = document.querySelector('#span-a82fb8a615aa1760');
	return {
		Count: document.querySelector(".search-count").textContent,
		Current: row(".span-row.current-match"),
		Selected: row(".span-row.selected"),
		Matches: [...document.querySelectorAll(".span-row.match")].map(e => e.dataset.span),
		Rows: [...document.querySelectorAll(".spantree .span-row[data-span]")].map(e => e.dataset.span),
		Focused: (document.activeElement.closest(".span-row") || {dataset: {}}).dataset.span || "",
		Active: document.activeElement.id || "",
		Weather: w ? w.querySelector(".span-name").textContent.trim().replace(/\s+/g, " ") : "",
		ChildText: w ? (w.querySelector(".child-count") || {}).textContent || "" : "",
	};
})()`

// TestBrowserFindASpan: on the OTel JS GenAI trace (an agent with a weather tool whose HTTP call
// sits inside the collapsed tool row), the tree says what each tool was asked ("execute_tool
// get_weather: Lisbon") and labels child counts ("1 span"); a search for the HTTP call's name
// finds it inside the collapsed row, opens the path, highlights and selects it; a search with two
// matches steps to the second with Enter; "/" focuses the search box; Up/Down/Left/Right move
// through and open the rows; collapse all leaves the root, expand all shows every span.
func TestBrowserFindASpan(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	replayFixture(t, b, "otel-js-genai-otlp.jsonl")
	const (
		id      = "32a6543ea49e8b7b5c3dfd944745d97f"
		agent   = "061835b12bc7fc26"
		weather = "a82fb8a615aa1760"
		http    = "911df2595a41b3bd"
		chat1   = "f6bd39db0d98c578"
		chat2   = "ccf03a20091c353b"
	)
	br := browsertest.New(t)
	var v findView
	read := chromedp.Evaluate(readFindView, &v)
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(b.url+"/traces/"+id),
		chromedp.WaitVisible(`#span-`+weather, chromedp.ByQuery),
		read,
	))
	require.Equal(t, "execute_tool get_weather: Lisbon", v.Weather, "a tool's row says what it was asked")
	require.Equal(t, "1 span", v.ChildText, "a child count says what it counts")
	require.NotContains(t, v.Rows, http, "the HTTP call starts inside a collapsed row")

	// A match inside a collapsed row: the path opens, the match is highlighted and selected.
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.SendKeys(`#tree-find`, "weather.EXAMPLE", chromedp.ByQuery),
		chromedp.WaitVisible(`.span-row.current-match[data-span="`+http+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`.span-row.selected[data-span="`+http+`"]`, chromedp.ByQuery),
		read,
	))
	require.Contains(t, v.Rows, http)
	require.Equal(t, []string{http}, v.Matches)
	require.Equal(t, "1 of 1", v.Count)

	// Two matches (by name): the first, then Enter steps to the second, Shift+Enter back.
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Evaluate(`document.getElementById("tree-find").value = ""`, nil),
		chromedp.SendKeys(`#tree-find`, "chat gpt", chromedp.ByQuery),
		chromedp.WaitVisible(`.span-row.current-match[data-span="`+chat1+`"]`, chromedp.ByQuery),
		read,
	))
	require.ElementsMatch(t, []string{chat1, chat2}, v.Matches)
	require.Equal(t, "1 of 2", v.Count)
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`.span-row.current-match.selected[data-span="`+chat2+`"]`, chromedp.ByQuery),
		read,
	))
	require.Equal(t, "2 of 2", v.Count)

	// "/" from anywhere but a field focuses the search box.
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Evaluate(`document.activeElement.blur()`, nil),
		chromedp.KeyEvent("/"),
		read,
	))
	require.Equal(t, "tree-find", v.Active)
	// Escape empties the box and ends the search. (A "/" that chromedp's separate char event typed
	// into the box after the keydown had focused it would otherwise start a search of its own,
	// 250 ms later, which selects its first match over the selections below.)
	var box string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.KeyEvent(kb.Escape),
		chromedp.Evaluate(`document.getElementById("tree-find").value`, &box),
	))
	require.Empty(t, box)

	// Keyboard: Down from the root goes to its first child; Right opens the weather tool, Right
	// again goes into it, Left goes back to its parent, Left again closes it; Up goes back.
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`[data-collapse-all]`),
		chromedp.WaitNotPresent(`#span-`+chat1, chromedp.ByQuery),
		read,
	))
	require.Equal(t, []string{agent}, v.Rows, "collapse all leaves the root")
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Focus(`#span-`+agent+` [data-select]`, chromedp.ByQuery),
		chromedp.KeyEvent(kb.ArrowRight),
		chromedp.WaitVisible(`#span-`+weather, chromedp.ByQuery),
		chromedp.KeyEvent(kb.ArrowDown),
		chromedp.KeyEvent(kb.ArrowDown),
		read,
	))
	require.Equal(t, weather, v.Focused, "Down twice: past the first model call to the tool")
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.KeyEvent(kb.ArrowRight),
		chromedp.WaitVisible(`#span-`+http, chromedp.ByQuery),
		chromedp.KeyEvent(kb.ArrowRight),
		read,
	))
	require.Equal(t, http, v.Focused, "Right on an open row goes to its first child (focus on %q, rows %v)", v.Active, v.Rows)
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.KeyEvent(kb.ArrowLeft),
		read,
	))
	require.Equal(t, weather, v.Focused, "Left on a leaf goes to its parent")
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.KeyEvent(kb.ArrowLeft),
		chromedp.WaitNotPresent(`#span-`+http, chromedp.ByQuery),
		chromedp.KeyEvent(kb.ArrowUp),
		read,
	))
	require.Equal(t, chat1, v.Focused)
	enter, cancel := context.WithTimeout(br.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Run(enter,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`.span-row.selected[data-span="`+chat1+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#span-detail .span-panel[data-span="`+chat1+`"]`, chromedp.ByQuery),
	); err != nil {
		var panel string
		_ = chromedp.Run(br.Ctx, chromedp.Evaluate(`document.querySelector("#span-detail")?.outerHTML.slice(0, 300) ?? "none"`, &panel), read)
		t.Fatalf("Enter on a row selects it and shows its panel: %v (selected %q, focus %q, panel %s, problems %v)", err, v.Selected, v.Focused, panel, br.Problems())
	}

	// Expand all shows every span, the HTTP call too.
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`[data-expand-all]`),
		chromedp.WaitVisible(`#span-`+http, chromedp.ByQuery),
		read,
	))
	require.Len(t, v.Rows, 6)
	require.Empty(t, br.Problems())
}

// TestBrowserFindASpanPastAPageOfChildren: a match inside a collapsed row that is itself past the
// first page of its parent's 460 children is reached: the pages before it load, its row opens,
// and the match is highlighted and selected.
func TestBrowserFindASpanPastAPageOfChildren(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	traceID, _, target := wideTrace(t, b.store, nil, nil)
	br := browsertest.New(t)
	var inView bool
	require.NoError(t, br.Run(
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(b.url+"/traces/"+traceID),
		chromedp.WaitVisible(`.span-row.more`, chromedp.ByQuery),
		chromedp.SendKeys(`#tree-find`, "the-target", chromedp.ByQuery),
		chromedp.WaitVisible(`.span-row.current-match.selected[data-span="`+target+`"]`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => {
			const tree = document.querySelector(".spantree").getBoundingClientRect();
			const row = document.querySelector(".span-row.current-match").getBoundingClientRect();
			return row.top >= tree.top && row.bottom <= tree.bottom;
		})()`, &inView),
	))
	require.True(t, inView, "the match is scrolled into view")
	require.Empty(t, br.Problems())
}
