package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// textOf reads an element's text in one script evaluation: the live script swaps whole sections,
// so a node chromedp.Text had resolved may be gone by the time it reads it.
func textOf(selector string, dst *string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q)?.innerText ?? ""`, selector), dst)
}

func newTraceID() string { return strings.ReplaceAll(uuid.NewString(), "-", "") }

// sendGenkit posts one Genkit TraceData body.
func (b *bundle) sendGenkit(t *testing.T, body []byte) {
	t.Helper()
	resp, out := post(t, b.url+"/api/traces", "application/json", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
}

// waitSpans waits until the trace has n spans stored (span starts are written a moment late).
func (b *bundle) waitSpans(t *testing.T, traceID string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		facts, err := b.store.SpanTurnFactsByTrace(context.Background(), traceID)
		require.NoError(t, err)
		return len(facts) == n
	}, 10*time.Second, 20*time.Millisecond)
}

// TestBrowserTracePageUpdatesLive opens the page of a trace whose root is still running while
// another program sends its spans: new spans appear in the tree, running spans finish, the header's
// count and running badge follow, all without a reload, and the node the user expanded and the span
// they selected stay so.
func TestBrowserTracePageUpdatesLive(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true, noRuns: true})
	traceID := newTraceID()
	const root, a, a1, c2, c3, c4 = "a000000000000001", "b000000000000001", "b100000000000001", "c000000000000002", "c000000000000003", "c000000000000004"
	t0 := float64(time.Now().Add(-time.Minute).UnixMilli())
	attrs := func(name, typ string) map[string]any {
		return map[string]any{"genkit:name": name, "genkit:type": typ}
	}
	b.sendGenkit(t, jsSpanBody(traceID, root, "", "liveFlow", t0, 0, attrs("liveFlow", "flow"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, a, root, "stepA", t0+1, t0+5, attrs("stepA", "action"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, a1, a, "stepA1", t0+2, t0+3, attrs("stepA1", "action"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, c2, root, "step2", t0+6, 0, attrs("step2", "action"), 0))
	b.waitSpans(t, traceID, 4)

	br := browsertest.New(t)
	row := func(id string) string { return fmt.Sprintf(`document.getElementById("span-%s")`, id) }
	var before string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/traces/"+traceID),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`document.querySelectorAll(".span-row").length === 3`), // the root, A (collapsed) and 2
		textOf(`#trace .trace-head`, &before),
		wait(row(root)+`.classList.contains("running") && `+row(c2)+`.classList.contains("running")`),
		wait(`!!document.querySelector("#trace .trace-head .badge.running")`),
		// The user opens A and selects 2.
		chromedp.Evaluate(row(a)+`.querySelector("[data-toggle]").click(); true`, nil),
		wait(`!!`+row(a1)),
		chromedp.Evaluate(row(c2)+`.querySelector("[data-select]").click(); true`, nil),
		wait(`document.querySelector("#span-detail .span-panel")?.dataset.span === "`+c2+`"`),
		chromedp.Evaluate(`window.marker = 1`, nil),
	))
	require.Contains(t, before, "4 spans")

	b.sendGenkit(t, jsSpanBody(traceID, c2, root, "step2", t0+6, t0+9, attrs("step2", "action"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, c3, root, "step3", t0+10, t0+11, attrs("step3", "action"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, c4, root, "step4", t0+12, t0+13, attrs("step4", "action"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, root, "", "liveFlow", t0, t0+20, attrs("liveFlow", "flow"), 0))

	var head string
	require.NoError(t, br.Run(
		wait(`!!`+row(c3)+` && !!`+row(c4)),
		wait(`document.querySelector("#trace .span-count")?.textContent === "6 spans"`),
		wait(`!document.querySelector(".span-row.running") && !document.querySelector("#trace .trace-head .badge.running")`),
		wait(`!document.querySelector("#span-detail .badge.running")`), // the selected span's panel finished too
		textOf(`#trace .trace-head`, &head),
	))
	require.NotContains(t, head, "running")
	var marker int
	var expanded, selected, panel, title string
	var rows int
	require.NoError(t, br.Run(
		chromedp.Evaluate(`window.marker ?? 0`, &marker),
		chromedp.Evaluate(row(a)+`.getAttribute("aria-expanded")`, &expanded),
		chromedp.Evaluate(`document.querySelector(".span-row.selected")?.dataset.span ?? ""`, &selected),
		chromedp.Evaluate(`document.querySelector("#span-detail .span-panel")?.dataset.span ?? ""`, &panel),
		chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &rows),
		textOf(`#trace-title`, &title),
	))
	require.Equal(t, 1, marker, "the page was not reloaded")
	require.Equal(t, "true", expanded, "the node the user opened stays open")
	require.Equal(t, c2, selected, "the selected span stays selected")
	require.Equal(t, c2, panel)
	require.Equal(t, 6, rows)
	require.Equal(t, "liveFlow", title)
	require.Empty(t, br.Problems())
}

// TestBrowserTracePageThrottlesBursts sends 2,000 spans to a trace whose page is open: the page
// ends up showing them all after a handful of reloads, not one per span.
func TestBrowserTracePageThrottlesBursts(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true, noRuns: true})
	traceID := newTraceID()
	const root = "a000000000000001"
	t0 := float64(time.Now().Add(-time.Minute).UnixMilli())
	b.sendGenkit(t, jsSpanBody(traceID, root, "", "burst", t0, 0, map[string]any{"genkit:name": "burst"}, 0))
	b.waitSpans(t, traceID, 1)

	br := browsertest.New(t)
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/traces/"+traceID),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`document.querySelector("#trace .span-count")?.textContent === "1 span"`),
		chromedp.Sleep(300*time.Millisecond), // the reload after subscribing
		chromedp.Evaluate(`window.reloads = 0; const f = window.fetch; window.fetch = (u, o) => { if (String(u).includes("/tree")) window.reloads++; return f(u, o); }; true`, nil),
	))
	for batch := range 40 {
		spans := map[string]any{}
		for i := range 50 {
			id := fmt.Sprintf("c%015x", batch*50+i+1)
			start := t0 + float64(batch*50+i)
			spans[id] = map[string]any{"spanId": id, "traceId": traceID, "parentSpanId": root, "startTime": start, "endTime": start + 0.5,
				"displayName": fmt.Sprintf("s%d", batch*50+i), "attributes": map[string]any{}, "links": []any{},
				"instrumentationLibrary": map[string]any{"name": "genkit-tracer", "version": "v1"}, "spanKind": "INTERNAL",
				"status": map[string]any{"code": 0}, "timeEvents": map[string]any{"timeEvent": []any{}}}
		}
		body, err := json.Marshal(map[string]any{"traceId": traceID, "spans": spans})
		require.NoError(t, err)
		b.sendGenkit(t, body)
	}
	b.sendGenkit(t, jsSpanBody(traceID, root, "", "burst", t0, t0+3000, map[string]any{"genkit:name": "burst"}, 0))
	var reloads int
	require.NoError(t, br.Run(
		wait(`document.querySelector("#trace .span-count")?.textContent === "2001 spans" && !document.querySelector(".span-row.running")`),
		chromedp.Sleep(2*time.Second), // the settle reload, and nothing after it
		chromedp.Evaluate(`window.reloads`, &reloads),
	))
	require.GreaterOrEqual(t, reloads, 1)
	require.LessOrEqual(t, reloads, 25, "2,000 span events make a handful of reloads")
	var rows int
	require.NoError(t, br.Run(chromedp.Evaluate(`document.querySelectorAll(".span-row").length`, &rows)))
	require.Equal(t, 1+200+1, rows, "the root, a page of children and a more row")
	require.Empty(t, br.Problems())
}

