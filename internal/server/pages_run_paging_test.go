package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// longRun stores a run with 300 messages, 250 tool calls and chunks 1 to nChunks (100 a turn).
func longRun(t *testing.T, b *bundle, nChunks int) *store.Run {
	t.Helper()
	ctx := context.Background()
	run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/long", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	roles := []string{"user", "model", "tool"}
	for seq := range 300 {
		role := roles[seq%3]
		require.NoError(t, b.store.MessagePut(ctx, run.ID, seq, seq/3, role,
			json.RawMessage(fmt.Sprintf(`{"role":%q,"content":[{"text":"message %d"}]}`, role, seq))))
	}
	for i := range 250 {
		_, _, err := b.store.ToolCallStart(ctx, store.Fence{}, store.ToolCallStartParams{RunID: run.ID, Turn: i / 10,
			Ref: fmt.Sprintf("r%03d", i), Tool: "search", Input: json.RawMessage(`{"q":"` + strconv.Itoa(i) + `"}`), IdempotencyKey: strconv.Itoa(i)})
		require.NoError(t, err)
	}
	require.NoError(t, b.store.ChunkInsert(ctx, chunkRange(run.ID, 1, int64(nChunks))))
	return run
}

// chunkRange is chunks from to to of a run's stream, a model's text, 100 a turn.
func chunkRange(runID uuid.UUID, from, to int64) []store.RunChunk {
	var out []store.RunChunk
	for seq := from; seq <= to; seq++ {
		out = append(out, store.RunChunk{RunID: runID, Seq: seq, Turn: int(seq / 100), Index: 1, Role: "model",
			Content: json.RawMessage(fmt.Sprintf(`[{"text":"c%d "}]`, seq))})
	}
	return out
}

// listView is what a paged list shows: how many items, the first and last of them, its count
// and which of its links show.
type listView struct {
	N           int
	First, Last int
	Count       string
	Prev, Next  bool
}

// readList reads a list's view; items are the selector of its items, key the data attribute
// that numbers them.
func readList(items, key, count, prev, next string) string {
	return fmt.Sprintf(`(() => {
		const n = [...document.querySelectorAll(%q)].map(e => Number(e.dataset.%s));
		const shown = (sel) => { const a = document.querySelector(sel); return !!a && !a.hidden; };
		return { N: n.length, First: n.length ? Math.min(...n) : -1, Last: n.length ? Math.max(...n) : -1,
			Count: document.querySelector(%q)?.textContent.trim() ?? "", Prev: shown(%q), Next: shown(%q) };
	})()`, items, key, count, prev, next)
}

var (
	conversationView = readList("#conversation li.msg", "seq", "#conversation [data-pager-count]",
		`#conversation a[data-pager-link="prev"]`, `#conversation a[data-pager-link="next"]`)
	ledgerView = readList("#ledger tr[data-ref]", "ref", "#ledger [data-pager-count]",
		`#ledger a[data-pager-link="prev"]`, `#ledger a[data-pager-link="next"]`)
	streamView = readList("#chunks span[data-seq]", "seq", "#stream [data-pager-count]",
		`#stream a[data-stream-link="earlier"]`, `#stream a[data-stream-link="later"]`)
)

