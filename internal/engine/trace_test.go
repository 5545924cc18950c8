package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

func TestSpansPerTurnModelAndToolCarryGenkitAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := weather(b, nil)
	m := scripted.New("scripted/m", scripted.Reply(call("getWeather", "r1", map[string]any{"city": "x"})).WithUsage(10, 5), scripted.Text("ok").WithUsage(20, 2))
	_, err := engine.Generate(engine.WithRunID(context.Background(), "run-1"), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w))
	require.NoError(t, err)
	spans := b.exp.GetSpans()
	gens := spanByName(spans, "generate")
	require.Len(t, gens, 2)
	models := spanByName(spans, "scripted/m")
	require.Len(t, models, 2)
	tools := spanByName(spans, "getWeather")
	require.Len(t, tools, 1)

	// Turn 1's generate span nests under turn 0's, as Genkit's recursion does.
	g0, g1 := gens[1], gens[0]
	if v, _ := attr(g0, engine.AttrTurnIndex); v != int64(0) {
		g0, g1 = g1, g0
	}
	require.Equal(t, g0.SpanContext.SpanID(), g1.Parent.SpanID())
	isRoot, _ := attr(g0, engine.AttrIsRoot)
	require.Equal(t, true, isRoot)
	for k, v := range map[string]any{
		engine.AttrName: "generate", engine.AttrType: "util", engine.AttrGenAIOp: "invoke_agent", engine.AttrState: "success",
		engine.AttrPath: "/{generate,t:util}", engine.AttrRunID: "run-1",
	} {
		got, ok := attr(g0, k)
		require.True(t, ok, k)
		require.Equal(t, v, got, k)
	}
	in, _ := attr(g0, engine.AttrInput)
	require.Contains(t, in, `"messages"`)
	out, _ := attr(g0, engine.AttrOutput)
	require.Contains(t, out, `"finishReason"`)

	mt := models[0]
	for k, v := range map[string]any{
		engine.AttrType: "action", engine.AttrSubtype: "model", engine.AttrGenAIOp: "chat", engine.AttrGenAIModel: "scripted/m",
		engine.AttrGenAIInTok: int64(10), engine.AttrGenAIOutTok: int64(5), engine.AttrGenAIFinish: []string{"stop"},
	} {
		got, ok := attr(mt, k)
		require.True(t, ok, k)
		require.Equal(t, v, got, k)
	}
	require.Equal(t, g0.SpanContext.SpanID(), mt.Parent.SpanID())

	tt := tools[0]
	for k, v := range map[string]any{
		engine.AttrSubtype: "tool", engine.AttrGenAIOp: "execute_tool", engine.AttrGenAIToolName: "getWeather",
		engine.AttrGenAIToolCall: "r1", engine.AttrInput: `{"city":"x"}`, engine.AttrOutput: `{"tempC":1}`,
		engine.AttrPath: "/{generate,t:util}/{getWeather,t:action,s:tool}", engine.AttrTurnIndex: int64(0),
	} {
		got, ok := attr(tt, k)
		require.True(t, ok, k)
		require.Equal(t, v, got, k)
	}
}

func TestInterruptedToolSpanIsNotAnError(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	h.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "bob", "amount": 500}))
	s := spanByName(h.exp.GetSpans(), "transferMoney")[0]
	require.NotEqual(t, codes.Error, s.Status.Code)
	st, _ := attr(s, engine.AttrState)
	require.Equal(t, "interrupted", st)
	require.Len(t, s.Events, 1)
	require.Equal(t, "interrupt", s.Events[0].Name)
	require.Contains(t, s.Events[0].Attributes[0].Value.AsString(), `"reason":"confirm"`)
}

func TestLargeSpanAttributesAreTruncatedWithAMarker(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.WithAttributeLimit(64))
	m := scripted.New("m", scripted.Text("ok"))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt(strings.Repeat("x", 500)))
	require.NoError(t, err)
	in, _ := attr(spanByName(b.exp.GetSpans(), "m")[0], engine.AttrInput)
	s := in.(string)
	require.True(t, strings.HasPrefix(s, `{"messages":[{"role":"user"`))
	require.Contains(t, s, engine.TruncationMarker)
	require.Less(t, len(s), 120)
}

func TestFailedSpanHasErrorStateAndStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := scripted.New("m")
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"))
	require.Error(t, err)
	s := spanByName(b.exp.GetSpans(), "generate")[0]
	st, _ := attr(s, engine.AttrState)
	require.Equal(t, "error", st)
	require.Equal(t, codes.Error, s.Status.Code)
}