// TestBrowserRunStreamRendersParts checks the run page's stream: a model's chunks, arrays of parts,
// read as running text, and other parts show compactly; a flow's own chunks stay JSON.
func TestBrowserRunStreamRendersParts(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true})
	run := b.startRun(t, "/flow/researchAgent", `{"topic":"x","depth":1}`, store.RunSucceeded)
	br := browsertest.New(t)
	var text string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()+"?tab=stream"),
		wait(`document.querySelectorAll("#chunks span[data-seq]").length > 5`),
		chromedp.Sleep(200*time.Millisecond),
		textOf(`#chunks`, &text),
	))
	require.Contains(t, text, `Summary of "x" after 1 rounds and 6 searches: the evidence converges.`, "the words read as running text")
	require.NotContains(t, text, `{"text"`)
	require.NotContains(t, text, `[{`)

	// Every kind of part, stored directly.
	ctx := context.Background()
	other, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/parts", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	chunk := func(seq int64, content string) store.RunChunk {
		return store.RunChunk{RunID: other.ID, Seq: seq, Turn: 0, Index: 1, Role: "model", Content: json.RawMessage(content)}
	}
	require.NoError(t, b.store.ChunkInsert(ctx, []store.RunChunk{
		chunk(1, `[{"text":"You're "}]`),
		chunk(2, `[{"text":"booked "},{"text":"to Lisbon."}]`),
		chunk(3, `[{"reasoning":"thinking it over"}]`),
		chunk(4, `[{"toolRequest":{"name":"search","ref":"r1","input":{"q":"flights"}}}]`),
		chunk(5, `[{"media":{"url":"https://example.com/a.png","contentType":"image/png"}}]`),
		chunk(6, `{"content":[{"text":" Done."}]}`),
		{RunID: other.ID, Seq: 7, Turn: 0, Index: 2, Role: "flow", Content: json.RawMessage(`{"n":3}`)},
	}))
	var model, req, media, reasoning, flow string
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+other.ID.String()+"?tab=stream"),
		wait(`document.querySelectorAll("#chunks span[data-seq]").length === 7`),
		chromedp.Evaluate(`[...document.querySelector('.chunk-group[data-key="0:1:model"] .chunk-body').childNodes].map(n => n.dataset.seq === "3" || n.dataset.seq === "4" || n.dataset.seq === "5" ? "|" : n.textContent).join("")`, &model),
		textOf(`.part-tool-request`, &req),
		textOf(`.part-media`, &media),
		textOf(`.part-reasoning`, &reasoning),
		textOf(`.chunk-group[data-key="0:2:flow"] .chunk-body`, &flow),
	))
	require.Equal(t, "You're booked to Lisbon.||| Done.", model)
	require.Equal(t, `→ search({"q":"flights"})`, req)
	require.Equal(t, `[media image/png] https://example.com/a.png`, media)
	require.Equal(t, "thinking it over", reasoning)
	require.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} \{"n":3\}$`, strings.TrimSpace(flow), "a flow's chunk is its value, after its time")
	require.Empty(t, br.Problems())
}

// TestBrowserRunTraceKeepsUpdatingAfterClicks opens a run whose trace is still arriving, expands a
// node and selects a span, then lets the rest of the trace arrive: the tree keeps following it, with
// the node still open and the span still selected.
func TestBrowserRunTraceKeepsUpdatingAfterClicks(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true, noRuns: true})
	ctx := context.Background()
	run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/slow", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	traceID := newTraceID()
	now := time.Now().Add(-time.Minute).UnixNano()
	attrs := json.RawMessage(fmt.Sprintf(`{%q:%q}`, trace.AttrRunID, run.ID))
	sp := func(id, parent, name string, start, end int64) store.Span {
		s := store.Span{TraceID: traceID, SpanID: id, Name: name, StartTime: now + start, EndTime: 0, Attributes: attrs,
			Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{}`), Source: store.SpanSourceOTLP, RunID: &run.ID}
		if end > 0 {
			s.EndTime = now + end
		}
		if parent != "" {
			s.ParentSpanID = &parent
		}
		return s
	}
	const root, a, a1, bb, c = "a000000000000001", "b000000000000001", "b100000000000001", "b000000000000002", "b000000000000003"
	_, err = b.traces.Ingest(ctx, store.SpanSourceOTLP, []store.Span{
		sp(root, "", "flow", 0, 0), sp(a, root, "stepA", 1, 5), sp(a1, a, "stepA1", 2, 3), sp(bb, root, "stepB", 6, 8),
	})
	require.NoError(t, err)
	b.waitSpans(t, traceID, 4)

	br := browsertest.New(t)
	row := func(id string) string { return fmt.Sprintf(`document.getElementById("span-%s")`, id) }
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`document.querySelectorAll(".span-row").length === 3`),
		chromedp.Evaluate(row(a)+`.querySelector("[data-toggle]").click(); true`, nil),
		wait(`!!`+row(a1)),
		chromedp.Evaluate(row(bb)+`.querySelector("[data-select]").click(); true`, nil),
		wait(`document.querySelector("#span-detail .span-panel")?.dataset.span === "`+bb+`"`),
		chromedp.Evaluate(`window.marker = 1`, nil),
	))

	_, err = b.traces.Ingest(ctx, store.SpanSourceOTLP, []store.Span{sp(c, root, "stepC", 9, 10), sp(root, "", "flow", 0, 12)})
	require.NoError(t, err)
	var marker int
	var expanded, selected string
	require.NoError(t, br.Run(
		wait(`!!`+row(c)+` && !document.querySelector(".span-row.running")`),
		wait(`document.querySelector("#trace .span-count")?.textContent === "5 spans"`),
		chromedp.Evaluate(`window.marker ?? 0`, &marker),
		chromedp.Evaluate(row(a)+`.getAttribute("aria-expanded")`, &expanded),
		chromedp.Evaluate(`document.querySelector(".span-row.selected")?.dataset.span ?? ""`, &selected),
	))
	require.Equal(t, 1, marker)
	require.Equal(t, "true", expanded)
	require.Equal(t, bb, selected)
	require.Empty(t, br.Problems())
}