// TestBrowserLongRunTabsArePaged: a run with 300 messages, 250 tool calls and 3,000 chunks. Each
// tab holds one page (50 messages, 100 calls, the latest 200 chunks) and says which ("messages
// 1–50 of 300"); "newer" and "older" load the next page in place, and the page keeps three at
// most, dropping the farthest and linking to it instead. Without JS the same links are pages of
// their own, each with the right items.
func TestBrowserLongRunTabsArePaged(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true, noRuns: true})
	run := longRun(t, b, 3000)
	base := b.url + "/runs/" + run.ID.String()
	br := browsertest.New(t)
	var v listView
	click := func(sel string) chromedp.Action {
		return chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).click(); true`, sel), nil)
	}

	// The conversation.
	next, prev := `#conversation a[data-pager-link="next"]`, `#conversation a[data-pager-link="prev"]`
	require.NoError(t, br.Run(
		chromedp.Navigate(base+"?tab=conversation"),
		chromedp.WaitVisible(`#conversation li.msg`, chromedp.ByQuery),
		wait(`document.documentElement.dataset.live === "live"`),
		chromedp.Evaluate(conversationView, &v),
	))
	require.Equal(t, listView{N: 50, First: 0, Last: 49, Count: "messages 1–50 of 300", Next: true}, v)
	require.NoError(t, br.Run(click(next), wait(`document.querySelectorAll("#conversation li.msg").length === 100`), chromedp.Evaluate(conversationView, &v)))
	require.Equal(t, listView{N: 100, First: 0, Last: 99, Count: "messages 1–100 of 300", Next: true}, v, "newer messages come in place")
	var path string
	require.NoError(t, br.Run(chromedp.Evaluate(`location.pathname + location.search`, &path)))
	require.Equal(t, "/runs/"+run.ID.String()+"?tab=conversation", path, "in place: the page did not change")
	require.NoError(t, br.Run(
		click(next), wait(`document.querySelectorAll("#conversation li.msg").length === 150`),
		click(next), wait(`[...document.querySelectorAll("#conversation li.msg")].at(-1)?.dataset.seq === "199"`),
		chromedp.Evaluate(conversationView, &v),
	))
	require.Equal(t, listView{N: 150, First: 50, Last: 199, Count: "messages 51–200 of 300", Prev: true, Next: true}, v,
		"three pages at most: the first is dropped and linked to")
	var prevHref string
	require.NoError(t, br.Run(chromedp.Evaluate(`document.querySelector('`+prev+`').getAttribute("href")`, &prevHref)))
	require.Equal(t, "/runs/"+run.ID.String()+"?tab=conversation&page=1", prevHref)
	require.NoError(t, br.Run(click(prev), wait(`document.querySelector("#conversation li.msg")?.dataset.seq === "0"`), chromedp.Evaluate(conversationView, &v)))
	require.Equal(t, listView{N: 150, First: 0, Last: 149, Count: "messages 1–150 of 300", Next: true}, v, "older ones come back, the newest page goes")

	// The ledger, its tab counting every call.
	var tabLabel string
	require.NoError(t, br.Run(
		chromedp.Navigate(base+"?tab=ledger"),
		chromedp.WaitVisible(`#ledger tr[data-ref]`, chromedp.ByQuery),
		chromedp.Evaluate(ledgerView, &v),
		textOf(`nav.run-tabs a[data-tab="ledger"]`, &tabLabel),
	))
	require.Equal(t, "Ledger · 250", tabLabel)
	require.Equal(t, 100, v.N)
	require.Equal(t, listView{N: 100, First: v.First, Last: v.Last, Count: "tool calls 1–100 of 250", Next: true}, v)
	require.NoError(t, br.Run(
		click(`#ledger a[data-pager-link="next"]`), wait(`document.querySelectorAll("#ledger tr[data-ref]").length === 200`),
		click(`#ledger a[data-pager-link="next"]`), wait(`document.querySelectorAll("#ledger tr[data-ref]").length === 250`),
		chromedp.Evaluate(ledgerView, &v),
	))
	require.Equal(t, "tool calls 1–250 of 250", v.Count)
	require.False(t, v.Next, "the last page has no next")
	var refs []string
	require.NoError(t, br.Run(chromedp.Evaluate(`[...document.querySelectorAll("#ledger tr[data-ref]")].map(r => r.dataset.ref)`, &refs)))
	require.Equal(t, "r000", refs[0])
	require.Equal(t, "r249", refs[249])
	require.Len(t, refs, 250)

	// The stream: its latest page, then earlier ones in place, three pages' worth at most.
	require.NoError(t, br.Run(
		chromedp.Navigate(base+"?tab=stream"),
		chromedp.WaitVisible(`#chunks span[data-seq]`, chromedp.ByQuery),
		wait(`document.documentElement.dataset.live === "live"`),
		chromedp.Evaluate(streamView, &v),
	))
	require.Equal(t, listView{N: 200, First: 2801, Last: 3000, Count: "chunks 2801–3000 of 3000", Prev: true}, v, "the latest page")
	earlier, later := `#stream a[data-stream-link="earlier"]`, `#stream a[data-stream-link="later"]`
	require.NoError(t, br.Run(click(earlier), wait(`document.querySelectorAll("#chunks span[data-seq]").length === 400`), chromedp.Evaluate(streamView, &v)))
	require.Equal(t, listView{N: 400, First: 2601, Last: 3000, Count: "chunks 2601–3000 of 3000", Prev: true}, v)
	require.NoError(t, br.Run(
		click(earlier), wait(`document.querySelectorAll("#chunks span[data-seq]").length === 600`),
		click(earlier), wait(`document.querySelector("#chunks span[data-seq]")?.dataset.seq === "2201"`),
		chromedp.Evaluate(streamView, &v),
	))
	require.Equal(t, listView{N: 600, First: 2201, Last: 2800, Count: "chunks 2201–2800 of 3000", Prev: true, Next: true}, v,
		"600 chunks at most: the newest go, and a link leads back to them")
	var text string
	var boxes int
	require.NoError(t, br.Run(
		textOf(`.chunk-group[data-key="26:1:model"] .chunk-body`, &text),
		chromedp.Evaluate(`document.querySelectorAll('.chunk-group[data-key="26:1:model"]').length`, &boxes),
	))
	require.Equal(t, 1, boxes)
	require.True(t, strings.HasPrefix(text, "c2600 c2601 "), "a message streamed across two pages reads as one text: %q", text[:min(len(text), 40)])

	// Chunks that come meanwhile are counted, and wait for the reader to get back to the end.
	ctx := context.Background()
	more := chunkRange(run.ID, 3001, 3010)
	require.NoError(t, b.store.ChunkInsert(ctx, more))
	b.hub.PublishChunks(run.ID, more)
	require.NoError(t, br.Run(wait(`document.querySelector("#stream [data-pager-count]").textContent.includes("of 3010")`), chromedp.Evaluate(streamView, &v)))
	require.Equal(t, 2800, v.Last, "not drawn while the window is away from the end")
	require.NoError(t, br.Run(
		click(later), wait(`document.querySelector("#chunks span[data-seq]")?.dataset.seq === "2401"`),
		click(later), wait(`[...document.querySelectorAll("#chunks span[data-seq]")].some(s => s.dataset.seq === "3010")`),
		chromedp.Evaluate(streamView, &v),
	))
	require.Equal(t, listView{N: 600, First: 2411, Last: 3010, Count: "chunks 2411–3010 of 3010", Prev: true}, v, "back at the end")

	// Without JS: each link is a page of its own.
	msgSeq := regexp.MustCompile(`<li class="msg role-\w+" data-seq="(\d+)"`)
	seqsOf := func(re *regexp.Regexp, body string) []int {
		var out []int
		for _, m := range re.FindAllStringSubmatch(body, -1) {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
		return out
	}
	resp, body := get(t, base+"?tab=conversation&page=2")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := seqsOf(msgSeq, body)
	require.Len(t, got, 50)
	require.Equal(t, []int{50, 99}, []int{got[0], got[49]})
	require.Contains(t, body, "messages 51–100 of 300")
	require.Contains(t, body, `href="/runs/`+run.ID.String()+`?tab=conversation&amp;page=1"`)
	require.Contains(t, body, `href="/runs/`+run.ID.String()+`?tab=conversation&amp;page=3"`)
	_, body = get(t, base+"?tab=conversation&page=9")
	require.Contains(t, body, "messages 251–300 of 300", "a page past the end is the last")
	resp, _ = get(t, base+"?tab=conversation&page=zero")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	_, body = get(t, base+"?tab=ledger&page=3")
	require.Equal(t, 50, strings.Count(body, "<tr data-ref="))
	require.Contains(t, body, "tool calls 201–250 of 250")
	require.Contains(t, body, `data-ref="r200"`)

	chunkSeq := regexp.MustCompile(`<span data-seq="(\d+)"`)
	_, body = get(t, base+"?tab=stream&before=2801")
	got = seqsOf(chunkSeq, body)
	require.Len(t, got, 200)
	require.Equal(t, []int{2601, 2800}, []int{got[0], got[199]})
	require.Contains(t, body, "chunks 2601–2800 of 3010")
	require.Contains(t, body, `href="/runs/`+run.ID.String()+`?tab=stream&amp;before=2601"`)
	require.Contains(t, body, `href="/runs/`+run.ID.String()+`?tab=stream&amp;after=2800"`)
	_, body = get(t, base+"?tab=stream&after=100")
	got = seqsOf(chunkSeq, body)
	require.Equal(t, []int{101, 300}, []int{got[0], got[len(got)-1]})
	require.Contains(t, body, "chunks 101–300 of 3010")
	_, body = get(t, base+"?tab=stream")
	require.Contains(t, body, "chunks 2811–3010 of 3010")
	resp, _ = get(t, base+"?tab=stream&before=x")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Empty(t, br.Problems())
}

