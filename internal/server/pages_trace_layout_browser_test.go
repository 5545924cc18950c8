package server

import (
	"context"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
)

// TestBrowserTraceViewDividerBadgesAndWrapping: at 1280 px every span's label ("turn 12") is shown
// whole inside its row, however narrow the names column; the divider between names and waterfall
// moves with the keyboard, and the width it was given survives a reload (localStorage); an
// attribute value can wrap only at its separators ("invoke_" "agent"), never mid-word.
func TestBrowserTraceViewDividerBadgesAndWrapping(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	runID := seedTrace(t, b.store, 200)
	br := browsertest.New(t)

	labelsWhole := `[...document.querySelectorAll(".span-row .span-label")].every(l => {
		const cell = l.closest(".tree-cell").getBoundingClientRect(), r = l.getBoundingClientRect();
		return l.scrollWidth <= l.clientWidth + 1 && r.right <= cell.right + 1 && r.left >= cell.left - 1;
	})`
	nameWidth := `Math.round(document.querySelector(".span-row .tree-cell").getBoundingClientRect().width)`
	var whole, wholeNarrow bool
	var before, after, reloaded int
	var saved string
	require.NoError(t, br.Run(
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(b.url+"/runs/"+runID.String()),
		chromedp.WaitVisible(`[data-tl-divider]`, chromedp.ByQuery),
		wait(`document.querySelector("[data-tl-divider]").dataset.ready === "1"`),
		chromedp.Evaluate(`localStorage.removeItem("loupe.timeline.names"); true`, nil),
		chromedp.Evaluate(labelsWhole, &whole),
		chromedp.Evaluate(nameWidth, &before),
		chromedp.Focus(`[data-tl-divider]`, chromedp.ByQuery),
		chromedp.KeyEvent(kb.ArrowRight),
		chromedp.KeyEvent(kb.ArrowRight),
		// Keys are handled after KeyEvent returns: wait for the second step.
		chromedp.ActionFunc(func(ctx context.Context) error {
			return wait(nameWidth + ` >= ` + strconv.Itoa(before+46)).Do(ctx)
		}),
		chromedp.Evaluate(nameWidth, &after),
		chromedp.Evaluate(`localStorage.getItem("loupe.timeline.names")`, &saved),
		chromedp.Reload(),
		chromedp.WaitVisible(`[data-tl-divider]`, chromedp.ByQuery),
		wait(`document.querySelector("[data-tl-divider]").dataset.ready === "1"`),
		chromedp.Evaluate(nameWidth, &reloaded),
		// The narrowest the divider allows: the labels still show whole, the names give way.
		chromedp.Evaluate(`localStorage.setItem("loupe.timeline.names", "160"); true`, nil),
		chromedp.Reload(),
		wait(`document.querySelector("[data-tl-divider]")?.dataset.ready === "1"`),
		chromedp.Evaluate(labelsWhole, &wholeNarrow),
	))
	require.True(t, whole, "every label is shown whole")
	require.True(t, wholeNarrow, "every label is shown whole in the narrowest names column")
	require.InDelta(t, before+48, after, 2, "two presses of → widen the names by 24 px each")
	require.NotEmpty(t, saved)
	require.InDelta(t, after, reloaded, 2, "the width survives a reload")

	// The root span's attributes: "invoke_agent" may break after "invoke_", nowhere else.
	var parts []string
	require.NoError(t, br.Run(
		chromedp.Evaluate(`document.querySelector(".span-row [data-select]").click(); true`, nil),
		wait(`[...document.querySelectorAll("#span-detail td.attr-value")].some(td => td.textContent === "invoke_agent")`),
		chromedp.Evaluate(`(() => {
			const td = [...document.querySelectorAll("#span-detail td.attr-value")].find(td => td.textContent === "invoke_agent");
			return td.innerHTML.split("<wbr>").filter(Boolean);
		})()`, &parts),
	))
	require.Equal(t, []string{"invoke_", "agent"}, parts)
	require.Empty(t, br.Problems())
}
