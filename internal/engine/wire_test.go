package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
)

// Genkit-shaped payloads, as Genkit JS writes them into history after an interrupt and a resume.
const genkitInterruptedHistory = `{
  "model": "scripted/m",
  "messages": [
    {"role": "user", "content": [{"text": "transfer 500 to bob"}]},
    {"role": "model", "content": [
      {"text": ""},
      {"toolRequest": {"name": "transferMoney", "ref": "call_1", "input": {"to": "bob", "amount": 500}},
       "metadata": {"interrupt": {"reason": "confirm", "amount": 500}}},
      {"toolRequest": {"name": "getBalance", "ref": "call_2", "input": {}},
       "metadata": {"pendingOutput": {"balance": 1200}}}
    ]},
    {"role": "tool", "content": [
      {"toolResponse": {"name": "getBalance", "ref": "call_2", "output": {"balance": 1200}}, "metadata": {"source": "pending"}}
    ], "metadata": {"resumed": true}},
    {"role": "model", "content": [
      {"toolRequest": {"name": "transferMoney", "ref": "call_1", "input": {"to": "bob", "amount": 500}},
       "metadata": {"resolvedInterrupt": {"reason": "confirm"}}},
      {"media": {"url": "data:image/png;base64,AA==", "contentType": "image/png"}},
      {"data": {"k": [1, 2]}},
      {"reasoning": "thinking"},
      {"custom": {"x": 1}}
    ]}
  ],
  "tools": ["/tool/transferMoney", "getBalance"],
  "toolChoice": "auto",
  "config": {"temperature": 0.2},
  "output": {"format": "json", "jsonSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
  "resume": {
    "respond": [{"toolResponse": {"name": "transferMoney", "ref": "call_1", "output": {"ok": true}}, "metadata": {"interruptResponse": true}}],
    "restart": [{"toolRequest": {"name": "transferMoney", "ref": "call_1", "input": {"to": "bob", "amount": 400}}, "metadata": {"resumed": {"by": "alice"}, "replacedInput": {"to": "bob", "amount": 500}}}],
    "metadata": {"reviewer": "alice"}
  },
  "returnToolRequests": false,
  "maxTurns": 3
}`

func TestWire_GenerateActionOptionsRoundTrip(t *testing.T) {
	t.Parallel()
	var opts engine.GenerateActionOptions
	require.NoError(t, json.Unmarshal([]byte(genkitInterruptedHistory), &opts))

	model := opts.Messages[1]
	require.True(t, model.Content[1].IsInterrupt())
	require.Equal(t, map[string]any{"reason": "confirm", "amount": float64(500)}, model.Content[1].Metadata[engine.MetaInterrupt])
	require.Equal(t, map[string]any{"balance": float64(1200)}, model.Content[2].Metadata[engine.MetaPendingOutput])
	require.Equal(t, engine.PartText, model.Content[0].Kind)
	require.Contains(t, opts.Messages[3].Content[0].Metadata, engine.MetaResolvedInterrupt)
	require.Equal(t, engine.PartMedia, opts.Messages[3].Content[1].Kind)
	require.Equal(t, engine.PartData, opts.Messages[3].Content[2].Kind)
	require.Equal(t, engine.PartReasoning, opts.Messages[3].Content[3].Kind)
	require.Equal(t, engine.PartCustom, opts.Messages[3].Content[4].Kind)
	require.Equal(t, 3, opts.MaxTurns)
	require.NotNil(t, opts.Output.Schema)
	require.Len(t, opts.Resume.Respond, 1)
	require.Len(t, opts.Resume.Restart, 1)

	out, err := json.Marshal(&opts)
	require.NoError(t, err)
	// returnToolRequests:false is omitted by Go; everything else must survive byte-for-byte in meaning.
	var want, got map[string]any
	require.NoError(t, json.Unmarshal([]byte(genkitInterruptedHistory), &want))
	delete(want, "returnToolRequests")
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, want, got)
}

func TestWire_ModelResponseAndChunkRoundTrip(t *testing.T) {
	t.Parallel()
	const resp = `{"message":{"role":"model","content":[{"text":"hi"},{"toolRequest":{"name":"a","ref":"1","input":{"x":1}},"metadata":{"interrupt":true}}]},` +
		`"finishReason":"interrupted","usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7},` +
		`"request":{"messages":[{"role":"user","content":[{"text":"q"}]}],"tools":[{"name":"a","description":"d","inputSchema":{"type":"object"},"metadata":{"originalName":"ns/a"}}],"output":{"format":"json","schema":{"type":"object"}}}}`
	var r engine.ModelResponse
	require.NoError(t, json.Unmarshal([]byte(resp), &r))
	require.Len(t, r.Interrupts(), 1)
	b, err := json.Marshal(&r)
	require.NoError(t, err)
	require.JSONEq(t, resp, string(b))

	const chunk = `{"role":"tool","index":1,"content":[{"toolResponse":{"name":"a","ref":"1","output":{"y":2},"content":[{"media":{"url":"https://x/y.png"}}]}}],"aggregated":true}`
	var c engine.ModelResponseChunk
	require.NoError(t, json.Unmarshal([]byte(chunk), &c))
	b, err = json.Marshal(&c)
	require.NoError(t, err)
	require.JSONEq(t, chunk, string(b))
}

func TestWire_FinishReasonsAndEmptyText(t *testing.T) {
	t.Parallel()
	for _, fr := range []engine.FinishReason{"stop", "length", "blocked", "interrupted", "other", "unknown"} {
		b, err := json.Marshal(&engine.ModelResponse{FinishReason: fr})
		require.NoError(t, err)
		require.JSONEq(t, `{"finishReason":"`+string(fr)+`"}`, string(b))
	}
	b, err := json.Marshal(engine.NewTextPart(""))
	require.NoError(t, err)
	require.JSONEq(t, `{"text":""}`, string(b))
}
