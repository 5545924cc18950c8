package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

// TestParity_MaxTurnsZeroAbortsBeforeAnyTool follows seed 001 (generate and the tool loop), §3.3
// "出口 B —— 循环上限 maxTurns (action.ts:514)": maxIterations = rawRequest.maxTurns ?? 5, and
// currentTurn + 1 > maxIterations throws ABORTED before the turn's tools run. With an explicit 0
// the first tool request is ABORTED at turn 0 and no tool runs; ?? keeps 0, only an absent field
// (or a Go zero value) means 5.
func TestParity_MaxTurnsZeroAbortsBeforeAnyTool(t *testing.T) {
	t.Parallel()

	t.Run("WithMaxTurns(0)", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		calls := 0
		w := weather(b, &calls)
		m := scripted.New("m", scripted.Reply(call("getWeather", "r0", map[string]any{"city": "x"})), scripted.Text("done"))
		_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w), engine.WithMaxTurns(0))
		require.Equal(t, engine.StatusAborted, statusOf(t, err))
		require.Contains(t, err.Error(), "(0)")
		var ee *engine.Error
		require.True(t, errors.As(err, &ee))
		require.Equal(t, "r0", ee.Response.ToolRequests()[0].Ref, "ABORTED carries the response that asked")
		require.Equal(t, 1, m.Calls())
		require.Zero(t, calls, "no tool runs")
	})

	t.Run("WithMaxTurns(0) without tool requests answers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := scripted.New("m", scripted.Text("done"))
		resp, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithMaxTurns(0))
		require.NoError(t, err)
		require.Equal(t, "done", resp.Text())
	})

	for _, tt := range []struct {
		name      string
		maxTurns  string // the JSON field, or "" when absent
		wantErr   bool
		wantTools int
	}{
		{name: "json maxTurns 0", maxTurns: `,"maxTurns":0`, wantErr: true, wantTools: 0},
		{name: "json maxTurns absent", maxTurns: "", wantTools: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			calls := 0
			weather(b, &calls)
			scripted.Define(b.r, "m", scripted.Reply(call("getWeather", "r0", map[string]any{"city": "x"})), scripted.Text("done"))
			_, err := b.r.Run(context.Background(), "/util/generate",
				json.RawMessage(`{"model":"m","messages":[{"role":"user","content":[{"text":"q"}]}],"tools":["getWeather"]`+tt.maxTurns+`}`), nil)
			if tt.wantErr {
				require.Equal(t, engine.StatusAborted, statusOf(t, err))
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.wantTools, calls)
		})
	}

	t.Run("wire form round-trips an explicit 0", func(t *testing.T) {
		t.Parallel()
		var opts engine.GenerateActionOptions
		require.NoError(t, json.Unmarshal([]byte(`{"messages":[],"maxTurns":0}`), &opts))
		require.Equal(t, 0, opts.TurnLimit())
		out, err := json.Marshal(&opts)
		require.NoError(t, err)
		require.JSONEq(t, `{"messages":[],"maxTurns":0}`, string(out))

		var absent engine.GenerateActionOptions
		require.NoError(t, json.Unmarshal([]byte(`{"messages":[]}`), &absent))
		require.Equal(t, engine.DefaultMaxTurns, absent.TurnLimit())
		out, err = json.Marshal(absent)
		require.NoError(t, err)
		require.JSONEq(t, `{"messages":[]}`, string(out))

		require.Equal(t, engine.DefaultMaxTurns, (&engine.GenerateActionOptions{}).TurnLimit(), "a Go zero value keeps the default")
		require.Equal(t, 3, (&engine.GenerateActionOptions{MaxTurns: 3}).TurnLimit())
	})
}

// TestParity_ToolObjectsReachGenerateMiddlewareAsActionRefs follows seed 001 (generate and the tool
// loop), §3.1 "选项规整": toGenerateActionOptions turns tool objects into ref strings with
// toolsToActionRefs (generate.ts:303), "形如 /tool/getWeather", so generate-level middleware sees
// serializable refs. Names given as strings stay as given; a multipart tool's ref is its
// /tool.v2/ key.
func TestParity_ToolObjectsReachGenerateMiddlewareAsActionRefs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := weather(b, nil)
	dyn := ai.NewTool("lookup", "A dynamic tool.", func(tc *engine.ToolContext, in WeatherIn) (string, error) { return in.City, nil })
	mp := engine.DefineMultipartTool(b.r, "snapshot", "A multipart tool.", func(tc *engine.ToolContext, in WeatherIn) (*engine.ToolOutput, error) {
		return &engine.ToolOutput{Output: in.City}, nil
	})
	engine.DefineTool(b.r, "named", "Given by name.", func(tc *engine.ToolContext, in WeatherIn) (string, error) { return "", nil })
	m := scripted.New("m", scripted.Reply(call("getWeather", "r0", map[string]any{"city": "x"})), scripted.Text("done"))
	var seen [][]string
	mw := &engine.Middleware{Generate: func(ctx context.Context, turn *engine.GenerateTurn, next engine.GenerateNext) (*engine.ModelResponse, error) {
		seen = append(seen, append([]string(nil), turn.Request.Tools...))
		return next(ctx, turn)
	}}
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"),
		engine.WithToolNames("named"), engine.WithTools(w, dyn, mp), engine.WithMiddleware(mw))
	require.NoError(t, err)
	want := []string{"named", "/tool/getWeather", "/tool/lookup", "/tool.v2/snapshot"}
	require.Equal(t, [][]string{want, want}, seen, "every turn's options carry the refs")
	require.Len(t, m.Requests()[0].Tools, 4, "the model is offered each tool once")
}