// TestBrowserCancelRunAsksFirst clicks "Cancel run": dismissing the confirmation leaves the run
// running; accepting it cancels the run.
func TestBrowserCancelRunAsksFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true})
	run := b.startRun(t, "/flow/countdown", `{"from":1000}`, store.RunRunning)
	br := browsertest.New(t)
	var accept atomic.Bool
	dialogs := make(chan string, 4)
	chromedp.ListenTarget(br.Ctx, func(ev any) {
		if e, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs <- e.Message
			go func() { _ = chromedp.Run(br.Ctx, page.HandleJavaScriptDialog(accept.Load())) }()
		}
	})
	runPath := "/runs/" + run.ID.String()
	cancelBtn := `form[action$="/cancel"] button[type=submit]`
	require.NoError(t, br.Run(
		chromedp.Navigate(b.url+runPath),
		chromedp.WaitVisible(cancelBtn, chromedp.ByQuery),
		browsertest.Click(cancelBtn),
	))
	select {
	case msg := <-dialogs:
		require.Equal(t, "Cancel this run?", msg)
	case <-time.After(5 * time.Second):
		t.Fatal("no confirmation was asked")
	}
	time.Sleep(500 * time.Millisecond)
	var path string
	require.NoError(t, br.Run(chromedp.Evaluate(`location.pathname`, &path)))
	require.Equal(t, runPath, path)
	got, err := b.store.RunGet(context.Background(), run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, got.Status, "dismissing the dialog does not cancel")

	accept.Store(true)
	require.NoError(t, br.Run(browsertest.Click(cancelBtn)))
	require.Equal(t, "Cancel this run?", <-dialogs)
	require.Eventually(t, func() bool {
		got, err := b.store.RunGet(context.Background(), run.ID)
		require.NoError(t, err)
		return got.Status == store.RunCancelled
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, br.Run(chromedp.WaitVisible(`.run-header[data-status="cancelled"]`, chromedp.ByQuery)))
	require.Empty(t, br.Problems())
}

