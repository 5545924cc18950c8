package server

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// timelineView is what the run page's waterfall shows, read in the browser.
type timelineView struct {
	ViewportW, WaterfallW float64
	Ticks                 []string
	ViewStart, ViewEnd    float64
	Kinds                 []string
	Selfs                 int
	ResetHidden           bool
	Gaps                  []string
	GapW                  float64
	Bands                 int
	BarWidths             []float64 // on screen, px, of every bar
	ToolBarW              float64   // the first tool row's bar, px
	WaitW                 float64   // the interrupted tool's wait, px
	RulerL, RulerR        float64   // the ruler's left and right edge, px
	WfL, WfR              float64   // a row's waterfall's left and right edge, px
}

const readTimeline = `(() => {
	const ruler = document.querySelector('[data-testid="ruler"]');
	const rb = ruler.getBoundingClientRect();
	const wf = document.querySelector(".span-row .wf").getBoundingClientRect();
	const tool = [...document.querySelectorAll(".span-row")].find(r => r.querySelector(".wf.kind-tool"));
	const wait = tool?.querySelector(".wf rect.wait"); // the flow, which stopped on the interrupt, waits too
	const gap = document.querySelector('[data-testid="folded-gap"]:not([hidden])');
	return {
		ViewportW: innerWidth, WaterfallW: wf.width,
		Ticks: [...ruler.querySelectorAll(".ruler-tick")].map(t => t.textContent),
		ViewStart: Number(ruler.dataset.viewStart), ViewEnd: Number(ruler.dataset.viewEnd),
		Kinds: [...new Set([...document.querySelectorAll(".span-row .wf")].map(w => [...w.classList].find(c => c.startsWith("kind-"))))],
		Selfs: document.querySelectorAll(".span-row .dur .self").length,
		ResetHidden: document.querySelector("[data-zoom-reset]").hidden,
		Gaps: [...document.querySelectorAll('[data-testid="folded-gap"]')].map(g => g.textContent.trim()),
		GapW: gap ? gap.getBoundingClientRect().width : 0,
		Bands: document.querySelectorAll(".gap-band").length,
		BarWidths: [...document.querySelectorAll(".span-row .wf rect.bar")].map(r => r.getBoundingClientRect().width),
		ToolBarW: tool ? tool.querySelector("rect.bar").getBoundingClientRect().width : 0,
		WaitW: wait ? wait.getBoundingClientRect().width : 0,
		RulerL: rb.left, RulerR: rb.right, WfL: wf.left, WfR: wf.right,
	};
})()`