// TestParity_NonMultipartToolAlsoUnderToolV2 follows seed 000 (tools, interrupts, resume), §3.1
// "一个反直觉的细节:注册两次" (js/ai/src/tool.ts:341-348 defineTool): a non-multipart tool is
// registered as tool and as tool.v2, the latter built by basicToolV2 (tool.ts:602), which wraps the
// ToolFn's result as { output: ... }. Short names still resolve to /tool/ first (lookupToolByName),
// an explicit /tool.v2/ registration wins over the implicit one, and catalogues list the tool once.
func TestParity_NonMultipartToolAlsoUnderToolV2(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := 0
	weather(b, &calls)
	engine.DefineInterrupt[WeatherIn, WeatherOut](b.r, "confirm", "Asks a person.")

	out, err := b.r.Run(context.Background(), "/tool.v2/getWeather", json.RawMessage(`{"city":"Lima"}`), nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"output":{"tempC":4}}`, string(out))
	out, err = b.r.Run(context.Background(), "/tool/getWeather", json.RawMessage(`{"city":"Lima"}`), nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"tempC":4}`, string(out), "the /tool/ form returns the bare output")
	_, err = b.r.Run(context.Background(), "/tool.v2/getWeather", json.RawMessage(`{"town":"Lima"}`), nil)
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))

	v2 := b.r.Lookup("/tool.v2/getWeather").Desc()
	require.Equal(t, engine.ActionTypeToolV2, v2.Type)
	require.Equal(t, "getWeather", v2.Name)
	require.NoError(t, v2.OutputSchema.ValidateJSON(json.RawMessage(`{"output":{"tempC":1}}`)))
	require.NotNil(t, b.r.Lookup("/tool.v2/confirm"), "defineInterrupt goes through defineTool")

	got, ok := b.r.LookupTool("getWeather")
	require.True(t, ok)
	require.Equal(t, "/tool/getWeather", engine.ToolDesc(got).Key)
	got, ok = b.r.LookupTool("/tool.v2/getWeather")
	require.True(t, ok)
	require.Equal(t, "/tool.v2/getWeather", engine.ToolDesc(got).Key)

	// Generate with the /tool.v2/ ref: the model sees the short name and the plain output.
	m := scripted.New("m", scripted.Reply(call("getWeather", "r0", map[string]any{"city": "Oslo"})), scripted.Text("done"))
	_, err = engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithToolNames("/tool.v2/getWeather"))
	require.NoError(t, err)
	require.Equal(t, "getWeather", m.Requests()[0].Tools[0].Name)
	require.JSONEq(t, `{"tempC":4}`, string(m.Requests()[1].Messages[2].Content[0].ToolResponse.Output.(json.RawMessage)))
	require.Equal(t, 3, calls)

	mp := engine.DefineMultipartTool(b.r, "snapshot", "Multipart.", func(tc *engine.ToolContext, in WeatherIn) (*engine.ToolOutput, error) {
		return &engine.ToolOutput{Output: in.City}, nil
	})
	require.Equal(t, "/tool.v2/snapshot", engine.ToolDesc(mp).Key)
	require.Nil(t, b.r.Lookup("/tool/snapshot"), "a multipart tool is registered once")

	var keys []string
	for _, d := range b.r.List() {
		keys = append(keys, d.Key)
	}
	require.Equal(t, []string{"/tool.v2/snapshot", "/tool/confirm", "/tool/getWeather", "/util/generate"}, keys)
}

// TestParity_RestartedToolSpanRecordsResumedMetadata follows seed 000 (tools, interrupts, resume),
// §3.4 "重启后怎么真跑?": toRunOptions (resolve-tool-requests.ts:71) carries metadata.resumed into
// the run options, and recordResumedMetadata (tool.ts:566) records it in the trace, which Genkit
// does with setCustomMetadataAttributes({resumed: JSON.stringify(resumed)}): the tool span's
// genkit:metadata:resumed. A first run records nothing.
func TestParity_RestartedToolSpanRecordsResumedMetadata(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		metadata map[string]any
		want     string
	}{
		{name: "with metadata", metadata: map[string]any{"by": "alice"}, want: `{"by":"alice"}`},
		{name: "without metadata", want: `true`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setupHITL(t)
			resp, _ := h.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "bob", "amount": 500}))
			first := spanByName(h.exp.GetSpans(), "transferMoney")
			require.Len(t, first, 1)
			_, ok := attr(first[0], engine.AttrResumed)
			require.False(t, ok, "the interrupted first run is not resumed")

			restart := h.transfer.Restart(resp.Interrupts()[0], &engine.RestartOptions{ResumedMetadata: tt.metadata})
			_, err := engine.Generate(context.Background(), h.r, engine.WithModel(scripted.New("m", scripted.Text("sent"))),
				engine.WithMessages(resp.History()...), engine.WithTools(h.transfer), engine.WithRestart(restart))
			require.NoError(t, err)
			spans := spanByName(h.exp.GetSpans(), "transferMoney")
			require.Len(t, spans, 2)
			got, ok := attr(spans[1], engine.AttrResumed)
			require.True(t, ok)
			require.JSONEq(t, tt.want, got.(string))
		})
	}
}

