package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

// TestHooks_RecorderAndToolLedger is the durable runner's contract: every history message, chunk,
// usage and the final response are observed as they happen, and a tool ledger records intent and
// results and short-circuits calls already completed, so they never run twice after a crash.
func TestHooks_RecorderAndToolLedger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := 0
	w := weather(b, &calls)
	var events []string
	hooks := &engine.Hooks{
		OnMessage: func(ctx context.Context, ev *engine.MessageEvent) error {
			events = append(events, string(ev.Source)+":"+string(ev.Message.Role)+":"+itoa(ev.Index)+":t"+itoa(ev.Turn))
			return nil
		},
		OnChunk: func(ctx context.Context, c *engine.ModelResponseChunk) error {
			events = append(events, "chunk:"+string(c.Role))
			return nil
		},
		OnUsage: func(ctx context.Context, turn int, u *engine.Usage) error {
			events = append(events, "usage:"+itoa(u.InputTokens))
			return nil
		},
		OnResponse: func(ctx context.Context, r *engine.ModelResponse) error {
			events = append(events, "response:"+r.Text())
			return nil
		},
	}
	// The ledger already holds a completed result for ref r1 (recorded before a crash).
	ledger := map[string]json.RawMessage{"run-1:r1": json.RawMessage(`{"tempC":99}`)}
	var intents []string
	var mu sync.Mutex // tool middleware runs concurrently for the parallel calls of a turn
	rec := &engine.Middleware{Tool: func(ctx context.Context, c *engine.ToolCall, next engine.ToolNext) (*engine.ToolOutput, error) {
		mu.Lock()
		out, ok := ledger[c.IdempotencyKey]
		if !ok {
			intents = append(intents, c.Name+"/"+c.Ref+"/"+string(c.Input))
		}
		mu.Unlock()
		if ok {
			return &engine.ToolOutput{Output: out}, nil
		}
		res, err := next(ctx, c)
		if err == nil {
			mu.Lock()
			ledger[c.IdempotencyKey] = res.Output.(json.RawMessage)
			mu.Unlock()
		}
		return res, err
	}}
	m := scripted.New("m",
		scripted.Reply(call("getWeather", "r1", map[string]any{"city": "a"}), call("getWeather", "r2", map[string]any{"city": "bb"})).WithUsage(7, 1),
		scripted.Text("done").WithUsage(9, 1))
	_, err := engine.Generate(engine.WithRunID(context.Background(), "run-1"), b.r, engine.WithModel(m), engine.WithPrompt("q"),
		engine.WithTools(w), engine.WithHooks(hooks), engine.WithMiddleware(rec))
	require.NoError(t, err)
	require.Equal(t, 1, calls, "r1 came from the ledger and did not run")
	require.Equal(t, []string{`getWeather/r2/{"city":"bb"}`}, intents)
	require.JSONEq(t, `{"tempC":2}`, string(ledger["run-1:r2"]))
	tool := m.Requests()[1].Messages[2]
	require.JSONEq(t, `{"tempC":99}`, string(tool.Content[0].ToolResponse.Output.(json.RawMessage)))
	require.Equal(t, []string{
		"input:user:0:t0", "chunk:model", "chunk:model", "usage:7", "model:model:1:t0", "tool:tool:2:t0", "chunk:tool",
		"chunk:model", "usage:9", "model:model:3:t1", "response:done",
	}, events)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
