package server

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserRunPageTabs: the run page is tabs (Trace, Conversation, Stream, Ledger, Lineage), the
// tab in the address; each page holds its own tab only, so the trace tab carries no conversation,
// stream or ledger, and the others no span tree.
func TestBrowserRunPageTabs(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/researchAgent", `{"topic":"tabs","depth":2}`, store.RunSucceeded)
	b.flushSpans(t, run.ID, 10)
	br := browsertest.New(t)
	type view struct {
		Current                                      string
		Tabs                                         []string
		Trace, Conversation, Stream, Ledger, Lineage bool
	}
	read := `(() => ({
		Current: document.querySelector('nav.run-tabs a[aria-current="page"]').dataset.tab,
		Tabs: [...document.querySelectorAll("nav.run-tabs a")].map(a => a.dataset.tab),
		Trace: !!document.querySelector("#trace .spantree"),
		Conversation: !!document.getElementById("conversation"),
		Stream: !!document.getElementById("chunks"),
		Ledger: !!document.getElementById("ledger"),
		Lineage: !!document.getElementById("lineage"),
	}))()`
	var v view
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()),
		chromedp.WaitVisible(`nav.run-tabs`, chromedp.ByQuery),
		chromedp.Evaluate(read, &v),
	))
	require.Equal(t, []string{"trace", "conversation", "stream", "ledger", "lineage"}, v.Tabs)
	require.Equal(t, view{Current: "trace", Tabs: v.Tabs, Trace: true}, v, "the trace tab holds the trace only")
	for _, tab := range []string{"conversation", "stream", "ledger", "lineage"} {
		var search string
		require.NoError(t, chromedp.Run(br.Ctx,
			browsertest.Click(`nav.run-tabs a[data-tab="`+tab+`"]`),
			chromedp.WaitVisible(`nav.run-tabs a[aria-current="page"][data-tab="`+tab+`"]`, chromedp.ByQuery),
			chromedp.Evaluate(read, &v),
			chromedp.Evaluate(`location.search`, &search),
		))
		require.Equal(t, "?tab="+tab, search, "the tab is in the address")
		want := view{Current: tab, Tabs: v.Tabs}
		switch tab {
		case "conversation":
			want.Conversation = true
		case "stream":
			want.Stream = true
		case "ledger":
			want.Ledger = true
		case "lineage":
			want.Lineage = true
		}
		require.Equal(t, want, v, "the %s tab holds itself only", tab)
	}
	require.Empty(t, br.Problems())
}

// TestBrowserRunTabsKeepTheHeaderFirstAndTheWidth: on every tab of the run page the run's header
// comes first, then the tabs, then the tab (the ledger's table once came above the header), and
// the page is as wide on every tab as on the trace's, on a wide screen, so that switching tabs
// does not make the page jump.
func TestBrowserRunTabsKeepTheHeaderFirstAndTheWidth(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/researchAgent", `{"topic":"widths","depth":2}`, store.RunSucceeded)
	b.flushSpans(t, run.ID, 10)
	br := browsertest.New(t)
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.EmulateViewport(2400, 1000)))
	type layout struct {
		HeaderBottom, TabsTop, TabsBottom, ContentTop float64
		MainWidth, HeaderWidth                        float64
	}
	read := `(() => {
		const r = s => document.querySelector(s).getBoundingClientRect();
		const content = document.querySelector("#trace, #conversation, #chunks, #ledger, #lineage");
		return {HeaderBottom: r(".run-header").bottom, TabsTop: r("nav.run-tabs").top, TabsBottom: r("nav.run-tabs").bottom,
			ContentTop: content.getBoundingClientRect().top,
			MainWidth: r("main").width, HeaderWidth: r(".run-header").width};
	})()`
	var first layout
	for _, tab := range []string{"trace", "conversation", "stream", "ledger", "lineage"} {
		var l layout
		require.NoError(t, chromedp.Run(br.Ctx,
			chromedp.Navigate(b.url+"/runs/"+run.ID.String()+"?tab="+tab),
			chromedp.WaitVisible(`nav.run-tabs a[aria-current="page"][data-tab="`+tab+`"]`, chromedp.ByQuery),
			chromedp.Evaluate(read, &l),
		))
		require.LessOrEqual(t, l.HeaderBottom, l.TabsTop, "%s: the header above the tabs", tab)
		require.LessOrEqual(t, l.TabsBottom, l.ContentTop, "%s: the tabs above the tab", tab)
		if tab == "trace" {
			first = l
			require.Greater(t, l.MainWidth, 1500.0, "the trace tab takes a wide screen's width")
			continue
		}
		require.Equal(t, first.MainWidth, l.MainWidth, "%s: the page as wide as on the trace tab", tab)
		require.Equal(t, first.HeaderWidth, l.HeaderWidth, "%s: the header as wide as on the trace tab", tab)
	}
	require.Empty(t, br.Problems())
}
