package trace_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// The OTel JS capture (@opentelemetry/exporter-trace-otlp-http 0.52): six one-span traces, then
// one whole agent run: invoke_agent travel-bot → chat, execute_tool get_weather (→ GET),
// execute_tool book_flight (fails: card declined), chat.
const (
	genaiTrace     = "32a6543ea49e8b7b5c3dfd944745d97f"
	genaiAgent     = "061835b12bc7fc26"
	genaiChat0     = "f6bd39db0d98c578"
	genaiChat1     = "ccf03a20091c353b"
	genaiWeather   = "a82fb8a615aa1760"
	genaiBook      = "849f129f5830550d"
	genaiHTTP      = "911df2595a41b3bd"
	genaiLoneChat  = "d4a9e87093dbf1b08deed195dba91b8b"
	genaiLoneTool  = "769843b88c45369bde85ec48aeb031f8"
	genaiTurnStart = int64(1796133243123000000)
)

// genaiWant is the turn summary of the agent run: each chat span is a turn; the execute_tool
// spans after the first, under the same agent, are its tool calls, the failing one failed.
var genaiWant = []trace.Turn{
	{Index: 0, SpanID: genaiChat0, Model: "gpt-4o-mini", InputTokens: 42, OutputTokens: 17, FinishReason: "tool_calls",
		ToolCalls: []trace.ToolCall{
			{Name: "get_weather", SpanID: genaiWeather, CallID: "call_1", DurationNS: 1796133243199358755 - 1796133243157000000},
			{Name: "book_flight", SpanID: genaiBook, CallID: "call_2", DurationNS: 1796133243211111065 - 1796133243200000000,
				State: "error", Error: "card declined"},
		},
		StartTime: genaiTurnStart, EndTime: 1796133243211111065, DurationNS: 1796133243211111065 - genaiTurnStart},
	{Index: 1, SpanID: genaiChat1, Model: "gpt-4o-mini", InputTokens: 80, OutputTokens: 25, FinishReason: "stop",
		ToolCalls: []trace.ToolCall{}, StartTime: 1796133243212000000, EndTime: 1796133243227489503,
		DurationNS: 1796133243227489503 - 1796133243212000000},
}

// genaiSpans decodes the capture, by trace.
func genaiSpans(t *testing.T) map[string][]store.Span {
	t.Helper()
	byTrace := map[string][]store.Span{}
	for _, body := range fixtureBodies(t, "otel-js-genai-otlp.jsonl") {
		spans, rejected, _, err := trace.DecodeOTLP(body, trace.ContentTypeJSON)
		require.NoError(t, err)
		require.Zero(t, rejected)
		for _, sp := range spans {
			byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
		}
	}
	return byTrace
}

// factsOf reads spans as SpanTurnFactsByTrace returns them: in start order.
func factsOf(spans []store.Span) []store.SpanTurnFacts {
	facts := make([]store.SpanTurnFacts, len(spans))
	for i := range spans {
		facts[i] = trace.FactsOf(&spans[i])
	}
	slices.SortFunc(facts, func(a, b store.SpanTurnFacts) int {
		if a.StartTime != b.StartTime {
			if a.StartTime < b.StartTime {
				return -1
			}
			return 1
		}
		return strings.Compare(a.SpanID, b.SpanID)
	})
	return facts
}

// TestGenAITurnsFromTheOTelJSCapture reads the real OTel JS capture without a database: the agent
// run's chat spans are its turns, with model, tokens, finish reason and tool calls (the failing one
// failed, with its message); a lone chat span is one turn, a lone tool call none; and the spans
// are labelled agent, model and tool.
func TestGenAITurnsFromTheOTelJSCapture(t *testing.T) {
	t.Parallel()
	byTrace := genaiSpans(t)
	require.Len(t, byTrace, 7)

	facts := factsOf(byTrace[genaiTrace])
	require.Equal(t, genaiWant, trace.BuildTurns(facts))

	labels := map[string]string{}
	for i := range facts {
		labels[facts[i].SpanID] = trace.SpanLabel(&facts[i], facts[i].ParentSpanID == nil)
	}
	require.Equal(t, map[string]string{genaiAgent: "agent", genaiChat0: "model", genaiChat1: "model",
		genaiWeather: "tool", genaiBook: "tool", genaiHTTP: ""}, labels)

	lone := trace.BuildTurns(factsOf(byTrace[genaiLoneChat]))
	require.Len(t, lone, 1)
	require.Equal(t, "gpt-4o-mini", lone[0].Model)
	require.Equal(t, int64(42), lone[0].InputTokens)
	require.Empty(t, trace.BuildTurns(factsOf(byTrace[genaiLoneTool])), "a tool call without a model call is no turn")
}

// TestGenAITracesThroughTheStore ingests the capture as POST /v1/traces does: the turn summary
// read in SQL equals the one read in Go, and the trace list's totals (service, model, tokens, tool
// calls and failures) are folded once, however often the spans are sent.
func TestGenAITracesThroughTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	svc, err := trace.NewService(trace.Config{Store: st, StartDelay: -1})
	require.NoError(t, err)
	bodies := fixtureBodies(t, "otel-js-genai-otlp.jsonl")
	for round := 0; round < 2; round++ { // the second round resends every span
		for _, body := range bodies {
			_, err := svc.IngestOTLP(ctx, body, trace.ContentTypeJSON)
			require.NoError(t, err)
		}
		turns, err := svc.Turns(ctx, genaiTrace)
		require.NoError(t, err)
		require.Equal(t, genaiWant, turns)

		tr, err := st.TraceGet(ctx, genaiTrace)
		require.NoError(t, err)
		require.Equal(t, "otel-genai-json", tr.Service)
		require.Equal(t, store.SpanSourceOTLP, tr.Source)
		require.Equal(t, "gpt-4o-mini", tr.Model)
		require.Equal(t, []any{2, int64(122), int64(42), 2, 1},
			[]any{tr.ModelCalls, tr.InputTokens, tr.OutputTokens, tr.ToolCalls, tr.ToolErrors}, "round %d", round)

		lone, err := st.TraceGet(ctx, genaiLoneTool)
		require.NoError(t, err)
		require.Equal(t, []any{0, 1, 1}, []any{lone.ModelCalls, lone.ToolCalls, lone.ToolErrors})
	}
}

