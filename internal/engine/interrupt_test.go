package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

type TransferIn struct {
	To     string  `json:"to"`
	Amount float64 `json:"amount"`
}

type TransferOut struct {
	Done bool `json:"done"`
}

type hitl struct {
	*bundle
	transfer  *engine.TypedTool[TransferIn, TransferOut]
	confirm   *engine.TypedTool[TransferIn, TransferOut]
	balance   *engine.TypedTool[struct{}, float64]
	runs      atomic.Int32
	balances  atomic.Int32
	lastCtx   atomic.Pointer[engine.ToolContext]
	reinterru bool
}

// setupHITL registers transferMoney (interrupts unless resumed), confirm (interrupt-only) and
// getBalance (plain).
func setupHITL(t *testing.T) *hitl {
	h := &hitl{bundle: setup(t)}
	h.transfer = engine.DefineTool(h.r, "transferMoney", "Moves money.", func(tc *engine.ToolContext, in TransferIn) (TransferOut, error) {
		h.runs.Add(1)
		cp := *tc
		h.lastCtx.Store(&cp)
		if !tc.IsResumed() || (h.reinterru && tc.Resumed["again"] == nil) {
			return TransferOut{}, tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"reason": "confirm", "amount": in.Amount}})
		}
		return TransferOut{Done: true}, nil
	})
	h.confirm = engine.DefineInterrupt[TransferIn, TransferOut](h.r, "confirm", "Asks a person.",
		engine.WithRequestMetadata(func(in TransferIn) map[string]any { return map[string]any{"to": in.To} }))
	h.balance = engine.DefineTool(h.r, "getBalance", "Balance.", func(tc *engine.ToolContext, in struct{}) (float64, error) {
		h.balances.Add(1)
		return 1200, nil
	})
	return h
}

func (h *hitl) interrupted(t *testing.T, parts ...*engine.Part) (*engine.ModelResponse, *scripted.Model) {
	t.Helper()
	m := scripted.New("m", scripted.Reply(parts...))
	resp, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithPrompt("send 500 to bob"),
		engine.WithTools(h.transfer, h.confirm, h.balance))
	require.NoError(t, err)
	require.Equal(t, engine.FinishReasonInterrupted, resp.FinishReason)
	return resp, m
}

func TestToolInterruptStampsMetadataAndPendingOutput(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	resp, _ := h.interrupted(t, engine.NewTextPart("sure"), call("transferMoney", "t1", map[string]any{"to": "bob", "amount": 500}), call("getBalance", "b1", nil))
	ints := resp.Interrupts()
	require.Len(t, ints, 1)
	require.Equal(t, "t1", ints[0].ToolRequest.Ref)
	require.Equal(t, map[string]any{"to": "bob", "amount": 500}, ints[0].ToolRequest.Input, "the request keeps its content")
	require.Equal(t, map[string]any{"reason": "confirm", "amount": float64(500)}, ints[0].Metadata[engine.MetaInterrupt])
	sibling := resp.Message.Content[2]
	require.JSONEq(t, `1200`, string(sibling.Metadata[engine.MetaPendingOutput].(json.RawMessage)))
	require.Equal(t, "sure", resp.Message.Content[0].Text)

	b, err := json.Marshal(resp.Message)
	require.NoError(t, err)
	require.JSONEq(t, `{"role":"model","content":[{"text":"sure"},
	  {"toolRequest":{"name":"transferMoney","ref":"t1","input":{"to":"bob","amount":500}},"metadata":{"interrupt":{"reason":"confirm","amount":500}}},
	  {"toolRequest":{"name":"getBalance","ref":"b1"},"metadata":{"pendingOutput":1200}}]}`, string(b))
}