// Genkit writes genkit:input and genkit:output with JSON.stringify, strings too, and readers such
// as the genkit CLI's eval:extractData parse them: a flow's string output is stored as JSON.
func TestStringInputAndOutputAreJSONInSpans(t *testing.T) {
	t.Parallel()
	b := setup(t)
	engine.DefineFlow(b.r, "shout", func(ctx context.Context, in string) (string, error) {
		return strings.ToUpper(in) + "!", nil
	})
	_, err := b.r.Run(context.Background(), "/flow/shout", json.RawMessage(`"liftoff"`), nil)
	require.NoError(t, err)
	s := spanByName(b.exp.GetSpans(), "shout")[0]
	in, _ := attr(s, engine.AttrInput)
	out, _ := attr(s, engine.AttrOutput)
	require.Equal(t, `"liftoff"`, in)
	require.Equal(t, `"LIFTOFF!"`, out)
}

// WithRootSpan is Genkit's telemetryLabels and onTraceStart: the labels land on the root span only,
// and onStart sees the root span's ids once, before the action returns.
func TestWithRootSpanLabelsAndReportsTheRootSpan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := scripted.New("m", scripted.Text("ok"))
	engine.DefineFlow(b.r, "ask", func(ctx context.Context, in string) (string, error) {
		resp, err := engine.Generate(ctx, b.r, engine.WithModel(m), engine.WithPrompt(in))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	var started []oteltrace.SpanContext
	ctx := engine.WithRootSpan(context.Background(), map[string]string{"batchRun": "b1"}, func(sc oteltrace.SpanContext) {
		started = append(started, sc)
	})
	_, err := b.r.Run(ctx, "/flow/ask", json.RawMessage(`"q"`), nil)
	require.NoError(t, err)
	root := spanByName(b.exp.GetSpans(), "ask")[0]
	require.Len(t, started, 1)
	require.Equal(t, root.SpanContext.TraceID(), started[0].TraceID())
	require.Equal(t, root.SpanContext.SpanID(), started[0].SpanID())
	label, ok := attr(root, "batchRun")
	require.True(t, ok)
	require.Equal(t, "b1", label)
	for _, s := range b.exp.GetSpans() {
		if s.Name != "ask" {
			_, ok := attr(s, "batchRun")
			require.False(t, ok, s.Name)
		}
	}
}

// A tool run on its own (the reflection API's runAction, a durable run of a tool) is traced in a
// tool span of its own, as Genkit traces every action it runs; its interrupt shows on that span.
func TestToolRunOnItsOwnHasItsOwnSpan(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	_, err := h.r.Run(context.Background(), "/tool/transferMoney", json.RawMessage(`{"to":"bob","amount":500}`), nil)
	var ie *engine.InterruptError
	require.ErrorAs(t, err, &ie)
	s := spanByName(h.exp.GetSpans(), "transferMoney")
	require.Len(t, s, 1)
	for k, v := range map[string]any{engine.AttrSubtype: "tool", engine.AttrState: "interrupted", engine.AttrIsRoot: true,
		engine.AttrInput: `{"to":"bob","amount":500}`} {
		got, ok := attr(s[0], k)
		require.True(t, ok, k)
		require.Equal(t, v, got, k)
	}
}

// TestModelSpanRecordsWhichRequestAndModelAnswered: a model that reports the provider's request
// id, response id and answering model (ai.ProviderInfo in ModelResponse.Custom) gets them on its
// model span as gen_ai.response.id, gen_ai.response.model and loupe.provider.request_id; a model
// that reports none gets none of those attributes.
func TestModelSpanRecordsWhichRequestAndModelAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	told := engine.NewModel("p/told", nil, func(ctx context.Context, req *engine.ModelRequest, cb engine.ModelStreamFunc) (*engine.ModelResponse, error) {
		return &engine.ModelResponse{Message: ai.NewTextMessage(ai.RoleModel, "hi"), FinishReason: engine.FinishReasonStop,
			Custom: ai.ProviderInfo{RequestID: "req_011", ResponseID: "msg_01", Model: "p-2026-11-01"}}, nil
	})
	silent := engine.NewModel("p/silent", nil, func(ctx context.Context, req *engine.ModelRequest, cb engine.ModelStreamFunc) (*engine.ModelResponse, error) {
		return &engine.ModelResponse{Message: ai.NewTextMessage(ai.RoleModel, "hi"), FinishReason: engine.FinishReasonStop}, nil
	})
	for _, m := range []engine.Model{told, silent} {
		_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"))
		require.NoError(t, err)
	}
	spans := b.exp.GetSpans()
	span := spanByName(spans, "p/told")
	require.Len(t, span, 1)
	for k, v := range map[string]any{
		engine.AttrGenAIRespID: "msg_01", engine.AttrGenAIRespMdl: "p-2026-11-01", engine.AttrProviderRequestID: "req_011",
	} {
		got, ok := attr(span[0], k)
		require.True(t, ok, k)
		require.Equal(t, v, got, k)
	}
	span = spanByName(spans, "p/silent")
	require.Len(t, span, 1)
	for _, k := range []string{engine.AttrGenAIRespID, engine.AttrGenAIRespMdl, engine.AttrProviderRequestID} {
		_, ok := attr(span[0], k)
		require.False(t, ok, k)
	}
}
