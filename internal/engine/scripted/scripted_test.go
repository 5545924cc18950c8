package scripted_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScriptedModelIsDeterministic(t *testing.T) {
	t.Parallel()
	r := engine.NewRegistry()
	m := scripted.Define(r, "scripted/demo",
		scripted.Text("hello world").WithChunks([]*engine.Part{engine.NewTextPart("hello ")}, []*engine.Part{engine.NewTextPart("world")}).WithUsage(3, 2),
		scripted.Text("second"))
	var chunks []string
	resp, err := engine.Generate(context.Background(), r, engine.WithModelName("scripted/demo"), engine.WithPrompt("hi"),
		engine.WithStreaming(func(ctx context.Context, c *engine.ModelResponseChunk) error {
			chunks = append(chunks, c.Text())
			return nil
		}))
	require.NoError(t, err)
	require.Equal(t, "hello world", resp.Text())
	require.Equal(t, []string{"hello ", "world"}, chunks)
	require.Equal(t, 5, resp.Usage.TotalTokens)

	resp, err = engine.Generate(context.Background(), r, engine.WithModel(m), engine.WithPrompt("again"))
	require.NoError(t, err)
	require.Equal(t, "second", resp.Text())
	require.Len(t, m.Requests(), 2)

	_, err = engine.Generate(context.Background(), r, engine.WithModel(m), engine.WithPrompt("more"))
	require.Equal(t, engine.StatusFailedPrecondition, engine.StatusOf(err), "an exhausted script fails loudly")

	loop := scripted.New("l", scripted.Text("a"), scripted.Text("b")).Loop()
	var got []string
	for range 3 {
		resp, err := engine.Generate(context.Background(), r, engine.WithModel(loop), engine.WithPrompt("x"))
		require.NoError(t, err)
		got = append(got, resp.Text())
	}
	require.Equal(t, []string{"a", "b", "a"}, got)
}

func TestPerConversationAnswersByHistoryNotByCallOrder(t *testing.T) {
	t.Parallel()
	m := scripted.New("conv", scripted.Text("first"), scripted.Text("second")).PerConversation()
	ctx := context.Background()
	user := &engine.Message{Role: engine.RoleUser, Content: []*engine.Part{engine.NewTextPart("q")}}
	model := &engine.Message{Role: engine.RoleModel, Content: []*engine.Part{engine.NewTextPart("a")}}
	for range 3 {
		r, err := m.Generate(ctx, &engine.ModelRequest{Messages: []*engine.Message{user}}, nil)
		require.NoError(t, err)
		require.Equal(t, "first", r.Text(), "the same conversation always gets the same turn")
	}
	r, err := m.Generate(ctx, &engine.ModelRequest{Messages: []*engine.Message{user, model, user}}, nil)
	require.NoError(t, err)
	require.Equal(t, "second", r.Text())
	_, err = m.Generate(ctx, &engine.ModelRequest{Messages: []*engine.Message{user, model, user, model}}, nil)
	require.Equal(t, engine.StatusFailedPrecondition, engine.StatusOf(err))

	fn := scripted.NewFunc("fn", func(req *engine.ModelRequest) (scripted.Turn, error) {
		return scripted.Text(req.Messages[len(req.Messages)-1].Text()), nil
	})
	r, err = fn.Generate(ctx, &engine.ModelRequest{Messages: []*engine.Message{user}}, nil)
	require.NoError(t, err)
	require.Equal(t, "q", r.Text())
}