func TestInterruptOnlyToolAlwaysInterruptsAndCannotBeRestarted(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	require.False(t, h.confirm.Restartable())
	require.Equal(t, map[string]any{"restartable": false}, engine.ToolDesc(h.confirm).Metadata["tool"])
	resp, _ := h.interrupted(t, call("confirm", "c1", map[string]any{"to": "bob", "amount": 1}))
	require.Equal(t, map[string]any{"to": "bob"}, resp.Interrupts()[0].Metadata[engine.MetaInterrupt])

	// No metadata: interrupt is true.
	bare := engine.DefineInterrupt[map[string]any, string](h.r, "ask", "d")
	m := scripted.New("m", scripted.Reply(call("ask", "a1", map[string]any{})))
	resp, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(bare))
	require.NoError(t, err)
	require.Equal(t, true, resp.Interrupts()[0].Metadata[engine.MetaInterrupt])

	restart := bare.Restart(resp.Interrupts()[0], nil)
	m2 := scripted.New("m", scripted.Text("x"))
	_, err = engine.Generate(context.Background(), h.r, engine.WithModel(m2), engine.WithMessages(resp.History()...), engine.WithTools(bare), engine.WithRestart(restart))
	require.Equal(t, engine.StatusFailedPrecondition, statusOf(t, err), "interrupt-only tools are answered, not restarted")
}

func TestResumeRespondIsValidatedAndResolvesTheInterrupt(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	resp, _ := h.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "bob", "amount": 500}), call("getBalance", "b1", nil))
	itp := resp.Interrupts()[0]

	_, err := engine.Generate(context.Background(), h.r, engine.WithModel(scripted.New("m")), engine.WithMessages(resp.History()...),
		engine.WithTools(h.transfer, h.balance), engine.WithRespond(engine.RespondPart("transferMoney", "t1", map[string]any{"done": "yes"})))
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err), "respond output is validated against the output schema")
	require.Contains(t, err.Error(), `"done"`)

	answer := h.transfer.Respond(itp, TransferOut{Done: true}, nil)
	m := scripted.New("m", scripted.Text("sent"))
	out, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithMessages(resp.History()...),
		engine.WithTools(h.transfer, h.balance), engine.WithRespond(answer))
	require.NoError(t, err)
	require.Equal(t, "sent", out.Text())
	require.EqualValues(t, 1, h.runs.Load(), "respond does not run the tool")
	require.EqualValues(t, 1, h.balances.Load(), "pendingOutput is never re-run")

	msgs := m.Requests()[0].Messages
	require.Len(t, msgs, 3)
	model, tool := msgs[1], msgs[2]
	require.NotContains(t, model.Content[0].Metadata, engine.MetaInterrupt)
	require.Equal(t, map[string]any{"reason": "confirm", "amount": float64(500)}, model.Content[0].Metadata[engine.MetaResolvedInterrupt])
	require.NotContains(t, model.Content[1].Metadata, engine.MetaPendingOutput)
	require.Equal(t, engine.RoleTool, tool.Role)
	require.Equal(t, true, tool.Metadata[engine.MetaResumed])
	require.Equal(t, "t1", tool.Content[0].ToolResponse.Ref)
	require.Equal(t, "b1", tool.Content[1].ToolResponse.Ref)
	require.Equal(t, "pending", tool.Content[1].Metadata[engine.MetaSource])
}

func TestResumeRestartSeesResumedMetadataAndOriginalInput(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	resp, _ := h.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "bob", "amount": 500}))
	restart := h.transfer.Restart(resp.Interrupts()[0], &engine.RestartOptions{
		ReplaceInput: TransferIn{To: "bob", Amount: 400}, ResumedMetadata: map[string]any{"by": "alice"},
	})
	m := scripted.New("m", scripted.Text("sent 400"))
	out, err := engine.Generate(engine.WithRunID(context.Background(), "run-7"), h.r, engine.WithModel(m),
		engine.WithMessages(resp.History()...), engine.WithTools(h.transfer), engine.WithRestart(restart))
	require.NoError(t, err)
	require.Equal(t, "sent 400", out.Text())
	tc := h.lastCtx.Load()
	require.Equal(t, map[string]any{"by": "alice"}, tc.Resumed)
	require.Equal(t, map[string]any{"to": "bob", "amount": 500}, tc.OriginalInput)
	require.Equal(t, "run-7:t1", tc.IdempotencyKey)
	toolMsg := m.Requests()[0].Messages[2]
	require.JSONEq(t, `{"done":true}`, string(toolMsg.Content[0].ToolResponse.Output.(json.RawMessage)))

	// From stored data only: RestartPart with no replacement keeps the original input.
	h2 := setupHITL(t)
	resp2, _ := h2.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "eve", "amount": 5}))
	_, err = engine.Generate(context.Background(), h2.r, engine.WithModel(scripted.New("m", scripted.Text("ok"))),
		engine.WithMessages(resp2.History()...), engine.WithTools(h2.transfer), engine.WithRestart(engine.RestartPart("transferMoney", "t1", nil, nil)))
	require.NoError(t, err)
	require.Equal(t, map[string]any{}, h2.lastCtx.Load().Resumed)
	require.Nil(t, h2.lastCtx.Load().OriginalInput)
}