type TopicIn struct {
	Topic string `json:"topic"`
}

// TestParity_PromptAsToolIsFoundUnderPromptAndTransfers follows seed 000 (tools, interrupts,
// resume), §3.1 "查表反查" (lookupToolByName, js/ai/src/tool.ts:241): a short tool name is tried
// as /tool/, /tool.v2/, then /prompt/${name}, "被当工具用的 prompt"; and §7, prompts used as tools
// through resolveTools (tool.ts:227). What the call does is Genkit's resolveToolRequest for a
// prompt action (resolve-tool-requests.ts, isPromptAction): the call is answered "transferred to
// <name>" and applyTransferPreamble (generate/action.ts) puts the rendered prompt, tagged
// metadata.preamble, in front of the next turn's history with the prompt's model and tools.
func TestParity_PromptAsToolIsFoundUnderPromptAndTransfers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	refunds := 0
	engine.DefineTool(b.r, "refund", "Refunds a bill.", func(tc *engine.ToolContext, in TopicIn) (string, error) {
		refunds++
		return "refunded", nil
	})
	weather(b, nil)
	billingModel := scripted.Define(b.r, "billing/model", scripted.Reply(call("refund", "f0", map[string]any{"topic": "x"})), scripted.Text("refund done"))
	engine.DefinePrompt(b.r, "billing", "Hands the conversation to billing.", func(in TopicIn) (string, error) {
		return "Billing question about " + in.Topic, nil
	}, engine.PromptConfig{Model: "billing/model", System: "You handle billing.", Tools: []string{"refund"}})

	got, ok := b.r.LookupTool("billing")
	require.True(t, ok)
	require.Equal(t, "/prompt/billing", engine.ToolDesc(got).Key)
	require.Equal(t, "billing", got.Definition().Name)

	front := scripted.New("front", scripted.Reply(call("billing", "b0", map[string]any{"topic": "a refund"})))
	resp, err := engine.Generate(context.Background(), b.r, engine.WithModel(front), engine.WithSystem("You triage."),
		engine.WithPrompt("my bill is wrong"), engine.WithToolNames("billing", "getWeather"))
	require.NoError(t, err)
	require.Equal(t, "refund done", resp.Text())
	require.Equal(t, 1, front.Calls())
	require.Equal(t, 2, billingModel.Calls(), "the turns after the transfer use the prompt's model")
	require.Equal(t, 1, refunds)
	require.Equal(t, "getWeather", front.Requests()[0].Tools[1].Name)

	req := billingModel.Requests()[0]
	require.Len(t, req.Tools, 1, "the prompt's tools replace the request's")
	require.Equal(t, "refund", req.Tools[0].Name)
	var roles []engine.Role
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []engine.Role{engine.RoleSystem, engine.RoleUser, engine.RoleSystem, engine.RoleUser, engine.RoleModel, engine.RoleTool}, roles)
	require.Equal(t, "You handle billing.", req.Messages[0].Text())
	require.Equal(t, "Billing question about a refund", req.Messages[1].Text())
	require.Equal(t, true, req.Messages[0].Metadata[engine.MetaPreamble])
	require.Equal(t, true, req.Messages[1].Metadata[engine.MetaPreamble])
	require.Nil(t, req.Messages[2].Metadata[engine.MetaPreamble], "the caller's own system message stays, untagged")
	require.Equal(t, "transferred to billing", req.Messages[5].Content[0].ToolResponse.Output)

	prompts := spanByName(b.exp.GetSpans(), "billing")
	require.Len(t, prompts, 1)
	sub, _ := attr(prompts[0], engine.AttrSubtype)
	require.Equal(t, "prompt", sub)

	// Two transfers in one turn are INVALID_ARGUMENT, as in Genkit.
	engine.DefinePrompt(b.r, "support", "Support.", func(in TopicIn) (string, error) { return in.Topic, nil }, engine.PromptConfig{})
	twice := scripted.New("twice", scripted.Reply(call("billing", "b0", map[string]any{"topic": "x"}), call("support", "s0", map[string]any{"topic": "y"})))
	_, err = engine.Generate(context.Background(), b.r, engine.WithModel(twice), engine.WithPrompt("q"), engine.WithToolNames("billing", "support"))
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))

	_, err = got.RunTool(&engine.ToolContext{Context: context.Background()}, json.RawMessage(`{"topic":"x"}`))
	require.Equal(t, engine.StatusFailedPrecondition, statusOf(t, err), "a prompt tool runs only as a transfer")
}