// TestBrowserTimelineRulerZoomAndKinds: the research run's waterfall takes most of a 1440-px
// page, lined up under a time ruler with ticks; bars are coloured by kind (flow, turn, model, tool
// each its own class); a span with spans inside shows its own time beside its total, and a turn's
// bar is solid only up to the next turn nested in it; a double-click
// on a tool's bar zooms the ruler to that span (its bar then fills most of the waterfall), a drag
// across the ruler zooms to the range dragged, and "reset zoom" shows the whole trace again.
func TestBrowserTimelineRulerZoomAndKinds(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/researchAgent", `{"topic":"timelines","depth":3}`, store.RunSucceeded)
	b.flushSpans(t, run.ID, 15)
	br := browsertest.New(t)

	var v timelineView
	turn1 := `[...document.querySelectorAll(".span-row")].find(r => r.querySelector(".span-label")?.textContent === "turn 1")`
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.EmulateViewport(1440, 900),
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()),
		wait(`!!document.querySelector('[data-testid="ruler"] .ruler-tick')`),
		chromedp.Evaluate(turn1+`.querySelector("[data-toggle]").click(); true`, nil),
		wait(`!!document.querySelector(".span-row .wf.kind-tool") && !!document.querySelector(".span-row .wf.kind-model")`),
		chromedp.Evaluate(readTimeline, &v),
	))
	// A tick every 90 to 225 px (the step is the next 1, 2 or 5 above 90 px' worth of time), none in
	// the last 30 px: a ruler over 540 px wide has at least three, 0 among them, whatever the run's
	// length (a 140 ms run under load had exactly 0, 50ms and 100ms).
	require.GreaterOrEqual(t, len(v.Ticks), 3, "the ruler has ticks: %v", v.Ticks)
	require.Equal(t, "0", v.Ticks[0])
	require.Greater(t, v.WaterfallW, 0.38*v.ViewportW, "the waterfall is as wide as the page allows, not 250 px")
	require.InDelta(t, v.WfL, v.RulerL, 2, "the ruler starts where the bars do")
	require.InDelta(t, v.WfR, v.RulerR, 2, "and ends where they do")
	require.Subset(t, v.Kinds, []string{"kind-flow", "kind-turn", "kind-model", "kind-tool"}, "bars coloured by kind: %v", v.Kinds)
	require.Positive(t, v.Selfs, "spans with spans inside show their own time")
	var tails int
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Evaluate(`document.querySelectorAll(".span-row .wf.kind-turn rect.tail").length`, &tails)))
	require.Positive(t, tails, "a turn Genkit nested the next turn in is solid only up to it")
	require.True(t, v.ResetHidden, "nothing to reset yet")
	require.Zero(t, v.ViewStart)
	full := v.ViewEnd - v.ViewStart
	toolBefore := v.ToolBarW

	// Double-click a tool's bar: the view is that span.
	require.NoError(t, chromedp.Run(br.Ctx,
		dblclick(`.span-row .wf.kind-tool`),
		wait(`document.querySelector(".timeline").dataset.zoomed === "true"`),
		chromedp.Evaluate(readTimeline, &v),
	))
	require.False(t, v.ResetHidden, "reset zoom is offered")
	require.Less(t, v.ViewEnd-v.ViewStart, full/2, "the ruler shows the span's time only")
	require.Greater(t, v.ToolBarW, 0.8*v.WaterfallW, "the span fills the waterfall")
	require.Greater(t, v.ToolBarW, toolBefore)
	require.GreaterOrEqual(t, len(v.Ticks), 2, "ticks at the zoomed scale: %v", v.Ticks)

	// Reset, then drag across the middle of the ruler.
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`[data-zoom-reset]`),
		wait(`document.querySelector(".timeline").dataset.zoomed === "false"`),
		chromedp.Evaluate(readTimeline, &v),
	))
	require.InDelta(t, full, v.ViewEnd-v.ViewStart, 1, "reset shows the whole trace")
	y := 0.0
	var ry float64
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Evaluate(`(() => { const r = document.querySelector('[data-testid="ruler"]').getBoundingClientRect(); return r.top + r.height - 4; })()`, &ry)))
	y = ry
	x0 := v.RulerL + (v.RulerR-v.RulerL)*0.25
	x1 := v.RulerL + (v.RulerR-v.RulerL)*0.5
	require.NoError(t, chromedp.Run(br.Ctx,
		input.DispatchMouseEvent(input.MousePressed, x0, y).WithButton(input.Left).WithButtons(1).WithClickCount(1),
		input.DispatchMouseEvent(input.MouseMoved, (x0+x1)/2, y).WithButton(input.Left).WithButtons(1),
		input.DispatchMouseEvent(input.MouseMoved, x1, y).WithButton(input.Left).WithButtons(1),
		input.DispatchMouseEvent(input.MouseReleased, x1, y).WithButton(input.Left).WithButtons(0).WithClickCount(1),
		wait(`document.querySelector(".timeline").dataset.zoomed === "true"`),
		chromedp.Evaluate(readTimeline, &v),
	))
	require.InDelta(t, full*0.25, v.ViewStart, full*0.02, "the view starts where the drag did")
	require.InDelta(t, full*0.25, v.ViewEnd-v.ViewStart, full*0.02, "and spans what was dragged")
	require.NotEqual(t, "0", v.Ticks[0], "the ruler's ticks follow the zoom")

	// Select the tool and zoom to it with the button; Z on its row shows the whole trace again.
	tool := `[...document.querySelectorAll(".span-row")].find(r => r.querySelector(".wf.kind-tool"))`
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`[data-zoom-reset]`),
		wait(`document.querySelector(".timeline").dataset.zoomed === "false"`),
		chromedp.Evaluate(tool+`.querySelector("[data-select]").click(); true`, nil),
		wait(`!!document.querySelector(".span-row.selected")`),
		browsertest.Click(`[data-zoom-selected]`),
		wait(`document.querySelector(".timeline").dataset.zoomed === "true"`),
		chromedp.Evaluate(readTimeline, &v),
	))
	require.Greater(t, v.ToolBarW, 0.8*v.WaterfallW, "zoom to span: the selected span fills the waterfall")
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Evaluate(tool+`.querySelector("[data-select]").focus(); true`, nil),
		chromedp.KeyEvent("Z"),
		wait(`document.querySelector(".timeline").dataset.zoomed === "false"`),
	))
	require.Empty(t, br.Problems())
}

