package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// serveGenkitProject runs `serve --dev --genkit-project dir` on a database of its own until the
// test ends, and returns its URL.
func serveGenkitProject(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := freePort(t)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--dev", "--no-demo", "--addr", addr, "--database-url", storetest.NewURL(t), "--data-dir", t.TempDir(),
			"--log-level", "error", "--genkit-project", dir})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Fatal("serve did not stop after its context ended")
		}
	})
	return "http://" + addr
}

// waitListed waits until the action catalogue lists every key.
func waitListed(t *testing.T, base string, keys ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var list struct {
			Actions []struct {
				Key string `json:"key"`
			} `json:"actions"`
		}
		getJSON(t, base+"/api/v1/actions", &list)
		found := map[string]bool{}
		for _, a := range list.Actions {
			found[a.Key] = true
		}
		for _, k := range keys {
			if !found[k] {
				return false
			}
		}
		return true
	}, 2*time.Minute, 100*time.Millisecond, "the catalogue lists %v", keys)
}

func pollPage(expr string) chromedp.Action {
	return chromedp.Poll(expr, nil, chromedp.WithPollingTimeout(time.Minute), chromedp.WithPollingInterval(20*time.Millisecond))
}

// TestBrowserGenkitFlowChunksShowLiveOnTheRunPage starts the real Genkit JS app's streaming flow
// (countdown, pausing a second after each chunk) from the Actions page: the run page's Stream tab
// shows the app's chunks as the app sends them, one more at a time while the run still runs and
// without a reload of the page, then all of them once it has succeeded.
func TestBrowserGenkitFlowChunksShowLiveOnTheRunPage(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	genkitapptest.Start(t, dir, "streamer")
	base := serveGenkitProject(t, dir)
	waitListed(t, base, "streamer:/flow/countdown")
	br := browsertest.New(t)
	countdown := `article[data-action="streamer:/flow/countdown"]`
	const shown = `document.querySelectorAll("#chunks span[data-seq]").length`
	const status = `document.querySelector(".run-header").dataset.status`

	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(base+"/actions/streamer:/flow/countdown"),
		chromedp.WaitVisible(countdown+` textarea[name="input"]`, chromedp.ByQuery),
		chromedp.SetValue(countdown+` textarea[name="input"]`, `{"from":5,"pauseMs":1000}`, chromedp.ByQuery),
		browsertest.Click(countdown+` button[type="submit"]`),
		chromedp.WaitVisible(`.run-header`, chromedp.ByQuery),
		browsertest.Click(`nav.run-tabs a[data-tab="stream"]`),
		chromedp.WaitVisible(`#chunks`, chromedp.ByQuery),
		pollPage(`document.documentElement.dataset.live === "live"`),
		// A page loaded again would lose this.
		chromedp.Evaluate(`window.sameLoad = true`, nil),
	))
	// The app pauses a second after each chunk and before it answers: while the run runs, the
	// page shows a chunk, then one more, which only the live channel can have brought.
	var first int
	require.NoError(t, chromedp.Run(br.Ctx,
		pollPage(shown+` >= 1 && `+status+` === "running"`),
		chromedp.Evaluate(shown, &first),
	))
	require.Less(t, first, 5, "the chunks shown while the run runs are not all of them at once: they come as the app sends them")
	var second int
	var stillRunning, sameLoad bool
	require.NoError(t, chromedp.Run(br.Ctx,
		pollPage(fmt.Sprintf(`%s > %d || %s !== "running"`, shown, first, status)),
		chromedp.Evaluate(shown, &second),
		chromedp.Evaluate(status+` === "running"`, &stillRunning),
		chromedp.Evaluate(`window.sameLoad === true`, &sameLoad),
	))
	require.Greater(t, second, first, "another chunk arrived")
	require.True(t, stillRunning, "it arrived while the run was running, %d chunks shown before it", first)
	require.True(t, sameLoad, "through the live channel, not a reload")

	var text string
	require.NoError(t, chromedp.Run(br.Ctx,
		pollPage(status+` === "succeeded" && `+shown+` === 5`),
		chromedp.Evaluate(`window.sameLoad === true`, &sameLoad),
		chromedp.Text(`#chunks`, &text, chromedp.ByQuery),
	))
	require.True(t, sameLoad)
	for n := 5; n >= 1; n-- {
		require.Contains(t, text, fmt.Sprintf(`{"n":%d}`, n))
	}
	require.Empty(t, br.Problems())
}