// TestBrowserLiveStreamFollowsWithinItsCap: the stream of a running run shows its latest page
// and follows the chunks that come, keeping 600 at most: the oldest go, and a link leads to
// them. Scrolled up, it stays where the reader is; past its cap it stops drawing and a button
// counts what came, which brings the reader back to the end, following again.
func TestBrowserLiveStreamFollowsWithinItsCap(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true, noRuns: true})
	run := longRun(t, b, 300)
	br := browsertest.New(t)
	var v listView
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()+"?tab=stream"),
		chromedp.WaitVisible(`#chunks span[data-seq]`, chromedp.ByQuery),
		wait(`document.documentElement.dataset.live === "live"`),
		chromedp.Evaluate(streamView, &v),
	))
	require.Equal(t, listView{N: 200, First: 101, Last: 300, Count: "chunks 101–300 of 300", Prev: true}, v)
	atEnd := `(() => { const c = document.getElementById("chunks"); return c.scrollHeight - c.scrollTop - c.clientHeight < 24; })()`
	var end bool
	require.NoError(t, br.Run(chromedp.Evaluate(atEnd, &end)))
	require.True(t, end, "the latest page opens at its end")

	ctx := context.Background()
	publish := func(from, to int64) {
		for at := from; at <= to; at += 50 {
			chunks := chunkRange(run.ID, at, min(at+49, to))
			require.NoError(t, b.store.ChunkInsert(ctx, chunks))
			b.hub.PublishChunks(run.ID, chunks)
		}
	}
	publish(301, 800)
	require.NoError(t, br.Run(
		wait(`[...document.querySelectorAll("#chunks span[data-seq]")].some(s => s.dataset.seq === "800")`),
		chromedp.Evaluate(streamView, &v),
		chromedp.Evaluate(atEnd, &end),
	))
	require.Equal(t, listView{N: 600, First: 201, Last: 800, Count: "chunks 201–800 of 800", Prev: true}, v,
		"following, the stream keeps its newest 600 chunks")
	require.True(t, end, "and follows them")

	// Scrolled up, at its cap: it stays put and counts what comes.
	require.NoError(t, br.Run(chromedp.Evaluate(`(() => { const c = document.getElementById("chunks"); c.scrollTop = 0; c.dispatchEvent(new Event("scroll")); return true; })()`, nil)))
	publish(801, 820)
	var button string
	var top float64
	require.NoError(t, br.Run(
		wait(`document.querySelector('[data-testid="new-chunks"]').textContent === "↓ 20 new chunks"`),
		textOf(`[data-testid="new-chunks"]`, &button),
		chromedp.Evaluate(streamView, &v),
		chromedp.Evaluate(`document.getElementById("chunks").scrollTop`, &top),
	))
	require.Zero(t, top, "scrolled up, the stream stays where the reader is")
	require.Equal(t, listView{N: 600, First: 201, Last: 800, Count: "chunks 201–800 of 820", Prev: true, Next: true}, v)

	// The button goes to the end and follows again.
	require.NoError(t, br.Run(
		browsertest.Click(`[data-testid="new-chunks"]`),
		wait(`document.querySelector('[data-testid="new-chunks"]').hidden`),
		chromedp.Evaluate(streamView, &v),
	))
	require.Equal(t, 820, v.Last)
	require.LessOrEqual(t, v.N, 600)
	publish(821, 830)
	require.NoError(t, br.Run(
		wait(`[...document.querySelectorAll("#chunks span[data-seq]")].some(s => s.dataset.seq === "830")`),
		chromedp.Evaluate(atEnd, &end),
		chromedp.Evaluate(streamView, &v),
	))
	require.True(t, end, "following again")
	require.Equal(t, "chunks "+strconv.Itoa(830-v.N+1)+"–830 of 830", v.Count)
	require.Empty(t, br.Problems())
}