// TestBrowserTimelineFoldsReviewerWait: a travel run interrupted for a flight booking waits for a
// reviewer, who approves it 17 s later (the resumed execution's stored times are moved 17 s on);
// the waterfall folds the wait to a marked gap on the ruler labelled "waited 17 s for a reviewer",
// banded across the bars, and the interrupted tool's wait runs to it: the work before and after it
// keeps wide bars instead of 1-px slivers, and the trace is drawn as it was, only folded.
func TestBrowserTimelineFoldsReviewerWait(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	run := b.startRun(t, "/flow/travelAgent", `{"destination":"Porto"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)
	b.flushSpans(t, run.ID, 3)
	cut := time.Now().UnixNano()
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	b.waitStatus(t, run.ID, store.RunSucceeded)
	b.flushSpans(t, run.ID, 6)
	got, err := b.store.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.NotNil(t, got.TraceID)
	shiftSpansAfter(t, b, *got.TraceID, cut, 17*time.Second)

	br := browsertest.New(t)
	var v timelineView
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.EmulateViewport(1440, 900),
		chromedp.Navigate(b.url+"/runs/"+run.ID.String()+"?tool="+it.Tool+"&turn="+strconv.Itoa(it.Turn)),
		wait(`!!document.querySelector('[data-testid="folded-gap"]')`),
		wait(`document.querySelectorAll(".gap-band").length > 0 && !!document.querySelector(".span-row .wf rect.wait")`),
		chromedp.Evaluate(readTimeline, &v),
	))
	require.Len(t, v.Gaps, 1, "one folded gap: %v", v.Gaps)
	m := regexp.MustCompile(`^waited (\d+) s for a reviewer$`).FindStringSubmatch(v.Gaps[0])
	require.NotNil(t, m, v.Gaps[0])
	secs, _ := strconv.Atoi(m[1])
	require.True(t, secs >= 17 && secs < 60, "17 s and the real wait (the resume's pick-up): %s", v.Gaps[0])
	require.Positive(t, v.Bands, "the gap is marked across the bars")
	require.Greater(t, v.GapW, 10.0, "the gap has a fixed width")
	require.Less(t, v.GapW, 0.1*v.WaterfallW, "a narrow one: the wait is folded, not drawn to scale")
	require.Greater(t, v.WaitW, v.GapW, "the interrupted tool's wait runs to the end of the gap")
	wide := 0
	for _, w := range v.BarWidths {
		if w > 20 {
			wide++
		}
	}
	require.GreaterOrEqual(t, wide, 3, "the work around the wait has wide bars, not slivers: %v", v.BarWidths)
	var tickAfter bool
	require.NoError(t, chromedp.Run(br.Ctx, chromedp.Evaluate(`[...document.querySelectorAll(".ruler-tick")].some(t => parseFloat(t.textContent) >= 17 && t.textContent.endsWith("s") && !t.textContent.endsWith("ms"))`, &tickAfter)))
	require.True(t, tickAfter, "the ruler reads the real time after the wait: %v", v.Ticks)

	// Zoomed to the gap, it is still a gap, now wide: the label stays.
	require.NoError(t, chromedp.Run(br.Ctx,
		dblclick(`.span-row .wf rect.wait`),
		wait(`document.querySelector(".timeline").dataset.zoomed === "true"`),
		chromedp.Evaluate(readTimeline, &v),
	))
	require.Greater(t, v.GapW, 40.0)
	require.Empty(t, br.Problems())
}

// shiftSpansAfter moves a trace's spans that started after cut on by d, as if the reviewer had
// taken that much longer to answer.
func shiftSpansAfter(t *testing.T, b *bundle, traceID string, cut int64, d time.Duration) {
	t.Helper()
	// The summary's last span start moves too: a trace's spans are read within its bounds.
	tag, err := b.store.Pool().Exec(context.Background(), `WITH moved AS (UPDATE spans
		SET start_time_unix_nano = start_time_unix_nano + $3,
		    end_time_unix_nano = CASE WHEN end_time_unix_nano = 0 THEN 0 ELSE end_time_unix_nano + $3 END
		WHERE trace_id = $1 AND start_time_unix_nano > $2 RETURNING start_time_unix_nano)
		UPDATE traces SET span_start_max_unix_nano = GREATEST(span_start_max_unix_nano, (SELECT max(start_time_unix_nano) FROM moved))
		WHERE trace_id = $1 AND EXISTS (SELECT 1 FROM moved)`, traceID, cut, int64(d))
	require.NoError(t, err)
	require.Positive(t, tag.RowsAffected())
}

// TestBrowserTimelineKeepsItsZoomWhileTheTraceGrows: zoomed to a span of a trace another program
// is still sending, the page keeps that view as new spans arrive and the axis grows (the ruler's
// range stays the span's, the new span's bar lies outside it), and "reset zoom" then shows the
// grown trace whole.
func TestBrowserTimelineKeepsItsZoomWhileTheTraceGrows(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true, noRuns: true})
	traceID := newTraceID()
	const root, a, c2, c3 = "a000000000000001", "b000000000000001", "c000000000000002", "c000000000000003"
	t0 := float64(time.Now().Add(-time.Minute).UnixMilli())
	attrs := func(name string) map[string]any { return map[string]any{"genkit:name": name, "genkit:type": "action"} }
	b.sendGenkit(t, jsSpanBody(traceID, root, "", "growing", t0, 0, attrs("growing"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, a, root, "stepA", t0+1, t0+5, attrs("stepA"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, c2, root, "step2", t0+6, t0+9, attrs("step2"), 0))
	b.waitSpans(t, traceID, 3)

	br := browsertest.New(t)
	var before, after struct{ Start, End, Len float64 }
	read := `(() => { const r = document.querySelector('[data-testid="ruler"]'); return { Start: Number(r.dataset.viewStart), End: Number(r.dataset.viewEnd), Len: JSON.parse(document.querySelector(".timeline-head").dataset.timeline).len }; })()`
	require.NoError(t, br.Run(
		chromedp.EmulateViewport(1440, 900),
		chromedp.Navigate(b.url+"/traces/"+traceID),
		wait(`document.documentElement.dataset.live === "live"`),
		wait(`!!document.querySelector("#span-`+a+` .wf rect.bar")`),
		dblclick(`#span-`+a+` .wf`),
		wait(`document.querySelector(".timeline").dataset.zoomed === "true"`),
		chromedp.Evaluate(read, &before),
		chromedp.Evaluate(`document.querySelector(".timeline").marker = 1`, nil),
	))
	require.Less(t, before.End-before.Start, 6e6, "zoomed to stepA's 4 ms")

	b.sendGenkit(t, jsSpanBody(traceID, c3, root, "step3", t0+10, t0+11, attrs("step3"), 0))
	b.sendGenkit(t, jsSpanBody(traceID, root, "", "growing", t0, t0+20, attrs("growing"), 0))
	var c3x float64
	require.NoError(t, br.Run(
		wait(`!!document.querySelector("#span-`+c3+` .wf rect.bar") && !document.querySelector(".span-row.running")`),
		chromedp.Evaluate(read, &after),
		chromedp.Evaluate(`Number(document.querySelector("#span-`+c3+` .wf rect.bar").getAttribute("x"))`, &c3x),
	))
	var marker int
	require.NoError(t, br.Run(chromedp.Evaluate(`document.querySelector(".timeline").marker ?? 0`, &marker)))
	require.Equal(t, 1, marker, "the tree was updated in place, not reloaded")
	require.NotEqual(t, before.Len, after.Len, "the axis was replaced by the grown one")
	require.InDelta(t, before.Start, after.Start, 1e3, "the view is still stepA's")
	require.InDelta(t, before.End, after.End, 1e3)
	require.Greater(t, c3x, 1000.0, "the new span lies right of the zoomed view")
	require.NoError(t, br.Run(
		browsertest.Click(`[data-zoom-reset]`),
		wait(`document.querySelector(".timeline").dataset.zoomed === "false"`),
		chromedp.Evaluate(read, &after),
	))
	require.InDelta(t, 20e6, after.End-after.Start, 1e3, "the whole grown trace: 20 ms")
	require.Empty(t, br.Problems())
}

// dblclick double-clicks the element that selector finds at that moment, in one script: a live
// page may still replace the tree's rows with a fresh render after it connects (the spans' live
// events can arrive after the page loaded), and a node that chromedp.DoubleClick found before that
// is gone by the time it clicks ("Could not find node with given id", seen in CI).
func dblclick(selector string) chromedp.Action {
	return chromedp.Evaluate(`document.querySelector(`+strconv.Quote(selector)+`).dispatchEvent(new MouseEvent("dblclick", {bubbles: true, cancelable: true}))`, nil)
}
