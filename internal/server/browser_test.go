package server

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
)

// TestBrowserDashboardRendersCleanly loads the dashboard in a real Chromium and requires no console
// errors and no CSP violations. It first proves that the detector sees a violation, so that a
// silent detector cannot make it pass.
func TestBrowserDashboardRendersCleanly(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	br := browsertest.New(t)

	var heading, devBadge string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/"),
		chromedp.WaitVisible(`main h1`, chromedp.ByQuery),
		chromedp.Text(`main h1`, &heading, chromedp.ByQuery),
		chromedp.Text(`.devmode`, &devBadge, chromedp.ByQuery),
		chromedp.WaitVisible(`html[data-js="on"]`, chromedp.ByQuery), // the module script ran under the CSP
	))
	require.Equal(t, "Dashboard", heading)
	require.Contains(t, devBadge, "local mode")
	require.Empty(t, br.Problems(), "the dashboard must load without console errors or CSP violations")

	// An inline handler is exactly what the CSP must block; the detector must notice.
	require.NoError(t, br.Run(chromedp.Evaluate(`document.body.insertAdjacentHTML('beforeend', '<img src="data:," onload="window.pwned=1">')`, nil)))
	require.Eventually(t, func() bool { return len(br.Problems()) > 0 }, 5e9, 5e7, "a CSP violation must be reported")
	var pwned bool
	require.NoError(t, br.Run(chromedp.Evaluate(`window.pwned === 1`, &pwned)))
	require.False(t, pwned, "the inline handler must not run")
}