func TestResumeMatchesByNameAndRefWithPrecedence(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	resp, _ := h.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "a", "amount": 1}),
		call("transferMoney", "t2", map[string]any{"to": "b", "amount": 2}), call("getBalance", "b1", nil))
	// getBalance has pendingOutput and also a respond: pendingOutput wins. t1 has both respond and
	// restart: respond wins. t2 is restarted.
	m := scripted.New("m", scripted.Text("ok"))
	_, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithMessages(resp.History()...),
		engine.WithTools(h.transfer, h.balance),
		engine.WithRespond(engine.RespondPart("transferMoney", "t1", map[string]any{"done": false}), engine.RespondPart("getBalance", "b1", 7)),
		engine.WithRestart(engine.RestartPart("transferMoney", "t1", nil, nil), engine.RestartPart("transferMoney", "t2", nil, nil)))
	require.NoError(t, err)
	tool := m.Requests()[0].Messages[2].Content
	require.Equal(t, map[string]any{"done": false}, tool[0].ToolResponse.Output)
	require.JSONEq(t, `{"done":true}`, string(tool[1].ToolResponse.Output.(json.RawMessage)))
	require.Equal(t, "t2", tool[1].ToolResponse.Ref)
	require.JSONEq(t, `1200`, string(tool[2].ToolResponse.Output.(json.RawMessage)))
	require.EqualValues(t, 3, h.runs.Load(), "two first runs plus one restart of t2")
}

func TestResumeLeavingAnInterruptUnansweredIsInvalidArgument(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	resp, _ := h.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "a", "amount": 1}), call("transferMoney", "t2", map[string]any{"to": "b", "amount": 2}))
	m := scripted.New("m", scripted.Text("ok"))
	_, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithMessages(resp.History()...),
		engine.WithTools(h.transfer), engine.WithRespond(engine.RespondPart("transferMoney", "t1", map[string]any{"done": true})))
	require.Equal(t, engine.StatusInvalidArgument, statusOf(t, err))
	require.Contains(t, err.Error(), "t2")
	require.Zero(t, m.Calls())
}

func TestResumeWithoutAModelToolRequestIsFailedPrecondition(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	m := scripted.New("m", scripted.Text("ok"))
	_, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithPrompt("hi"),
		engine.WithTools(h.transfer), engine.WithRespond(engine.RespondPart("transferMoney", "t1", map[string]any{"done": true})))
	require.Equal(t, engine.StatusFailedPrecondition, statusOf(t, err))
	_, err = engine.Generate(context.Background(), h.r, engine.WithModel(m),
		engine.WithMessages(engine.NewTextMessage(engine.RoleModel, "no tools")),
		engine.WithTools(h.transfer), engine.WithRespond(engine.RespondPart("transferMoney", "t1", map[string]any{"done": true})))
	require.Equal(t, engine.StatusFailedPrecondition, statusOf(t, err))
}

