package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

func TestFlowCallsGenerateAndTheirSpansNest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := weather(b, nil)
	m := scripted.Define(b.r, "m", scripted.Reply(call("getWeather", "r1", map[string]any{"city": "Oslo"})), scripted.Text("cold"))
	f := engine.DefineFlow(b.r, "travelAgent", func(ctx context.Context, in WeatherIn) (string, error) {
		resp, err := engine.Generate(ctx, b.r, engine.WithModelName("m"), engine.WithPrompt("weather in "+in.City), engine.WithTools(w))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	_ = m
	out, err := b.r.Run(engine.WithRunID(context.Background(), "run-9"), "/flow/travelAgent", json.RawMessage(`{"city":"Oslo"}`), nil)
	require.NoError(t, err)
	require.JSONEq(t, `"cold"`, string(out))
	_, err = b.r.Run(context.Background(), "/flow/travelAgent", json.RawMessage(`{"town":"Oslo"}`), nil)
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))

	spans := b.exp.GetSpans()
	flow := spanByName(spans, "travelAgent")[0]
	sub, _ := attr(flow, engine.AttrSubtype)
	require.Equal(t, "flow", sub)
	root, _ := attr(flow, engine.AttrIsRoot)
	require.Equal(t, true, root)
	tool := spanByName(spans, "getWeather")[0]
	path, _ := attr(tool, engine.AttrPath)
	require.Equal(t, "/{travelAgent,t:action,s:flow}/{generate,t:util}/{getWeather,t:action,s:tool}", path)
	require.Equal(t, flow.SpanContext.TraceID(), tool.SpanContext.TraceID())
	_, isRoot := attr(tool, engine.AttrIsRoot)
	require.False(t, isRoot)
	require.Equal(t, "travelAgent", f.Name())
}

func TestStreamingFlowSendsChunksToItsCaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type CountIn struct {
		From int `json:"from"`
	}
	f := engine.DefineStreamingFlow(b.r, "countdown", func(ctx context.Context, in CountIn, send func(context.Context, int) error) (string, error) {
		for i := in.From; i > 0; i-- {
			if err := send(ctx, i); err != nil {
				return "", err
			}
		}
		return "liftoff", nil
	})
	var got []int
	out, err := f.Stream(context.Background(), CountIn{From: 3}, func(_ context.Context, i int) error { got = append(got, i); return nil })
	require.NoError(t, err)
	require.Equal(t, "liftoff", out)
	require.Equal(t, []int{3, 2, 1}, got)

	var raw []string
	res, err := b.r.Run(context.Background(), "/flow/countdown", json.RawMessage(`{"from":2}`), func(ctx context.Context, c json.RawMessage) error {
		raw = append(raw, string(c))
		return nil
	})
	require.NoError(t, err)
	require.JSONEq(t, `"liftoff"`, string(res))
	require.Equal(t, []string{"2", "1"}, raw)
	require.Equal(t, true, f.Desc().Metadata["streaming"])

	_, err = f.Stream(context.Background(), CountIn{From: 3}, func(context.Context, int) error { return fmt.Errorf("stop") })
	require.Error(t, err)
}

func TestUtilGenerateActionRunsByKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	weather(b, nil)
	scripted.Define(b.r, "m", scripted.Reply(call("getWeather", "r1", map[string]any{"city": "x"})), scripted.Text("done"))
	var chunks int
	out, err := b.r.Run(context.Background(), "/util/generate",
		json.RawMessage(`{"model":"m","messages":[{"role":"user","content":[{"text":"q"}]}],"tools":["getWeather"],"maxTurns":2}`),
		func(ctx context.Context, c json.RawMessage) error { chunks++; return nil })
	require.NoError(t, err)
	var resp engine.ModelResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Equal(t, "done", resp.Text())
	require.Equal(t, 3, chunks)
}
