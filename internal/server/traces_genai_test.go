package server

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// TestGenAITracesReadLikeGenkitTraces replays the real OTel JS capture (spans after the OTel
// GenAI conventions, sent by @opentelemetry/exporter-trace-otlp-http 0.52) through POST /v1/traces
// and reads it everywhere a Genkit trace is read: the turn summary of the API and of the trace
// page (the failing tool failed), the tree's labels, the list's service, model, tokens and tool
// calls (API and page), and the span panel's model messages. A Genkit JS capture gets the same
// list columns and messages view.
func TestGenAITracesReadLikeGenkitTraces(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	replayFixture(t, b, "otel-js-genai-otlp.jsonl")
	replayFixture(t, b, "genkit-js-1.42-dev.jsonl")
	const (
		id       = "32a6543ea49e8b7b5c3dfd944745d97f"
		agent    = "061835b12bc7fc26"
		chat0    = "f6bd39db0d98c578"
		chat1    = "ccf03a20091c353b"
		weather  = "a82fb8a615aa1760"
		book     = "849f129f5830550d"
		loneTool = "769843b88c45369bde85ec48aeb031f8"
	)

	var turns struct {
		TraceID string       `json:"trace_id"`
		Turns   []trace.Turn `json:"turns"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+id+"/turns", &turns))
	require.Len(t, turns.Turns, 2)
	t0, t1 := turns.Turns[0], turns.Turns[1]
	require.Equal(t, []any{0, chat0, "gpt-4o-mini", int64(42), int64(17), "tool_calls"},
		[]any{t0.Index, t0.SpanID, t0.Model, t0.InputTokens, t0.OutputTokens, t0.FinishReason})
	require.Len(t, t0.ToolCalls, 2)
	require.Equal(t, []any{"get_weather", weather, "call_1", ""},
		[]any{t0.ToolCalls[0].Name, t0.ToolCalls[0].SpanID, t0.ToolCalls[0].CallID, t0.ToolCalls[0].State})
	require.Equal(t, []any{"book_flight", book, "call_2", "error", "card declined"},
		[]any{t0.ToolCalls[1].Name, t0.ToolCalls[1].SpanID, t0.ToolCalls[1].CallID, t0.ToolCalls[1].State, t0.ToolCalls[1].Error})
	require.Equal(t, []any{1, chat1, int64(80), int64(25), "stop", 0},
		[]any{t1.Index, t1.SpanID, t1.InputTokens, t1.OutputTokens, t1.FinishReason, len(t1.ToolCalls)})

	// The list, in the API: the service that sent it, its model and totals.
	var list struct {
		Traces []store.Trace `json:"traces"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces?limit=100", &list))
	byID := map[string]store.Trace{}
	genkitWithModel := ""
	for _, tr := range list.Traces {
		byID[tr.TraceID] = tr
		if tr.Source == store.SpanSourceGenkit && tr.Model != "" && tr.InputTokens > 0 && tr.ToolCalls > 0 && genkitWithModel == "" {
			genkitWithModel = tr.TraceID
		}
	}
	tr := byID[id]
	require.Equal(t, []any{"otel-genai-json", "otlp", "gpt-4o-mini", 2, int64(122), int64(42), 2, 1},
		[]any{tr.Service, tr.Source, tr.Model, tr.ModelCalls, tr.InputTokens, tr.OutputTokens, tr.ToolCalls, tr.ToolErrors})
	require.Equal(t, []any{1, 1}, []any{byID[loneTool].ToolCalls, byID[loneTool].ToolErrors})
	require.NotEmpty(t, genkitWithModel, "a Genkit trace has the same columns")

	// The list page.
	_, listPage := get(t, b.url+"/traces?source=otlp")
	row := regexp.MustCompile(`(?s)<tr data-trace="` + id + `">.*?</tr>`).FindString(listPage)
	require.NotEmpty(t, row)
	require.Contains(t, row, `<span class="service">otel-genai-json</span> <span class="muted small">otlp</span>`)
	require.Contains(t, row, `<td class="model">gpt-4o-mini</td>`)
	require.Contains(t, row, `<td class="num tokens">122 in / 42 out</td>`)
	require.Contains(t, row, `<td class="num tools error-text">2 (1 failed)</td>`)
	_, listPage = get(t, b.url+"/traces?source=genkit")
	row = regexp.MustCompile(`(?s)<tr data-trace="` + genkitWithModel + `">.*?</tr>`).FindString(listPage)
	require.Regexp(t, `<td class="num tokens">\d+ in / \d+ out</td>`, row)

	// The trace page: the tree's labels and the turn summary.
	_, page := get(t, b.url+"/traces/"+id)
	for span, label := range map[string]string{agent: "agent", chat0: "model · turn 0", chat1: "model · turn 1", weather: "tool", book: "tool"} {
		require.Regexp(t, `(?s)id="span-`+span+`".*?<span class="span-label">`+label+`</span>`, page, span)
	}
	require.Contains(t, page, "<td>get_weather, book_flight (failed)</td>")
	require.Contains(t, page, "2 turns · 122 tokens in, 42 out")
	require.Contains(t, page, "· otel-genai-json (otlp)</span>", "the trace's head names the service")

	// The span panel: the chat's messages, as the conversation view shows them.
	resp, body := get(t, b.url+"/traces/"+id+"/spans/"+chat0)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `class="span-messages"`)
	require.Regexp(t, `(?s)<li class="msg role-user">.*?Weather in Lisbon\?`, body)
	require.Regexp(t, `(?s)<li class="msg role-model">.*?→ tool request <code>get_weather</code> <span class="muted small">ref call_1</span>`, body)
	_, body = get(t, b.url+"/traces/"+id+"/spans/"+chat1)
	require.Regexp(t, `(?s)<li class="msg role-model">.*?It is sunny, 21°C.`, body)
	_, body = get(t, b.url+"/traces/"+id+"/spans/"+weather)
	require.Contains(t, body, `<code>gen_ai.tool.call.arguments</code>`, "a tool's arguments are a payload")
	require.Contains(t, body, `<code>gen_ai.tool.call.result</code>`)
	require.NotContains(t, body, `class="span-messages"`)

	// A Genkit model span's panel shows its messages the same way.
	var tree trace.Tree
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+genkitWithModel, &tree))
	model := ""
	eachNode(tree.Roots, func(n *trace.Node) {
		if model == "" && regexp.MustCompile(`"genkit:metadata:subtype":"model"`).Match(n.Attributes) {
			model = n.SpanID
		}
	})
	require.NotEmpty(t, model)
	_, body = get(t, b.url+"/traces/"+genkitWithModel+"/spans/"+model)
	require.Regexp(t, `(?s)class="span-messages".*?<li class="msg role-user">.*?<li class="msg role-model">`, body)
}