func TestRestartedToolThatInterruptsAgainIsANewPendingInterrupt(t *testing.T) {
	t.Parallel()
	h := setupHITL(t)
	h.reinterru = true
	resp, _ := h.interrupted(t, call("transferMoney", "t1", map[string]any{"to": "bob", "amount": 500}), call("confirm", "c1", map[string]any{"to": "bob", "amount": 1}))
	answer := h.confirm.Respond(resp.Interrupts()[1], TransferOut{Done: true}, nil)
	restart := h.transfer.Restart(resp.Interrupts()[0], &engine.RestartOptions{ResumedMetadata: map[string]any{"first": true}})
	m := scripted.New("m", scripted.Text("sent"))
	again, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithMessages(resp.History()...),
		engine.WithTools(h.transfer, h.confirm), engine.WithRespond(answer), engine.WithRestart(restart))
	require.NoError(t, err, "Genkit fails with FAILED_PRECONDITION here; Loupe returns a new interrupt")
	require.Equal(t, engine.FinishReasonInterrupted, again.FinishReason)
	require.Zero(t, m.Calls(), "the model is not called")
	require.Len(t, again.Interrupts(), 1)
	require.Equal(t, "t1", again.Interrupts()[0].ToolRequest.Ref)
	kept, err := json.Marshal(again.Message.Content[1].Metadata[engine.MetaPendingOutput])
	require.NoError(t, err)
	require.JSONEq(t, `{"done":true}`, string(kept), "the answered sibling is kept")
	hist := again.History()
	require.Len(t, hist, 2, "the revised model message replaces the last one")

	// Resume again: only the new interrupt needs an answer; the answered sibling is not asked again.
	restart2 := h.transfer.Restart(again.Interrupts()[0], &engine.RestartOptions{ResumedMetadata: map[string]any{"again": true}})
	done, err := engine.Generate(context.Background(), h.r, engine.WithModel(m), engine.WithMessages(hist...),
		engine.WithTools(h.transfer, h.confirm), engine.WithRestart(restart2))
	require.NoError(t, err)
	require.Equal(t, "sent", done.Text())
}

func TestGeneratedToolRefsAreStableAndDistinct(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var keys []string
	w := engine.DefineTool(b.r, "w", "d", func(tc *engine.ToolContext, in map[string]any) (string, error) { return tc.Ref, nil })
	mw := &engine.Middleware{Tool: func(ctx context.Context, c *engine.ToolCall, next engine.ToolNext) (*engine.ToolOutput, error) {
		return next(ctx, c)
	}}
	run := func() []string {
		m := scripted.New("m", scripted.Reply(call("w", "", map[string]any{}), call("w", "", map[string]any{})), scripted.Text("ok"))
		_, err := engine.Generate(engine.WithRunID(context.Background(), "run-1"), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w), engine.WithMiddleware(mw))
		require.NoError(t, err)
		var refs []string
		for _, p := range m.Requests()[1].Messages[2].Content {
			refs = append(refs, p.ToolResponse.Ref)
			keys = append(keys, engine.IdempotencyKey(engine.WithRunID(context.Background(), "run-1"), p.ToolResponse.Ref))
		}
		return refs
	}
	first := run()
	require.Equal(t, []string{"m1p0", "m1p1"}, first)
	require.Equal(t, first, run(), "refs are stable across replays")
	require.Equal(t, "run-1:m1p0", keys[0])
}

func TestToolContextCarriesAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var got []string
	w := engine.DefineTool(b.r, "w", "d", func(tc *engine.ToolContext, in map[string]any) (string, error) {
		got = append(got, tc.IdempotencyKey)
		return "", nil
	})
	m := scripted.New("m", scripted.Reply(call("w", "call_9", map[string]any{})), scripted.Text("ok"))
	_, err := engine.Generate(engine.WithRunID(context.Background(), "run-42"), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w))
	require.NoError(t, err)
	require.Equal(t, []string{"run-42:call_9"}, got)

	// Without a run id the trace id scopes the key.
	m = scripted.New("m", scripted.Reply(call("w", "call_9", map[string]any{})), scripted.Text("ok"))
	_, err = engine.Generate(context.Background(), b.r, engine.WithModel(m), engine.WithPrompt("q"), engine.WithTools(w))
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{32}:call_9$`, got[1])
}