// TestFactsOfScansAttributesLikeTheSQL reads attributes as SpanTurnFactsByTrace's jsonb_to_record
// does: strings unquoted, numbers and arrays as their JSON text, escaped names decoded, a repeated
// name's last value, other values skipped whatever they hold.
func TestFactsOfScansAttributesLikeTheSQL(t *testing.T) {
	t.Parallel()
	sp := store.Span{SpanID: "00f067aa0ba902b7", Name: "chat m", EndTime: 2, StartTime: 1, Attributes: []byte(` {
		"a\"b" : {"x": [1, "]", {"}": "\","}]},
		"gen_ai.operation.name":"chat", "gen_ai\u002erequest.model" : "m",
		"gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 6,
		"gen_ai.response.finish_reasons": ["stop", "length"],
		"gen_ai.tool.name": null, "genkit:output": "{\"usage\":{}}",
		"path": "c:\\dir\\", "quote": "\\\"", "gen_ai.response.model": "r",
		"gen_ai.usage.input_tokens": 7 } `)}
	f := trace.FactsOf(&sp)
	require.Equal(t, trace.KindModel, trace.SpanKind(&f))
	require.Equal(t, "m", *f.Model)
	require.Equal(t, "7", *f.InputTokens)
	require.Equal(t, "6", *f.OutputTokens)
	require.Equal(t, `["stop", "length"]`, *f.FinishReasons)
	require.Nil(t, f.ToolName)
	require.Equal(t, "r", *f.ResponseModel, "read past strings ending in escaped backslashes and quotes")
	require.Nil(t, f.ModelOutput, "a span with gen_ai usage has no Genkit output to parse")
	turns := trace.BuildTurns([]store.SpanTurnFacts{f})
	require.Len(t, turns, 1)
	require.Equal(t, []any{"m", int64(7), int64(6), "stop"}, []any{turns[0].Model, turns[0].InputTokens, turns[0].OutputTokens, turns[0].FinishReason})
}

// TestPreviewSaysWhatAToolWasAsked: a tool's row reads "search: durable execution retries", from
// Genkit's input (a JSON string) or GenAI's arguments; several arguments read as their keys and
// values; a list of messages as its first user message; a long one is cut.
func TestPreviewSaysWhatAToolWasAsked(t *testing.T) {
	t.Parallel()
	require.Equal(t, "durable execution retries", trace.Preview(`{"query":"durable execution retries"}`, 40))
	require.Equal(t, "durable execution retries", trace.Preview(`"{\"query\":\"durable execution retries\"}"`, 40))
	require.Equal(t, "city: Lisbon, days: 3", trace.Preview(`{"days":3,"city":"Lisbon"}`, 40))
	require.Equal(t, "plain words", trace.Preview("plain   words", 40))
	require.Equal(t, "Weather in Lisbon?", trace.Preview(`[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},{"role":"user","parts":[{"type":"text","content":"Weather in Lisbon?"}]}]`, 40))
	require.Equal(t, "", trace.Preview(`{}`, 40))
	require.Len(t, []rune(trace.Preview(strings.Repeat("é", 100), 40)), 40)
}

// TestATraceCountsEachToolCallOnce: a tool span sent running, then ended, then ended again (Genkit
// JS's realtime mode, and an exporter's retry), in groups of its own or together, adds one tool
// call and one failure to its trace's totals.
func TestATraceCountsEachToolCallOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	svc, err := trace.NewService(trace.Config{Store: st, StartDelay: -1})
	require.NoError(t, err)
	const traceID = "5b8efff798038103d269b633813fc60c"
	parent := "eee19b7ec3c1b174"
	span := func(id string, end int64) store.Span {
		return store.Span{TraceID: traceID, SpanID: id, ParentSpanID: &parent, Name: "search", StartTime: 100, EndTime: end,
			StatusCode: store.StatusError, Source: store.SpanSourceGenkit,
			Attributes: json.RawMessage(`{"genkit:type":"action","genkit:metadata:subtype":"tool","genkit:name":"search","genkit:state":"error"}`)}
	}
	root := store.Span{TraceID: traceID, SpanID: parent, Name: "flow", StartTime: 50, EndTime: 900, Source: store.SpanSourceGenkit,
		Attributes: json.RawMessage(`{"genkit:type":"action","genkit:metadata:subtype":"flow"}`)}
	for _, batch := range [][]store.Span{
		{root},
		{span("00000000000000a1", 0)},   // running
		{span("00000000000000a1", 200)}, // ended: counts
		{span("00000000000000a1", 200)}, // sent again: does not
		{span("00000000000000a2", 0), span("00000000000000a2", 300), span("00000000000000a2", 300)}, // all in one group
		{span("00000000000000a2", 300), span("00000000000000a1", 0)},                                // stale start
	} {
		_, err := svc.Ingest(ctx, store.SpanSourceGenkit, batch)
		require.NoError(t, err)
	}
	tr, err := st.TraceGet(ctx, traceID)
	require.NoError(t, err)
	require.Equal(t, []any{2, 2, 0}, []any{tr.ToolCalls, tr.ToolErrors, tr.ModelCalls}, "each tool call once")
}
