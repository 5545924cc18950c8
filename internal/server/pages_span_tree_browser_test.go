package server

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
)

// TestBrowserRunPageWith10000SpansStaysUsable opens a run whose trace has 10,000 spans. The page
// renders the turns collapsed (a few dozen rows, not ten thousand), a turn expands to its model
// and tool calls, and a selected span shows its payloads.
func TestBrowserRunPageWith10000SpansStaysUsable(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	runID := seedTrace(t, b.store, 10000)
	br := browsertest.New(t)

	var rows, open int
	var header string
	turn := `[...document.querySelectorAll(".span-row")].find(r => r.querySelector(".span-label")?.textContent === "turn 7")`
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+runID.String()),
		chromedp.WaitVisible(`.spantree`, chromedp.ByQuery),
		chromedp.Text(`#trace`, &header, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &rows),
		chromedp.Evaluate(turn+`.querySelector("[data-toggle]").click(); true`, nil),
		wait(turn+`.getAttribute("aria-expanded") === "true"`),
		chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &open),
		chromedp.Evaluate(turn+`.nextElementSibling.querySelector("[data-select]").click(); true`, nil),
		wait(`document.querySelector("#span-detail")?.textContent.includes("genkit:output")`),
	))
	require.Contains(t, header, "10000 spans")
	require.Less(t, rows, 300, "only the collapsed turns are rendered, not 10,000 rows")
	require.Equal(t, rows+7, open, "expanding a turn adds its model call and six tool calls")
	require.Empty(t, br.Problems())
}