// TestTracePagesWording checks the small print: a filtered list that matches nothing says so (and
// offers to clear the filters), one span is "1 span", an orphan span is marked, and the run header
// has a space between the time and who started it.
func TestTracePagesWording(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	_, body := get(t, b.url+"/traces")
	require.Contains(t, body, "No traces yet")
	_, body = get(t, b.url+"/traces?q=nothing-like-this")
	require.Contains(t, body, "No traces match")
	require.Contains(t, body, `<a href="/traces">Clear filters</a>`)
	require.NotContains(t, body, "No traces yet")
	_, body = get(t, b.url+"/traces?source=otlp")
	require.Contains(t, body, "No traces match")

	one, orphans := newTraceID(), newTraceID()
	now := time.Now().UnixNano()
	sp := func(traceID, id, parent string) store.Span {
		s := store.Span{TraceID: traceID, SpanID: id, Name: "n" + id[:4], StartTime: now, EndTime: now + 1e6,
			Attributes: json.RawMessage(`{}`), Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{}`), Source: store.SpanSourceOTLP}
		if parent != "" {
			s.ParentSpanID = &parent
		}
		return s
	}
	_, err := b.store.SpanIngest(ctx, []store.Span{
		sp(one, "a000000000000001", ""),
		sp(orphans, "a000000000000002", ""),
		sp(orphans, "a000000000000003", "a000000000000002"),
		sp(orphans, "a000000000000004", "ffffffffffffffff"), // its parent never arrived
	})
	require.NoError(t, err)
	_, body = get(t, b.url+"/traces/"+one)
	require.Contains(t, body, `>1 span</span>`)
	require.NotContains(t, body, "1 spans")
	require.NotContains(t, body, "parent missing")
	_, body = get(t, b.url+"/traces/"+orphans)
	require.Contains(t, body, `>3 spans</span>`)
	require.Equal(t, 1, strings.Count(body, ">parent missing<"), "only the orphan is marked")
	require.Contains(t, body, `data-orphan="ffffffffffffffff"`)
	_, body = get(t, b.url+"/traces/"+orphans+"/tree?open=")
	require.Equal(t, 1, strings.Count(body, ">parent missing<"), "the live fragment marks it too")

	run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/x", Input: json.RawMessage(`{}`), CreatedBy: "alice"})
	require.NoError(t, err)
	_, body = get(t, b.url+"/runs/"+run.ID.String())
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(body, "")
	require.Regexp(t, `\d\d:\d\d:\d\d UTC by alice`, text, "the time and its author apart")
}

// TestTraceFragmentsKeepTheTreeState checks the fragments the live script reloads: the nodes it
// says were open stay open, a collapsed root stays collapsed, and the selected span's ancestors
// are not reopened behind the user's back.
func TestTraceFragmentsKeepTheTreeState(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	traceID := newTraceID()
	now := time.Now().UnixNano()
	sp := func(id, parent string, start int64) store.Span {
		s := store.Span{TraceID: traceID, SpanID: id, Name: "n" + id, StartTime: now + start, EndTime: now + start + 1e6,
			Attributes: json.RawMessage(`{}`), Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{}`), Source: store.SpanSourceOTLP}
		if parent != "" {
			s.ParentSpanID = &parent
		}
		return s
	}
	const root, a, a1, bb, b1 = "a000000000000001", "b000000000000001", "b100000000000001", "b000000000000002", "b200000000000001"
	_, err := b.store.SpanIngest(ctx, []store.Span{sp(root, "", 0), sp(a, root, 1), sp(a1, a, 2), sp(bb, root, 3), sp(b1, bb, 4)})
	require.NoError(t, err)
	rowIDs := func(body string) []string {
		var out []string
		for _, part := range strings.Split(body, `id="span-`)[1:] {
			if id, _, _ := strings.Cut(part, `"`); id != "detail" {
				out = append(out, id)
			}
		}
		return out
	}
	_, body := get(t, b.url+"/traces/"+traceID+"/tree")
	require.Equal(t, []string{root, a, bb}, rowIDs(body), "by default the roots are open")
	_, body = get(t, b.url+"/traces/"+traceID+"/tree?open="+bb)
	require.Equal(t, []string{root, a, bb, b1}, rowIDs(body))
	_, body = get(t, b.url+"/traces/"+traceID+"/tree?open=&closed="+root)
	require.Equal(t, []string{root}, rowIDs(body), "a collapsed root stays collapsed")
	_, body = get(t, b.url+"/traces/"+traceID+"/tree?span="+a1)
	require.Contains(t, body, `id="span-`+a1+`"`, "without a state, a deep link opens the span's ancestors")
	_, body = get(t, b.url+"/traces/"+traceID+"/tree?span="+a1+"&open=")
	require.NotContains(t, body, `id="span-`+a1+`"`, "with a state, the user's collapsed node stays collapsed")
	require.Contains(t, body, `class="span-panel" data-span="`+a1+`"`, "and the span stays selected")
}

