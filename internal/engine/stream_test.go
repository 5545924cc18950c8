package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

func TestChunksCarryIndexRoleAndPreviousChunks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := weather(b, nil)
	m := scripted.New("m",
		scripted.Reply(engine.NewTextPart("let me check"), call("getWeather", "r1", map[string]any{"city": "x"})).
			WithChunks([]*engine.Part{engine.NewTextPart("let me ")}, []*engine.Part{engine.NewTextPart("check")}, []*engine.Part{call("getWeather", "r1", map[string]any{"city": "x"})}),
		scripted.Text("sunny").WithChunks([]*engine.Part{engine.NewTextPart("sun")}, []*engine.Part{engine.NewTextPart("ny")}),
	)
	var got []*engine.ModelResponseChunk
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w),
		engine.WithStreaming(func(ctx context.Context, c *engine.ModelResponseChunk) error { got = append(got, c); return nil }))
	require.NoError(t, err)
	type ir struct {
		index int
		role  engine.Role
	}
	var seq []ir
	for _, c := range got {
		seq = append(seq, ir{c.Index, c.Role})
	}
	require.Equal(t, []ir{{0, "model"}, {0, "model"}, {0, "model"}, {1, "tool"}, {2, "model"}, {2, "model"}}, seq)
	for i, c := range got {
		require.Len(t, c.PreviousChunks, i, "chunk %d sees all chunks before it", i)
	}
	require.Equal(t, "getWeather", got[3].Content[0].ToolResponse.Name, "tool results stream with role tool")
	require.Equal(t, "sunny", got[5].Accumulated())
	require.Equal(t, "let me check", got[1].Accumulated())
}

func TestStreamCallbackErrorAbortsGenerate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := 0
	w := weather(b, &calls)
	stop := errors.New("client went away")
	m := scripted.New("m", scripted.Reply(call("getWeather", "r1", map[string]any{"city": "x"})), scripted.Text("never"))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w),
		engine.WithStreaming(func(ctx context.Context, c *engine.ModelResponseChunk) error { return stop }))
	require.ErrorIs(t, err, stop)
	require.Zero(t, calls)
	require.Equal(t, 1, m.Calls())
}