// TestBrowserConversationKeepsLoadedPagesAsTheRunGoes: while a run goes, its conversation tab
// reloads with each new message, reading its last page shown again: the pages the reader loaded
// stay, and the count and the link to the newest page follow.
func TestBrowserConversationKeepsLoadedPagesAsTheRunGoes(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true, noRuns: true})
	run := longRun(t, b, 0)
	br := browsertest.New(t)
	var v listView
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()+"?tab=conversation&page=6"),
		chromedp.WaitVisible(`#conversation li.msg`, chromedp.ByQuery),
		wait(`document.documentElement.dataset.live === "live"`),
		chromedp.Evaluate(`document.querySelector('#conversation a[data-pager-link="prev"]').click(); true`, nil),
		wait(`document.querySelectorAll("#conversation li.msg").length === 100`),
		chromedp.Evaluate(conversationView, &v),
	))
	require.Equal(t, listView{N: 100, First: 200, Last: 299, Count: "messages 201–300 of 300", Prev: true}, v)

	ctx := context.Background()
	require.NoError(t, b.store.MessagePut(ctx, run.ID, 300, 100, "user", json.RawMessage(`{"role":"user","content":[{"text":"one more"}]}`)))
	b.hub.Publish(run.ID, event.RunMessageData{Seq: 300, Turn: 100, Role: "user"})
	require.NoError(t, br.Run(
		wait(`document.querySelector("#conversation [data-pager-count]").textContent.includes("of 301")`),
		chromedp.Evaluate(conversationView, &v),
	))
	require.Equal(t, listView{N: 100, First: 200, Last: 299, Count: "messages 201–300 of 301", Prev: true, Next: true}, v,
		"the pages loaded stay; the new message is on the next page")
	require.NoError(t, br.Run(
		chromedp.Evaluate(`document.querySelector('#conversation a[data-pager-link="next"]').click(); true`, nil),
		wait(`[...document.querySelectorAll("#conversation li.msg")].at(-1)?.dataset.seq === "300"`),
		chromedp.Evaluate(conversationView, &v),
	))
	require.Equal(t, listView{N: 101, First: 200, Last: 300, Count: "messages 201–301 of 301", Prev: true}, v)
	require.Empty(t, br.Problems())
}