// TestBrowserActionsPageShowsEachGenkitAppUnderItsName attaches to two real Genkit JS apps of one
// project: the Actions page shows a section for each, named and live, holding that app's actions
// and none of the other's. Once one is killed, the page shows it as gone, without its actions,
// and the other one still listed and runnable from the page.
func TestBrowserActionsPageShowsEachGenkitAppUnderItsName(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	north := genkitapptest.Start(t, dir, "north")
	genkitapptest.Start(t, dir, "south")
	base := serveGenkitProject(t, dir)
	waitListed(t, base, "north:/flow/echo", "north:/prompt/transferPrompt", "south:/flow/echo", "south:/prompt/transferPrompt")
	// The browser outlives the test's own waits (a minute for north to be shown gone, a page load
	// per poll, then a run): New's five minutes (two ran out at the last step in a CI run under load).
	br := browsertest.New(t)

	type section struct {
		Heading string   `json:"heading"`
		Live    bool     `json:"live"`
		Status  string   `json:"status"`
		Keys    []string `json:"keys"`
	}
	sections := func() map[string]section {
		var got map[string]section
		require.NoError(t, chromedp.Run(br.Ctx,
			chromedp.Navigate(base+"/actions"),
			chromedp.WaitVisible(`#page[data-page="actions"]`, chromedp.ByQuery),
			chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll("section.genkit-app")].map(s => [s.dataset.app, {
				heading: s.querySelector("h2").textContent.replace(/\s+/g, " ").trim(),
				live: s.hasAttribute("data-live"),
				status: s.querySelector("p").textContent,
				keys: [...s.querySelectorAll("tr[data-action]")].map(a => a.dataset.action),
			}]))`, &got),
		))
		return got
	}
	page := sections()
	var dupIDs []string
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Evaluate(`(() => {
		const seen = new Set(), dup = [];
		document.querySelectorAll("[id]").forEach((el) => { if (seen.has(el.id)) dup.push(el.id); seen.add(el.id); });
		return dup;
	})()`, &dupIDs)))
	require.Empty(t, dupIDs, "two apps with the same actions still give each element its own id")
	for _, name := range []string{"north", "south"} {
		s, ok := page[name]
		require.True(t, ok, "a section for %s: %+v", name, page)
		require.True(t, s.Live, name)
		require.Equal(t, name+" live", s.Heading)
		for _, k := range []string{"/flow/echo", "/flow/weatherFlow", "/flow/countdown", "/prompt/transferPrompt", "/model/scripted"} {
			require.Contains(t, s.Keys, name+":"+k, "%s's section lists its %s", name, k)
		}
		for _, k := range s.Keys {
			require.True(t, strings.HasPrefix(k, name+":"), "%s's section holds only its own actions, not %s", name, k)
		}
	}

	north.Kill(t)
	require.Eventually(t, func() bool {
		page = sections()
		return !page["north"].Live
	}, time.Minute, 200*time.Millisecond, "north is shown as gone")
	require.Equal(t, "north gone", page["north"].Heading)
	// Why it is gone: its process exited, or its reflection server stopped answering (whichever
	// the watcher saw first).
	require.Regexp(t, `gone since \d\d:\d\d:\d\d: .*(exited|health check failed)`, page["north"].Status)
	require.Empty(t, page["north"].Keys, "a gone app's actions are not offered")
	require.True(t, page["south"].Live)
	require.Contains(t, page["south"].Keys, "south:/flow/echo")

	echo := `article[data-action="south:/flow/echo"]`
	var output string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(base+"/actions/south:/flow/echo"),
		chromedp.WaitVisible(echo+` textarea[name="input"]`, chromedp.ByQuery),
		chromedp.SetValue(echo+` textarea[name="input"]`, `"still here"`, chromedp.ByQuery),
		browsertest.Click(echo+` button[type="submit"]`),
		chromedp.WaitVisible(`.run-header[data-status="succeeded"]`, chromedp.ByQuery),
		chromedp.Text(`.run-header .io`, &output, chromedp.ByQuery),
	))
	require.Contains(t, output, "echo: still here", "the app still there runs")
	require.Empty(t, br.Problems())
}
