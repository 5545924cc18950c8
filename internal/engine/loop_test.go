package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

func TestLoopEndsWhenTheModelRequestsNoTools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := scripted.New("m", scripted.Text("hello").WithUsage(3, 2))
	resp, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("hi"))
	require.NoError(t, err)
	require.Equal(t, "hello", resp.Text())
	require.Equal(t, engine.FinishReasonStop, resp.FinishReason)
	require.Equal(t, "hi", resp.Request.Messages[0].Text())
}

func TestLoopEndsAtReturnToolRequestsWithoutRunningToolsOrSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := 0
	w := weather(b, &calls)
	m := scripted.New("m", scripted.Reply(engine.NewTextPart("not json"), call("getWeather", "r1", map[string]any{"city": "x"})))
	resp, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w),
		engine.WithReturnToolRequests(true), engine.WithOutputType[WeatherOut]())
	require.NoError(t, err, "the output schema is not checked when tool requests are returned")
	require.Zero(t, calls)
	require.Len(t, resp.ToolRequests(), 1)
}

// TestLoopStopsAtMaxTurnsWhichDefaultsTo5 lays out the seed's table: with the default maxTurns 5,
// the model may ask for tools at turns 0..4 (tools run), and asking again at turn 5 is ABORTED
// before any tool of that turn runs. The model is called at most 6 times, tools run at most 5 rounds.
func TestLoopStopsAtMaxTurnsWhichDefaultsTo5(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lastToolTurn   int // the model asks for a tool at turns 0..lastToolTurn, then answers
		wantAborted    bool
		wantModelCalls int
		wantToolRounds int
	}{
		{lastToolTurn: 0, wantModelCalls: 2, wantToolRounds: 1},
		{lastToolTurn: 1, wantModelCalls: 3, wantToolRounds: 2},
		{lastToolTurn: 2, wantModelCalls: 4, wantToolRounds: 3},
		{lastToolTurn: 3, wantModelCalls: 5, wantToolRounds: 4},
		{lastToolTurn: 4, wantModelCalls: 6, wantToolRounds: 5},
		{lastToolTurn: 5, wantAborted: true, wantModelCalls: 6, wantToolRounds: 5},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("turn%d", tt.lastToolTurn), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			calls := 0
			w := weather(b, &calls)
			var turns []scripted.Turn
			for i := 0; i <= tt.lastToolTurn; i++ {
				turns = append(turns, scripted.Reply(call("getWeather", fmt.Sprint("r", i), map[string]any{"city": "x"})))
			}
			turns = append(turns, scripted.Text("done"))
			m := scripted.New("m", turns...)
			resp, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w))
			require.Equal(t, tt.wantModelCalls, m.Calls())
			require.Equal(t, tt.wantToolRounds, calls)
			if !tt.wantAborted {
				require.NoError(t, err)
				require.Equal(t, "done", resp.Text())
				return
			}
			require.Equal(t, engine.StatusAborted, statusOf(t, err))
			var ee *engine.Error
			require.True(t, errors.As(err, &ee))
			require.NotNil(t, ee.Response, "ABORTED carries the last response")
			require.Equal(t, "r5", ee.Response.ToolRequests()[0].Ref)
		})
	}
}

func TestLoopStopsAtAnExplicitMaxTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := 0
	w := weather(b, &calls)
	m := scripted.New("m", scripted.Reply(call("getWeather", "a", map[string]any{"city": "x"})), scripted.Reply(call("getWeather", "b", map[string]any{"city": "x"})))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w), engine.WithMaxTurns(1))
	require.Equal(t, engine.StatusAborted, statusOf(t, err))
	require.Equal(t, 2, m.Calls())
	require.Equal(t, 1, calls)
}

func TestLoopAppendsTheModelMessageThenTheToolMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := weather(b, nil)
	m := scripted.New("m", scripted.Reply(call("getWeather", "r1", map[string]any{"city": "Lima"})), scripted.Text("warm"))
	resp, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithSystem("sys"), engine.WithPrompt("q"), engine.WithTools(w))
	require.NoError(t, err)
	msgs := m.Requests()[1].Messages
	require.Len(t, msgs, 4)
	require.Equal(t, []engine.Role{engine.RoleSystem, engine.RoleUser, engine.RoleModel, engine.RoleTool}, []engine.Role{msgs[0].Role, msgs[1].Role, msgs[2].Role, msgs[3].Role})
	require.Equal(t, "r1", msgs[3].Content[0].ToolResponse.Ref)
	require.JSONEq(t, `{"tempC":4}`, string(msgs[3].Content[0].ToolResponse.Output.(json.RawMessage)))
	require.Len(t, resp.History(), 5)
}

func TestParallelToolResultsComeInRequestOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Each call waits for the next ref to finish first, so completion order is the reverse of the
	// request order, and the calls can only finish if they run in parallel.
	done := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{})}
	waitFor := map[string]string{"a": "b", "b": "c"}
	slow := engine.DefineTool(b.r, "slow", "d", func(tc *engine.ToolContext, in map[string]any) (string, error) {
		if w, ok := waitFor[tc.Ref]; ok {
			<-done[w]
		}
		close(done[tc.Ref])
		return tc.Ref, nil
	})
	m := scripted.New("m", scripted.Reply(call("slow", "a", map[string]any{}), call("slow", "b", map[string]any{}), call("slow", "c", map[string]any{})), scripted.Text("ok"))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(slow))
	require.NoError(t, err)
	var refs []string
	for _, p := range m.Requests()[1].Messages[2].Content {
		refs = append(refs, p.ToolResponse.Ref)
	}
	require.Equal(t, []string{"a", "b", "c"}, refs)
}