// TestTracePageShowsTheTurnSummary: a trace of generate turns shows each turn's model, tokens, tool
// calls and own time above the tree, each turn linking to its span, and a link to its run.
func TestTracePageShowsTheTurnSummary(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	traceID := newTraceID()
	now := time.Now().UnixNano()
	root, gen0, gen1 := "b000000000000001", "b000000000000002", "b000000000000003"
	sp := func(id, parent string, start, end int64, attrs string) store.Span {
		s := store.Span{TraceID: traceID, SpanID: id, Name: "n" + id[12:], StartTime: now + start, EndTime: now + end,
			Attributes: json.RawMessage(attrs), Source: store.SpanSourceOTLP}
		if parent != "" {
			s.ParentSpanID = &parent
		}
		return s
	}
	turn := func(i int) string {
		return fmt.Sprintf(`{"genkit:name":"generate","genkit:type":"util","loupe.turn.index":%d,"gen_ai.operation.name":"invoke_agent"}`, i)
	}
	model := func(i, in, out int) string {
		return fmt.Sprintf(`{"genkit:type":"action","genkit:metadata:subtype":"model","loupe.turn.index":%d,"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-test","gen_ai.usage.input_tokens":%d,"gen_ai.usage.output_tokens":%d}`, i, in, out)
	}
	_, err := b.store.SpanIngest(ctx, []store.Span{
		sp(root, "", 0, 100e6, `{"genkit:name":"agent","genkit:type":"action"}`),
		sp(gen0, root, 1e6, 99e6, turn(0)),
		sp("b000000000000004", gen0, 2e6, 10e6, model(0, 120, 30)),
		sp("b000000000000005", gen0, 10e6, 40e6, `{"genkit:type":"action","loupe.turn.index":0,"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":"getWeather"}`),
		sp(gen1, gen0, 41e6, 98e6, turn(1)),
		sp("b000000000000006", gen1, 42e6, 97e6, model(1, 200, 45)),
	})
	require.NoError(t, err)
	_, body := get(t, b.url+"/traces/"+traceID)
	require.Contains(t, body, "2 turns · 320 tokens in, 75 out")
	require.Contains(t, body, `<a href="/traces/`+traceID+`?span=`+gen1+`">1</a>`)
	require.Contains(t, body, "getWeather")
	require.Contains(t, body, ">gpt-test<")
	require.Contains(t, body, ">40ms<", "turn 0's own time ends where turn 1 starts")
	require.NotContains(t, body, "Open the run this trace records", "this trace records no run")
}