// TestRunPageForkMenuListsAFewCallsOrAsksForOne: the fork menu, on every tab, offers a turn per
// model message and lists the run's tool calls to edit the output of, without reading the
// history or the ledger; a run with more calls than it lists asks for the call as turn/ref.
func TestRunPageForkMenuListsAFewCallsOrAsksForOne(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	fork := func(calls int) string {
		t.Helper()
		run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/long", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		_, err = b.store.RunCancel(ctx, run.ID)
		require.NoError(t, err)
		for seq, role := range []string{"user", "model", "tool", "model"} {
			require.NoError(t, b.store.MessagePut(ctx, run.ID, seq, seq/2, role, json.RawMessage(`{"role":"`+role+`","content":[{"text":"x"}]}`)))
		}
		for i := range calls {
			_, _, err := b.store.ToolCallStart(ctx, store.Fence{}, store.ToolCallStartParams{RunID: run.ID, Turn: i / 10,
				Ref: fmt.Sprintf("r%03d", i), Tool: "search", Input: json.RawMessage(`{}`), IdempotencyKey: strconv.Itoa(i)})
			require.NoError(t, err)
		}
		resp, body := get(t, b.url+"/runs/"+run.ID.String()+"?tab=lineage", "Accept", "text/html")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		start := strings.Index(body, `data-testid="replay-fork"`)
		require.GreaterOrEqual(t, start, 0, "a fork form")
		form, _, ok := strings.Cut(body[start:], "</form>")
		require.True(t, ok, "the fork form ends")
		return form
	}
	form := fork(3)
	require.Len(t, regexp.MustCompile(`<option value="\d+">`).FindAllString(form, -1), 2, "turns 0 and 1: one a model message")
	require.Contains(t, form, `<select name="edit_call">`)
	require.Contains(t, form, `<option value="0/r002">search (ref r002, turn 0)</option>`)

	form = fork(forkCallsListed + 1)
	require.NotContains(t, form, `<select name="edit_call">`)
	require.Contains(t, form, `<input type="text" name="edit_call"`)
	require.Contains(t, form, "the ledger lists the run's 201 calls")
}
