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

func TestRegistryKeysListingAndSchemas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	weather(b, nil)
	scripted.Define(b.r, "scripted/m", scripted.Text("x"))
	engine.DefineFlow(b.r, "travel", func(ctx context.Context, in WeatherIn) (string, error) { return in.City, nil })

	var keys []string
	for _, d := range b.r.List() {
		keys = append(keys, d.Key)
	}
	require.Equal(t, []string{"/flow/travel", "/model/scripted/m", "/tool/getWeather", "/util/generate"}, keys)

	tool := b.r.Lookup("/tool/getWeather").Desc()
	require.Equal(t, engine.ActionTypeTool, tool.Type)
	require.JSONEq(t, `{"type":"object","properties":{"city":{"type":"string"}},"additionalProperties":false,"required":["city"]}`, string(tool.InputSchema.Raw()))
	require.NotNil(t, tool.OutputSchema)
	js, err := json.Marshal(b.r.List())
	require.NoError(t, err)
	require.Contains(t, string(js), `"inputSchema":{"properties":{"city"`)
}

func TestToolLookupTriesPrefixesInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v1 := weather(b, nil)
	require.NoError(t, b.r.Register(&renamed{Tool: v1, key: "/tool.v2/getWeather"}))
	require.NoError(t, b.r.Register(&renamed{Tool: v1, key: "/prompt/onlyPrompt"}))
	require.NoError(t, b.r.Register(&renamed{Tool: v1, key: "/dynamic-action-provider/dyn"}))

	got, ok := b.r.LookupTool("getWeather")
	require.True(t, ok)
	require.Equal(t, "/tool/getWeather", engine.ToolDesc(got).Key, "/tool/ wins over /tool.v2/")
	got, ok = b.r.LookupTool("/tool.v2/getWeather")
	require.True(t, ok, "the name itself is tried first")
	require.Equal(t, "/tool.v2/getWeather", engine.ToolDesc(got).Key)
	got, ok = b.r.LookupTool("onlyPrompt")
	require.True(t, ok)
	require.Equal(t, "/prompt/onlyPrompt", engine.ToolDesc(got).Key)
	got, ok = b.r.LookupTool("dyn")
	require.True(t, ok)
	require.Equal(t, "/dynamic-action-provider/dyn", engine.ToolDesc(got).Key)
	_, ok = b.r.LookupTool("nope")
	require.False(t, ok)
}

type renamed struct {
	engine.Tool
	key string
}

func (r *renamed) Desc() *engine.ActionDesc {
	d := *engine.ToolDesc(r.Tool)
	d.Key = r.key
	return &d
}

func TestToolDefinitionHasShortNameAndOriginalName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	engine.DefineTool(b.r, "ns/lookup", "d", func(tc *engine.ToolContext, in WeatherIn) (string, error) { return "ok", nil })
	weather(b, nil)
	m := scripted.Define(b.r, "m", scripted.Reply(call("lookup", "r1", map[string]any{"city": "x"})), scripted.Text("done"))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"),
		engine.WithToolNames("ns/lookup", "getWeather"))
	require.NoError(t, err)
	defs := m.Requests()[0].Tools
	require.Equal(t, "lookup", defs[0].Name)
	require.Equal(t, "ns/lookup", defs[0].Metadata[engine.MetaOriginalName])
	require.Equal(t, "getWeather", defs[1].Name)
	require.NotContains(t, defs[1].Metadata, engine.MetaOriginalName)
}

func TestTypedToolValidatesInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := 0
	w := weather(b, &calls)
	for range 3 {
		m := scripted.New("m", scripted.Reply(call("getWeather", "", map[string]any{"city": "Paris"})), scripted.Text("ok"))
		_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w),
			engine.WithOutputType[WeatherOut](), engine.WithOutputFormat("text"))
		require.NoError(t, err)
	}
	require.Equal(t, 3, calls)

	// Invalid input fails with INVALID_ARGUMENT naming the field.
	m := scripted.New("m", scripted.Reply(call("getWeather", "r9", map[string]any{"town": "Paris"})))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w))
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))
	var ve *engine.ValidationError
	require.True(t, errors.As(err, &ve))
	require.Contains(t, err.Error(), `"city"`)
	require.Contains(t, err.Error(), "r9")
}

func TestToolOutputIsValidatedAgainstAnExplicitSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bad := engine.DefineTool(b.r, "bad", "d", func(tc *engine.ToolContext, in map[string]any) (map[string]any, error) {
		return map[string]any{"n": "not a number"}, nil
	}, engine.WithToolOutputSchema(`{"type":"object","properties":{"n":{"type":"number"}}}`))
	m := scripted.New("m", scripted.Reply(call("bad", "r1", map[string]any{})))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(bad))
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))
	require.Contains(t, err.Error(), `"n"`)
}

func TestDuplicateToolNamesAreInvalidArgument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := weather(b, nil)
	other := ai.NewTool("x/getWeather", "d", func(tc *engine.ToolContext, in WeatherIn) (int, error) { return 1, nil })
	m := scripted.New("m", scripted.Text("x"))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w, other))
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))
	require.Zero(t, m.Calls())
}

func TestUnknownToolIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := scripted.New("m", scripted.Reply(call("nope", "r1", nil)))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(weather(b, nil)))
	require.Equal(t, engine.StatusNotFound, statusOf(t, err))
	_, err = engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithToolNames("nope"))
	require.Equal(t, engine.StatusNotFound, statusOf(t, err))
}

func TestMultipartToolReturnsOutputAndContent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mp := engine.DefineMultipartTool(b.r, "snapshot", "d", func(tc *engine.ToolContext, in WeatherIn) (*engine.ToolOutput, error) {
		return &engine.ToolOutput{Output: map[string]any{"ok": true}, Content: []*engine.Part{engine.NewMediaPart("image/png", "data:image/png;base64,AA==")}}, nil
	})
	require.Equal(t, "/tool.v2/snapshot", engine.ToolDesc(mp).Key)
	m := scripted.New("m", scripted.Reply(call("snapshot", "r1", map[string]any{"city": "x"})), scripted.Text("done"))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithToolNames("snapshot"))
	require.NoError(t, err)
	toolMsg := m.Requests()[1].Messages[2]
	tr := toolMsg.Content[0].ToolResponse
	require.JSONEq(t, `{"ok":true}`, string(tr.Output.(json.RawMessage)))
	require.Len(t, tr.Content, 1)
	require.Equal(t, "image/png", tr.Content[0].Media.ContentType)
}

func TestRegistry_RunByKeyAndValidateToolPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	weather(b, nil)
	out, err := b.r.Run(context.Background(), "/tool/getWeather", json.RawMessage(`{"city":"Rome"}`), nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"tempC":4}`, string(out))
	_, err = b.r.Run(context.Background(), "/flow/none", nil, nil)
	require.Equal(t, engine.StatusNotFound, statusOf(t, err))

	err = b.r.ValidateToolOutput("getWeather", json.RawMessage(`{"tempC":"hot"}`))
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))
	var ve *engine.ValidationError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, "tempC", ve.Fields[0].Field)
	require.Equal(t, "/tempC", ve.Fields[0].Path)
	err = b.r.ValidateToolInput("getWeather", json.RawMessage(`{}`))
	require.True(t, errors.As(err, &ve))
	require.Equal(t, "city", ve.Fields[0].Field)
	require.NoError(t, b.r.ValidateToolInput("getWeather", json.RawMessage(`{"city":"Oslo"}`)))
}

func (r *renamed) RunJSON(ctx context.Context, input json.RawMessage, cb engine.StreamFunc) (json.RawMessage, error) {
	return nil, nil
}
