package browsertest

import (
	"strconv"
	"time"

	"github.com/chromedp/chromedp"
)

// Click waits until the first element selector matches is rendered, then clicks it, in the same
// script. chromedp.Click finds the node, then clicks it by its id in a later call; a live page that
// re-renders in between (a fresh render after its stream connects, an update of a list) has
// replaced the node by then, and the click fails with "Could not find node with given id", which
// loaded CI machines hit. The element's own click() follows links and submits forms as a press
// does; a test of hit-testing presses with the mouse instead.
func Click(selector string) chromedp.Action {
	return chromedp.Poll(`(() => {
	const el = document.querySelector(`+strconv.Quote(selector)+`);
	if (!el || el.getClientRects().length === 0) return false;
	el.click();
	return true;
})()`, nil, chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(25*time.Millisecond))
}
