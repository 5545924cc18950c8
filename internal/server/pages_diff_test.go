package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestBrowserComparePageReadsWell: comparing a run with a fork that edited a tool output, the A
// and B headers sit side by side at the same height and width, no table is wider than the page
// (long JSON paths wrap), the change inside a string is marked on both sides, the edit is shown
// once and its later appearances link to it, only a tool call that differs gets a heading (the
// identical ones are named on one line a turn), and two runs of different actions get a warning.
func TestBrowserComparePageReadsWell(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	orig := b.startRun(t, "/flow/researchAgent", `{"topic":"comparisons","depth":2}`, store.RunSucceeded)
	one := 1
	fork, err := b.runs.Replay(ctx, runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayFork, Turn: &one,
		Edits: []runs.Edit{{Turn: new(int), Ref: "r0-0", Output: json.RawMessage(`{"query":"q","source":"an edited source of note","summary":"s"}`)}}})
	require.NoError(t, err)
	b.waitStatus(t, fork.ID, store.RunSucceeded)
	other := b.startRun(t, "/flow/countdown", `{"from":2}`, store.RunSucceeded)

	br := browsertest.New(t)
	var layout struct {
		TopA, TopB, WidthA, WidthB float64
		Overflowing                int
		Marks                      []string
		SameAs                     int
		SameAsTargetsExist         bool
		Warning                    bool
		ToolHeadings, SameTools    []string
	}
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.EmulateViewport(1000, 900),
		chromedp.Navigate(b.url+"/runs/"+orig.ID.String()+"/diff/"+fork.ID.String()),
		wait(`document.querySelector('[data-testid="diff-run-B"]') !== null`),
		chromedp.Evaluate(`(() => {
			const a = document.querySelector('[data-testid="diff-run-A"]').getBoundingClientRect();
			const b = document.querySelector('[data-testid="diff-run-B"]').getBoundingClientRect();
			const same = [...document.querySelectorAll('[data-testid="diff-same-as"] a')];
			return {
				TopA: a.top, TopB: b.top, WidthA: a.width, WidthB: b.width,
				Overflowing: [...document.querySelectorAll("table.diff")].filter(t => t.scrollWidth > t.clientWidth + 1 || t.getBoundingClientRect().right > innerWidth).length,
				Marks: [...document.querySelectorAll('[data-testid="diff-inline"] mark')].map(m => m.textContent),
				SameAs: same.length,
				SameAsTargetsExist: same.every(l => document.getElementById(l.getAttribute("href").slice(1)) !== null),
				Warning: document.querySelector('[data-testid="diff-actions-differ"]') !== null,
				ToolHeadings: [...document.querySelectorAll(".diff-tool h3")].map(h => h.textContent.replace(/\s+/g, " ").trim()),
				SameTools: [...document.querySelectorAll('[data-testid="diff-same-tools"]')].map(p => p.textContent),
			};
		})()`, &layout),
	))
	require.Equal(t, layout.TopA, layout.TopB, "A and B headers line up")
	require.InDelta(t, layout.WidthA, layout.WidthB, 1)
	require.Zero(t, layout.Overflowing, "no diff table is wider than the page")
	require.NotEmpty(t, layout.Marks, "the change inside the string is marked")
	require.Contains(t, layout.Marks, "an edited source of note", "B's side marks what A lacks: %v", layout.Marks)
	require.Positive(t, layout.SameAs, "the edit propagates to the tool message and the next request, and is shown once")
	require.True(t, layout.SameAsTargetsExist)
	require.False(t, layout.Warning, "a fork is of the same action")
	require.Equal(t, []string{"search ref r0-0 differs"}, layout.ToolHeadings, "only the edited call gets a heading")
	require.Equal(t, []string{"The same in both: search ×5 (r0-1, r0-2, r0-3, r0-4, r0-5)",
		"The same in both: search ×6 (r1-0, r1-1, r1-2, r1-3, r1-4, r1-5)"}, layout.SameTools, "identical calls share a line a turn")
	require.Empty(t, br.Problems())

	var warning string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs/"+orig.ID.String()+"/diff/"+other.ID.String()),
		chromedp.WaitVisible(`[data-testid="diff-actions-differ"]`, chromedp.ByQuery),
		chromedp.Text(`[data-testid="diff-actions-differ"]`, &warning, chromedp.ByQuery),
	))
	require.Contains(t, warning, "different actions")
	require.Contains(t, warning, "/flow/countdown")
}
