package engine_test

import (
	"context"
	oteltrace "go.opentelemetry.io/otel/trace"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

// A durable runner resumes flows whose code it does not control: the flow calls Generate with its
// own prompt, and the runner's context options replace the conversation with the recorded history,
// answer the interrupts, and add its hooks.
func TestDurable_ContextOptionsResumeAFlowFromRecordedHistory(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	m := scripted.Define(h.r, "durable", scripted.Reply(call("transferMoney", "t1", map[string]any{"to": "bob", "amount": 500})), scripted.Text("sent"))
	flow := engine.DefineFlow(h.r, "pay", func(ctx context.Context, to string) (string, error) {
		resp, err := engine.Generate(ctx, h.r, engine.WithModelName("durable"), engine.WithPrompt("pay "+to), engine.WithTools(h.transfer))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})

	var recorded []*engine.Message
	var final *engine.ModelResponse
	hooks := &engine.Hooks{
		OnMessage: func(ctx context.Context, ev *engine.MessageEvent) error {
			if ev.Index < len(recorded) {
				recorded[ev.Index] = ev.Message
			} else {
				recorded = append(recorded, ev.Message)
			}
			return nil
		},
		OnResponse: func(ctx context.Context, r *engine.ModelResponse) error { final = r; return nil },
	}
	ctx := engine.WithContextOptions(context.Background(), engine.WithHooks(hooks))
	_, err := flow.Run(ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, engine.FinishReasonInterrupted, final.FinishReason)
	require.Len(t, final.History(), 2)

	history := final.History()
	require.Len(t, recorded, 2, "hooks saw the prompt and the interrupted model message")
	require.Equal(t, engine.RoleUser, recorded[0].Role)
	ctx = engine.WithContextOptions(context.Background(), engine.WithHooks(hooks), engine.WithHistory(history...),
		engine.WithRestart(engine.RestartPart("transferMoney", "t1", nil, map[string]any{"decision": "approved"})))
	out, err := flow.Run(ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, "sent", out)
	require.EqualValues(t, 2, h.runs.Load(), "the restarted tool ran again, approved")
	require.Equal(t, "approved", h.lastCtx.Load().Resumed["decision"])
	reqs := m.Requests()
	require.Len(t, reqs[len(reqs)-1].Messages, 3, "the resumed call sees the recorded history, not the flow's prompt twice")
	require.Len(t, recorded, 4, "hooks saw the resumed tool message and the final answer")
}

func TestDurable_DenyPartSkipsTheOutputSchema(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	resp, _ := h.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "bob", "amount": 500}))
	m := scripted.New("m", scripted.Text("ok, not sent"))
	denial := map[string]any{"denied": true, "reason": "too much"}
	out, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithMessages(resp.History()...),
		engine.WithTools(h.transfer), engine.WithRespond(engine.DenyPart("transferMoney", "t1", denial)))
	require.NoError(t, err, "a denial does not have to match the tool's output schema")
	require.Equal(t, "ok, not sent", out.Text())
	tool := m.Requests()[0].Messages[2]
	require.Equal(t, denial, tool.Content[0].ToolResponse.Output)
	require.EqualValues(t, 1, h.runs.Load(), "a denied tool does not run")

	_, err = engine.Generate(context.Background(), h.r, engine.WithModel(scripted.New("m")), engine.WithMessages(resp.History()...),
		engine.WithTools(h.transfer), engine.WithRespond(engine.RespondPart("transferMoney", "t1", denial)))
	require.Equal(t, engine.StatusInvalidArgument, engine.StatusOf(err), "a plain respond is still validated")
}

func TestDurable_HooksFromCallerAndContextBothRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var a, c int
	ctx := engine.WithContextOptions(context.Background(), engine.WithHooks(&engine.Hooks{
		OnResponse: func(context.Context, *engine.ModelResponse) error { c++; return nil },
	}))
	_, err := engine.Generate(ctx, b.r, engine.WithModel(scripted.New("m", scripted.Text("hi"))), engine.WithPrompt("x"),
		engine.WithHooks(&engine.Hooks{OnResponse: func(context.Context, *engine.ModelResponse) error { a++; return nil }}))
	require.NoError(t, err)
	require.Equal(t, 1, a)
	require.Equal(t, 1, c)
}

func TestDurable_RootSpanCarriesRunIDAtStartAndResumeLinks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	interrupted := oteltrace.SpanContext{}.WithTraceID(oteltrace.TraceID{1}).WithSpanID(oteltrace.SpanID{2})
	ctx := engine.WithRunID(context.Background(), "run-9")
	ctx = engine.WithSpanLinks(ctx, oteltrace.Link{SpanContext: interrupted})
	_, err := engine.Generate(ctx, b.r, engine.WithModel(scripted.New("m", scripted.Text("hi"))), engine.WithPrompt("x"))
	require.NoError(t, err)
	spans := b.exp.GetSpans()
	require.NotEmpty(t, spans)
	var root bool
	for _, s := range spans {
		found := false
		for _, a := range s.Attributes {
			if string(a.Key) == engine.AttrRunID && a.Value.AsString() == "run-9" {
				found = true
			}
		}
		require.True(t, found, "span %s carries the run id", s.Name)
		if !s.Parent.IsValid() {
			root = true
			require.Len(t, s.Links, 1, "the root span links to the interrupted turn")
			require.Equal(t, interrupted.SpanID(), s.Links[0].SpanContext.SpanID())
		} else {
			require.Empty(t, s.Links)
		}
	}
	require.True(t, root)
}

func TestPromptRendersAndGenerates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := 0
	w := weather(b, &calls)
	scripted.Define(b.r, "prompt/model", scripted.Reply(call("getWeather", "w1", map[string]any{"city": "Oslo"})), scripted.Text("cold")).PerConversation()
	engine.DefinePrompt(b.r, "forecast", "Asks for a forecast.", func(in struct {
		City string `json:"city"`
	}) (string, error) {
		return "Weather in " + in.City + "?", nil
	}, engine.PromptConfig{Model: "prompt/model", System: "Be brief.", Tools: []string{w.Definition().Name}})
	out, err := b.r.Run(context.Background(), "/prompt/forecast", []byte(`{"city":"Oslo"}`), nil)
	require.NoError(t, err)
	require.Contains(t, string(out), `"text":"cold"`)
	require.Equal(t, 1, calls, "the prompt's tool ran")
	_, err = b.r.Run(context.Background(), "/prompt/forecast", []byte(`{"town":"Oslo"}`), nil)
	require.Equal(t, engine.StatusInvalidArgument, engine.StatusOf(err), "the input is checked against the schema")
	var promptSpan bool
	for _, s := range b.exp.GetSpans() {
		if s.Name == "forecast" {
			promptSpan = true
		}
	}
	require.True(t, promptSpan, "a prompt span wraps the generate")
}
