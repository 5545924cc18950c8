package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// replayFixture posts the requests of a capture in ../trace/testdata/fixtures to the server, in
// the order the program sent them.
func replayFixture(t *testing.T, b *bundle, name string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "trace", "testdata", "fixtures", name))
	require.NoError(t, err)
	for line := range bytes.Lines(raw) {
		var req struct{ URL, Body string }
		require.NoError(t, json.Unmarshal(line, &req))
		resp, out := post(t, b.url+req.URL, "application/json", []byte(req.Body))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", name, req.URL, out)
	}
}

// findNode is the node of the span with id in a tree, or nil.
func findNode(nodes []*trace.Node, id string) *trace.Node {
	for _, n := range nodes {
		if n.SpanID == id {
			return n
		}
		if f := findNode(n.Children, id); f != nil {
			return f
		}
	}
	return nil
}

// eachNode calls fn on every node of a tree.
func eachNode(nodes []*trace.Node, fn func(*trace.Node)) {
	for _, n := range nodes {
		fn(n)
		eachNode(n.Children, fn)
	}
}

// TestGenkitInterruptsAreNotErrors replays real captures: the tools that Genkit JS and Go
// interrupted (and sent as errors) read interrupted, with their question, in the API's tree, the
// turns, the span panel and the trace page, and their traces are not error traces; the failing
// tool of the OTLP capture is still an error, and Genkit's successful spans read ok.
func TestGenkitInterruptsAreNotErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	for _, f := range []string{"genkit-js-1.42-dev.jsonl", "genkit-js-1.42-dev-interrupt-metadata.jsonl",
		"genkit-go-1.4.0-interrupt.jsonl", "otel-js-genai-otlp.jsonl"} {
		replayFixture(t, b, f)
	}
	const (
		jsTrace, jsTool         = "016017260409a9c3e70ee5c46e056d1a", "4952a06fc4d2f440" // ai.defineInterrupt
		jsMetaTrace, jsMetaTool = "c000ddf5350a6a9a5a1e23d0d45967ce", "9333345741b1b4b4" // interrupt() with metadata
		goTrace, goTool         = "7babc39630e2a837ae4f71f8ea562e0b", "cd003e73e4d99ca9" // tc.Interrupt
		otlpTrace, otlpTool     = "769843b88c45369bde85ec48aeb031f8", "1df19a55b7062f15" // a tool that failed
	)

	var list struct {
		Traces []store.Trace `json:"traces"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?status=error", &list))
	var errIDs []string
	for _, tr := range list.Traces {
		errIDs = append(errIDs, tr.TraceID)
	}
	const agentTrace = "32a6543ea49e8b7b5c3dfd944745d97f" // its root is OK, its book_flight tool failed
	require.ElementsMatch(t, []string{otlpTrace, agentTrace}, errIDs, "a trace with a failed span is an error trace, an interrupted one is not")
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?status=ok", &list))
	var okIDs []string
	for _, tr := range list.Traces {
		okIDs = append(okIDs, tr.TraceID)
	}
	require.NotContains(t, okIDs, jsTrace, "an interrupted trace is not ok")
	require.NotContains(t, okIDs, goTrace)
	require.NotEmpty(t, okIDs)
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?status=interrupted", &list))
	var interruptedIDs []string
	for _, tr := range list.Traces {
		interruptedIDs = append(interruptedIDs, tr.TraceID)
		require.True(t, tr.Interrupted, tr.TraceID)
	}
	require.Subset(t, interruptedIDs, []string{jsTrace, jsMetaTrace, goTrace}, "interrupted is a status of its own")
	require.NotContains(t, interruptedIDs, agentTrace, "a failed trace is failed, whatever else it holds")
	require.NotContains(t, interruptedIDs, "136a00354a91cd4d12dab6967030ac50", "the trace that resumed and ended is not interrupted")
	resp, _ := get(t, b.url+"/traces?status=interrupted")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the page's filter takes interrupted")
	resp, _ = get(t, b.url+"/api/v1/traces?status=paused")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	for _, tc := range []struct{ trace, tool, name string }{
		{jsTrace, jsTool, "confirmTransfer"}, {jsMetaTrace, jsMetaTool, "bookFlight"}, {goTrace, goTool, "add"},
	} {
		var tree trace.Tree
		require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+tc.trace, &tree))
		require.Equal(t, store.StatusOK, tree.Trace.StatusCode, tc.name)
		n := findNode(tree.Roots, tc.tool)
		require.NotNil(t, n, tc.name)
		require.Equal(t, tc.name, n.Name)
		require.Equal(t, "interrupted", n.Status)
		require.Equal(t, store.StatusUnset, n.StatusCode)
		var attrs map[string]any
		require.NoError(t, json.Unmarshal(n.Attributes, &attrs))
		require.Equal(t, "interrupted", attrs["genkit:state"])
		require.Equal(t, "error", attrs[trace.AttrOriginalState], "what Genkit sent is kept")
		require.Contains(t, string(n.Events), `"loupe.interrupt":true`, "the exception event is kept, marked")
		eachNode(tree.Roots, func(o *trace.Node) {
			require.NotEqual(t, "error", o.Status, "%s: %s is not red because of an interrupt", tc.name, o.Name)
			if o != n && o.EndTime != 0 {
				require.Equal(t, "ok", o.Status, "%s: Genkit's success is ok, not unset", o.Name)
			}
		})
	}

	// Turns: the interrupted tool call says so; its turn did not fail.
	var turns struct {
		Turns []trace.Turn `json:"turns"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+jsTrace+"/turns", &turns))
	var calls []trace.ToolCall
	for _, turn := range turns.Turns {
		require.NotEqual(t, "error", turn.State)
		calls = append(calls, turn.ToolCalls...)
	}
	require.Contains(t, calls, trace.ToolCall{Name: "confirmTransfer", SpanID: jsTool, DurationNS: calls[len(calls)-1].DurationNS, State: "interrupted"})

	// The span panel: interrupted, with the question, and no error.
	for _, tc := range []struct{ trace, tool, name, question string }{
		{jsTrace, jsTool, "confirmTransfer", `{"amount":420,"to":"TAP Air Portugal"}`},       // the input is the question
		{jsMetaTrace, jsMetaTool, "bookFlight", `{"reason":"price over limit","price":420}`}, // from the parent's tool request
		{goTrace, goTool, "add", `{"reason":"negative"}`},                                    // from Go's message
	} {
		resp, body := get(t, b.url+"/traces/"+tc.trace+"/spans/"+tc.tool)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `<span class="status-interrupted" data-testid="span-status" title="">interrupted</span>`)
		require.Contains(t, body, `data-interrupt="`+templEscape(tc.question)+`"`, "the question, as a tree")
		require.NotContains(t, body, `class="error-text"`)
		require.NotContains(t, body, `status-error`)
		// The interrupt leads; Genkit's exception, its stack and the attributes that call it a
		// failure are folded, last, under "as Genkit sent it".
		iq, asSent := strings.Index(body, `data-testid="span-interrupt"`), strings.Index(body, `<details class="as-sent" data-testid="as-sent">`)
		require.Positive(t, iq, tc.name)
		require.Greater(t, asSent, iq, tc.name)
		for _, first := range []string{`data-payload=`, `data-testid="attr-table"`} {
			require.Greater(t, strings.Index(body, first), iq, "%s: %s comes after the interrupt", tc.name, first)
		}
		folded := body[asSent:]
		require.Contains(t, folded, `<strong class="ev-name">exception (an interrupt, not an error)</strong>`, "Genkit's exception event is kept, marked")
		require.Equal(t, 1, strings.Count(body, `exception (an interrupt, not an error)`), "the exception is only in the fold")
		require.Contains(t, folded, `<tr data-key="genkit:state"><td><code>genkit:state</code></td><td class="attr-value">error<wbr></td></tr>`, "the state Genkit sent")
		require.NotContains(t, body[:asSent], trace.AttrOriginalState)
		require.NotContains(t, body[:asSent], `genkit:isFailureSource`)

		_, page := get(t, b.url+"/traces/"+tc.trace+"?span="+tc.tool)
		require.Regexp(t, `class="span-row[^"]* interrupted[^"]*"[^>]*id="span-`+tc.tool, page)
		require.NotRegexp(t, `class="span-row[^"]* error`, page, "no row of the trace is red")
		require.Contains(t, page, "<td>"+tc.name+" (interrupted)</td>", "the turn summary marks the tool")
	}
	_, listPage := get(t, b.url+"/traces")
	for _, id := range []string{jsTrace, jsMetaTrace, goTrace} {
		row := regexp.MustCompile(`(?s)<tr data-trace="` + id + `">.*?</tr>`).FindString(listPage)
		require.NotEmpty(t, row, id)
		require.NotContains(t, row, "badge failed", id)
		require.Contains(t, row, `<span class="badge interrupted"`, id)
	}
	_, filtered := get(t, b.url+"/traces?status=interrupted")
	require.Contains(t, filtered, `<tr data-trace="`+jsTrace+`">`)
	require.NotContains(t, filtered, `<tr data-trace="`+otlpTrace+`">`)
	require.Contains(t, filtered, `<option value="interrupted" selected`)
	row := regexp.MustCompile(`(?s)<tr data-trace="` + otlpTrace + `">.*?</tr>`).FindString(listPage)
	require.Contains(t, row, "badge failed")

	// A real error is still one.
	var tree trace.Tree
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+otlpTrace, &tree))
	n := findNode(tree.Roots, otlpTool)
	require.NotNil(t, n)
	require.Equal(t, "error", n.Status)
	resp, body := get(t, b.url+"/traces/"+otlpTrace+"/spans/"+otlpTool)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<span class="status-error" data-testid="span-status" title="">error</span>`)
	require.Contains(t, body, `data-testid="span-error">card declined</p>`)
	require.NotContains(t, body, "interrupt: <code>")
	require.Contains(t, body, `<strong class="ev-name">exception</strong>`)
}

// templEscape is s as templ writes it in text.
func templEscape(s string) string {
	return regexp.MustCompile(`"`).ReplaceAllString(s, "&#34;")
}
