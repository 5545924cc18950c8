package server

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
)

// testSpan is a stored span for the UI tests: ended after 1ms unless end says otherwise.
func testSpan(traceID, id, parent, name string, start, end int64, attrs string) store.Span {
	if attrs == "" {
		attrs = `{}`
	}
	s := store.Span{TraceID: traceID, SpanID: id, Name: name, StartTime: start, EndTime: end,
		Attributes: json.RawMessage(attrs), Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`),
		Resource: json.RawMessage(`{}`), Source: store.SpanSourceOTLP}
	if parent != "" {
		s.ParentSpanID = &parent
	}
	return s
}

// spanHex is a 16-hex-digit span id.
func spanHex(prefix byte, n int) string { return fmt.Sprintf("%c%015x", prefix, n) }

// wideTrace stores a trace whose root has 460 children, child #451 (index 450) having one child:
// the deep-link target.
func wideTrace(t *testing.T, st *store.Store, runID *uuid.UUID, childAttrs func(i int) (string, string)) (traceID, root, target string) {
	t.Helper()
	traceID = newTraceID()
	now := time.Now().Add(-time.Minute).UnixNano()
	root = spanHex('a', 0)
	spans := []store.Span{testSpan(traceID, root, "", "root", now, now+1e9, "")}
	for i := range 460 {
		name, attrs := fmt.Sprintf("child-%03d", i), ""
		if childAttrs != nil {
			name, attrs = childAttrs(i)
		}
		spans = append(spans, testSpan(traceID, spanHex('c', i), root, name, now+int64(i+1)*1000, now+int64(i+1)*1000+500, attrs))
	}
	target = spanHex('d', 1)
	spans = append(spans, testSpan(traceID, target, spanHex('c', 450), "the-target", now+451*1000+10, now+451*1000+20, ""))
	if runID != nil {
		for i := range spans {
			spans[i].RunID = runID
		}
	}
	_, err := st.SpanIngest(context.Background(), spans)
	require.NoError(t, err)
	return traceID, root, target
}

// rowIDsOf lists the span rows of a rendered tree, in order.
func rowIDsOf(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<li class="span-row[^"]*"[^>]*id="span-([0-9a-f]+)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestSkeletonShowsThePathToADeepLinkedSpan: a selected span past the first page of its parent's
// children is shown, with a page of its siblings from a little before it, after a "show more" row
// for the gap that loads exactly up to them; a target just past the page extends it instead.
func TestSkeletonShowsThePathToADeepLinkedSpan(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	facts := []store.SpanTurnFacts{{SpanID: "r", Name: "root", StartTime: 1, EndTime: 5000}}
	for i := range 460 {
		facts = append(facts, store.SpanTurnFacts{SpanID: fmt.Sprint(i), ParentSpanID: s("r"), Name: fmt.Sprint("c", i), StartTime: int64(2 + i), EndTime: int64(3 + i)})
	}
	facts = append(facts, store.SpanTurnFacts{SpanID: "x", ParentSpanID: s("450"), Name: "target", StartTime: 460, EndTime: 461})
	sk := buildSkeleton("t", facts, 0)
	target, child := sk.Index["x"], sk.Index["450"]
	rows := sk.rows(-1, 0, 0, map[int32]bool{0: true, child: true}, target)
	var selected []string
	for _, r := range rows {
		if r.Selected {
			selected = append(selected, r.Name)
		}
	}
	require.Equal(t, []string{"target"}, selected, "the deep-linked span is shown and selected")
	// root, 200 children, a gap row, children 440..459 with the target under 450.
	require.Len(t, rows, 1+childPage+1+20+1)
	gap := rows[1+childPage]
	require.Equal(t, templatesMore{200, 440, "r"}, templatesMore{gap.More, gap.End, gap.Parent})
	require.Equal(t, "c440", rows[1+childPage+1].Name)
	require.Equal(t, "target", rows[1+childPage+1+11].Name)
	require.Equal(t, 2, rows[1+childPage+1+11].Depth)
	require.Equal(t, "c459", rows[len(rows)-1].Name, "no more row: the window reaches the last child")

	// The gap loads a page, then the rest up to the rows already shown, and no further.
	page := sk.rowsWindow(0, 1, 200, 440, nil, -1)
	require.Len(t, page, childPage+1)
	require.Equal(t, "c200", page[0].Name)
	require.Equal(t, templatesMore{400, 440, "r"}, templatesMore{page[childPage].More, page[childPage].End, page[childPage].Parent})
	page = sk.rowsWindow(0, 1, 400, 440, nil, -1)
	require.Len(t, page, 40)
	require.Equal(t, "c439", page[39].Name)

	// Just past the page: the page is extended, and a more row follows.
	rows = sk.rows(-1, 0, 0, map[int32]bool{0: true}, sk.Index["205"])
	require.Len(t, rows, 1+216+1)
	require.Equal(t, "c215", rows[216].Name)
	require.Equal(t, 216, rows[217].More)
	require.Zero(t, rows[217].End)
}

type templatesMore struct {
	More, End int
	Parent    string
}

// TestTraceDeepLinkPastAPageOfChildren: the trace page and its live fragment show a deep-linked
// span under the 451st child of the root, and the gap's fragment fills in the siblings between.
func TestTraceDeepLinkPastAPageOfChildren(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	traceID, root, target := wideTrace(t, b.store, nil, nil)
	_, body := get(t, b.url+"/traces/"+traceID+"?span="+target)
	ids := rowIDsOf(body)
	require.Contains(t, ids, target)
	require.Contains(t, body, `class="span-row d2 selected"`)
	require.Contains(t, body, `class="span-panel" data-span="`+target+`"`)
	require.Contains(t, body, `data-offset="200" data-depth="1" data-end="440"`)
	require.Contains(t, body, "Show 240 more spans…")
	require.Len(t, ids, 1+200+20+1)

	// The live reload, which says what is open, keeps it in view.
	_, body = get(t, b.url+"/traces/"+traceID+"/tree?span="+target+"&open="+root+","+spanHex('c', 450))
	require.Contains(t, rowIDsOf(body), target)

	// The gap row's fragment.
	_, body = get(t, b.url+"/traces/"+traceID+"/children?parent="+root+"&offset=200&end=440&depth=1")
	ids = rowIDsOf(body)
	require.Len(t, ids, 200)
	require.Equal(t, spanHex('c', 200), ids[0])
	require.Contains(t, body, `data-offset="400" data-depth="1" data-end="440"`)
	_, body = get(t, b.url+"/traces/"+traceID+"/children?parent="+root+"&offset=400&end=440&depth=1")
	ids = rowIDsOf(body)
	require.Len(t, ids, 40)
	require.NotContains(t, body, "data-more")
}

// TestRunPageToolLinkInATurnPastAPage: the run page's ?tool=&turn= link selects a tool span that
// is its turn's 451st child, and a tool that raised an interrupt says so, in the tree and in its
// panel, instead of "unset".
func TestRunPageToolLinkInATurnPastAPage(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	run, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/wide", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	traceID := newTraceID()
	now := time.Now().Add(-time.Minute).UnixNano()
	root, turn := spanHex('a', 0), spanHex('b', 0)
	spans := []store.Span{
		testSpan(traceID, root, "", "agent", now, now+1e9, `{"genkit:name":"agent","genkit:type":"action","loupe.run.id":"`+run.ID.String()+`"}`),
		testSpan(traceID, turn, root, "generate", now+1, now+1e9-1, `{"genkit:name":"generate","genkit:type":"util","loupe.turn.index":"0","gen_ai.operation.name":"invoke_agent"}`),
	}
	for i := range 460 {
		tool, state := "lookup", "success"
		if i == 450 {
			tool, state = "approve", "interrupted"
		}
		spans = append(spans, testSpan(traceID, spanHex('c', i), turn, tool, now+int64(i+2)*1000, now+int64(i+2)*1000+500,
			fmt.Sprintf(`{"genkit:name":%q,"genkit:type":"action","genkit:state":%q,"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":%q,"loupe.turn.index":"0"}`, tool, state, tool)))
	}
	for i := range spans {
		spans[i].RunID = &run.ID
	}
	_, err = b.store.SpanIngest(ctx, spans)
	require.NoError(t, err)

	_, body := get(t, b.url+"/runs/"+run.ID.String()+"?tool=approve&turn=0")
	target := spanHex('c', 450)
	require.Contains(t, body, `class="span-panel" data-span="`+target+`"`)
	ids := rowIDsOf(body)
	require.Contains(t, ids, target, "the selected tool row is in the tree")
	require.Regexp(t, `class="span-row d2 interrupted selected"[^>]*id="span-`+target, body)
	require.Contains(t, body, `<span class="status-interrupted" data-testid="span-status" title="">interrupted</span>`)
	require.NotContains(t, body, `class="status-unset"`)
	require.Contains(t, body, `>interrupted</span>`, "the tree marks it")
}

// TestBrowserDeepLinkPastAPageOfChildren opens a deep link to a span under the root's 451st
// child: it is selected and scrolled into view, and the gap's "show more" rows fill in the
// siblings between without repeating any.
func TestBrowserDeepLinkPastAPageOfChildren(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	traceID, _, target := wideTrace(t, b.store, nil, nil)
	br := browsertest.New(t)
	var visible bool
	var n, unique int
	require.NoError(t, br.Run(
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(b.url+"/traces/"+traceID+"?span="+target),
		wait(`document.querySelector(".span-row.selected")?.dataset.span === "`+target+`"`),
		chromedp.Sleep(200*time.Millisecond),
		chromedp.Evaluate(`(() => {
			const tree = document.querySelector(".spantree").getBoundingClientRect();
			const row = document.querySelector(".span-row.selected").getBoundingClientRect();
			return row.top >= tree.top && row.bottom <= tree.bottom;
		})()`, &visible),
	))
	require.True(t, visible, "the selected row is scrolled into view")
	require.NoError(t, br.Run(
		chromedp.Evaluate(`document.querySelector(".span-row.more[data-end] [data-more]").click(); true`, nil),
		wait(`document.querySelectorAll(".span-row[data-span]").length === 1 + 200 + 200 + 20 + 1`),
		chromedp.Evaluate(`document.querySelector(".span-row.more[data-end] [data-more]").click(); true`, nil),
		wait(`document.querySelectorAll(".span-row[data-span]").length === 1 + 460 + 1`),
		chromedp.Evaluate(`document.querySelectorAll(".span-row[data-span]").length`, &n),
		chromedp.Evaluate(`new Set([...document.querySelectorAll(".span-row[data-span]")].map((r) => r.dataset.span)).size`, &unique),
	))
	require.Equal(t, n, unique, "no row twice")
	require.Empty(t, br.Problems())
}

// TestSkeletonStaleSpans: a span without an end in a trace where nothing has happened for long is
// stale, not running: the axis ends at the trace's last known time, not now. With recent activity
// it is still running.
func TestSkeletonStaleSpans(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	t0 := time.Now().Add(-2 * time.Hour).UnixNano()
	facts := []store.SpanTurnFacts{
		{SpanID: "root", Name: "flow", StartTime: t0, EndTime: 0},
		{SpanID: "a", ParentSpanID: s("root"), Name: "a", StartTime: t0 + 1e6, EndTime: t0 + 5e6},
		{SpanID: "b", ParentSpanID: s("root"), Name: "b", StartTime: t0 + 6e6, EndTime: t0 + 10e6},
	}
	sk := buildSkeleton("t", facts, t0+10e6+int64(16*time.Minute))
	require.True(t, sk.Stale)
	require.False(t, sk.Running)
	require.Equal(t, int64(10e6), sk.AxisLen, "the axis ends at the last span's end")
	rows := sk.rows(-1, 0, 0, map[int32]bool{0: true}, -1)
	require.True(t, rows[0].Stale)
	require.False(t, rows[0].Running)
	require.Equal(t, "no end received", rows[0].Duration)
	require.InDelta(t, 1000, rows[0].W, 0.01)
	require.InDelta(t, 400, rows[1].W, 0.01, "other bars keep their size")

	sk = buildSkeleton("t", facts, t0+10e6+int64(time.Minute))
	require.True(t, sk.Running, "a trace with recent activity is running")
	require.False(t, sk.Stale)
	rows = sk.rows(-1, 0, 0, map[int32]bool{0: true}, -1)
	require.True(t, rows[0].Running)
	require.Equal(t, "running", rows[0].Duration)
}

// TestTracePageMarksSpansWithoutAnEndStale renders a trace whose root never ended and whose last
// span ended an hour ago: no "running", but "no end received", in the header, the tree and the
// span's panel, and the other bars are not slivers.
func TestTracePageMarksSpansWithoutAnEndStale(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	traceID := newTraceID()
	t0 := time.Now().Add(-time.Hour).UnixNano()
	root, a := spanHex('a', 0), spanHex('b', 1)
	_, err := b.store.SpanIngest(ctx, []store.Span{
		testSpan(traceID, root, "", "crashed", t0, 0, ""),
		testSpan(traceID, a, root, "step", t0+2e6, t0+4e6, ""),
	})
	require.NoError(t, err)
	for _, u := range []string{"/traces/" + traceID + "?span=" + root, "/traces/" + traceID + "/tree?span=" + root} {
		_, body := get(t, b.url+u)
		require.NotContains(t, body, "badge running", u)
		require.NotContains(t, body, `span-row d0 running`, u)
		require.Contains(t, body, `class="badge stale"`, u)
		require.Contains(t, body, `class="span-row d0 stale selected"`, u)
		require.Contains(t, body, ">no end received</span>", u)
		require.Contains(t, body, `data-running="false"`, u)
		require.Contains(t, body, `<rect x="500.0" y="1" width="500.0"`, u, "the step's bar is half the axis")
	}
	_, body := get(t, b.url+"/traces/"+traceID+"/spans/"+root)
	require.Contains(t, body, `class="badge stale"`)
	require.NotContains(t, body, "badge running")

	// The same trace with a span that started a moment ago is running.
	_, err = b.store.SpanIngest(ctx, []store.Span{testSpan(traceID, spanHex('b', 2), root, "late", time.Now().UnixNano(), 0, "")})
	require.NoError(t, err)
	_, body = get(t, b.url+"/traces/"+traceID)
	require.Contains(t, body, "badge running")
	require.NotContains(t, body, "no end received")
}

// TestSpanPanelShowsEventsReadably: event times are offsets from the span's start with the
// absolute time in a tooltip, and a stack trace reads as lines, not as "\n".
func TestSpanPanelShowsEventsReadably(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	traceID := newTraceID()
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	sp := testSpan(traceID, spanHex('a', 0), "", "failing", t0, t0+50e6, "")
	sp.Events = json.RawMessage(fmt.Sprintf(`[{"time_unix_nano":%d,"name":"exception","attributes":{"exception.type":"Error","exception.message":"boom","exception.stacktrace":"Error: boom\n    at f (a.js:1:2)\n    at g (b.js:3:4)"}}]`, t0+12_300_000))
	_, err := b.store.SpanIngest(ctx, []store.Span{sp})
	require.NoError(t, err)
	_, body := get(t, b.url+"/traces/"+traceID+"/spans/"+sp.SpanID)
	require.Contains(t, body, `title="2025-03-01 10:00:00.012300 UTC">+12.3ms</time>`)
	require.Contains(t, body, "<pre>Error: boom\n    at f (a.js:1:2)\n    at g (b.js:3:4)</pre>")
	require.NotContains(t, body, `\n`)
	require.NotContains(t, body, fmt.Sprint(t0+12_300_000), "no raw nanoseconds")
	require.Contains(t, body, "<dt>exception.message</dt><dd>boom</dd>")
	require.Contains(t, body, "10:00:00 UTC</time>", "the start time says its zone")
}

// TestDeepSpanNamesKeepRoomAndATooltip: a span 20 levels deep shows its name, with its full name
// in a tooltip, and the indentation stops growing.
func TestDeepSpanNamesKeepRoomAndATooltip(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	traceID := newTraceID()
	t0 := time.Now().Add(-time.Minute).UnixNano()
	var spans []store.Span
	parent := ""
	for i := range 21 {
		id := spanHex('a', i)
		spans = append(spans, testSpan(traceID, id, parent, fmt.Sprintf("level-%02d-with-a-rather-long-name", i), t0+int64(i), t0+1e6-int64(i), ""))
		parent = id
	}
	_, err := b.store.SpanIngest(ctx, spans)
	require.NoError(t, err)
	deepest := spanHex('a', 20)
	_, body := get(t, b.url+"/traces/"+traceID+"?span="+deepest)
	require.Contains(t, body, `title="level-20-with-a-rather-long-name (depth 20)"`)
	require.Contains(t, body, `title="level-05-with-a-rather-long-name"`)
	require.Contains(t, body, `class="span-row d12 selected"`)

	br := browsertest.New(t)
	var width float64
	var title string
	require.NoError(t, br.Run(
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(b.url+"/traces/"+traceID+"?span="+deepest),
		wait(`!!document.querySelector(".span-row.selected .span-name")`),
		chromedp.Evaluate(`document.querySelector(".span-row.selected .span-name").getBoundingClientRect().width`, &width),
		chromedp.Evaluate(`document.querySelector(".span-row.selected .span-name").title`, &title),
	))
	require.Greater(t, width, 80.0, "the deepest name keeps room")
	require.Equal(t, "level-20-with-a-rather-long-name (depth 20)", title)
	require.Empty(t, br.Problems())
}