func TestToolErrorFailsGenerateNamingToolAndRef(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("boom")
	f := engine.DefineTool(b.r, "flaky", "d", func(tc *engine.ToolContext, in map[string]any) (string, error) {
		if tc.Ref == "r2" {
			return "", boom
		}
		return "ok", nil
	})
	m := scripted.New("m", scripted.Reply(call("flaky", "r1", map[string]any{}), call("flaky", "r2", map[string]any{})))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(f))
	require.ErrorIs(t, err, boom)
	require.Contains(t, err.Error(), "flaky")
	require.Contains(t, err.Error(), "r2")
}

func TestMiddlewareWrapsModelAndToolsAsAnOnion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var trail []string
	log := func(s string) { mu.Lock(); trail = append(trail, s); mu.Unlock() }
	extra := ai.NewTool("clock", "d", func(tc *engine.ToolContext, in struct{}) (string, error) { log("tool"); return "noon", nil })
	mk := func(name string) *engine.Middleware {
		return &engine.Middleware{
			Name: name,
			Generate: func(ctx context.Context, turn *engine.GenerateTurn, next engine.GenerateNext) (*engine.ModelResponse, error) {
				log(fmt.Sprintf("%s.gen%d>", name, turn.Turn))
				r, err := next(ctx, turn)
				log(fmt.Sprintf("<%s.gen%d", name, turn.Turn))
				return r, err
			},
			Model: func(ctx context.Context, req *engine.ModelRequest, cb engine.ModelStreamFunc, next engine.ModelNext) (*engine.ModelResponse, error) {
				log(name + ".model>")
				r, err := next(ctx, req, cb)
				log("<" + name + ".model")
				return r, err
			},
		}
	}
	outer, inner := mk("A"), mk("B")
	inner.Tools = []engine.Tool{extra}
	m := scripted.New("m", scripted.Reply(call("clock", "c1", nil)), scripted.Text("done"))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithMiddleware(outer, inner))
	require.NoError(t, err)
	require.Equal(t, []string{
		"A.gen0>", "B.gen0>", "A.model>", "B.model>", "<B.model", "<A.model", "tool",
		"A.gen1>", "B.gen1>", "A.model>", "B.model>", "<B.model", "<A.model", "<B.gen1", "<A.gen1",
		"<B.gen0", "<A.gen0",
	}, trail)
	require.Equal(t, "clock", m.Requests()[0].Tools[0].Name, "middleware contributes tools")
}

func TestJSONFormatInstructsEveryTurnAndValidatesTheFinalOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := weather(b, nil)
	m := scripted.New("m", scripted.Reply(call("getWeather", "r1", map[string]any{"city": "x"})), scripted.Text("```json\n{\"tempC\": 21}\n```"))
	resp, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w), engine.WithOutputType[WeatherOut]())
	require.NoError(t, err)
	for i, req := range m.Requests() {
		user := req.Messages[0]
		require.Len(t, user.Content, 2, "turn %d", i)
		require.Contains(t, user.Content[1].Text, "Output should be in JSON format")
		require.Contains(t, user.Content[1].Text, `"tempC"`)
		require.Equal(t, "json", req.Output.Format)
	}
	var out WeatherOut
	require.NoError(t, resp.Output(&out))
	require.Equal(t, 21.0, out.TempC)
	require.Len(t, resp.History()[0].Content, 1, "instructions are not persisted into history")

	bad := scripted.New("m", scripted.Text(`{"tempC": "hot"}`))
	_, err = engine.Generate(context.Background(), b.r, engine.WithModel(bad), engine.WithPrompt("q"), engine.WithOutputType[WeatherOut]())
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))
	var ee *engine.Error
	require.True(t, errors.As(err, &ee))
	require.NotNil(t, ee.Response)
}

func TestTextIsTheDefaultFormat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := scripted.New("m", scripted.Text("{not json"))
	_, err := engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"))
	require.NoError(t, err)
	require.Nil(t, m.Requests()[0].Output)
	require.Len(t, m.Requests()[0].Messages[0].Content, 1)
}

func TestCancelStopsTheModelCallPromptly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := scripted.New("m", scripted.Turn{Block: true})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err := engine.Generate(ctx, b.r, engine.WithModel(m), engine.WithPrompt("q"))
	require.Equal(t, engine.StatusCancelled, statusOf(t, err))
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestCancelStopsToolsAndTheLoop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	blocker := engine.DefineTool(b.r, "block", "d", func(tc *engine.ToolContext, in map[string]any) (string, error) {
		close(started)
		<-tc.Done()
		return "", tc.Err()
	})
	go func() { <-started; cancel() }()
	m := scripted.New("m", scripted.Reply(call("block", "r1", map[string]any{})), scripted.Text("never"))
	_, err := engine.Generate(ctx, b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(blocker))
	require.Equal(t, engine.StatusCancelled, statusOf(t, err))
	require.Equal(t, 1, m.Calls(), "the loop stops; the model is not called again")

	_, err = engine.Generate(ctx, b.r, engine.WithModel(m), engine.WithPrompt("q"))
	require.Equal(t, engine.StatusCancelled, statusOf(t, err), "an already-cancelled context fails before the model")
}
