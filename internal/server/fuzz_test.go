package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// The fuzz targets here drive what the API does with a body before the run service and the
// database see it; they need neither. `make fuzz` runs each for FUZZTIME.

// fixtureValues returns the genkit:input and genkit:output attributes of every span in the
// captured Genkit traffic (../trace/testdata/fixtures): real flow inputs and tool outputs.
func fixtureValues(f *testing.F) (inputs, outputs []json.RawMessage) {
	files, err := filepath.Glob(filepath.Join("..", "trace", "testdata", "fixtures", "genkit-*.jsonl"))
	require.NoError(f, err)
	require.NotEmpty(f, files)
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		for line := range bytes.Lines(b) {
			var req struct{ Body string }
			require.NoError(f, json.Unmarshal(line, &req))
			var td struct {
				Spans map[string]struct {
					Attributes map[string]any `json:"attributes"`
				} `json:"spans"`
			}
			require.NoError(f, json.Unmarshal([]byte(req.Body), &td))
			for _, key := range slices.Sorted(maps.Keys(td.Spans)) {
				sp := td.Spans[key]
				// Genkit writes them as JSON text in a string attribute.
				if s, ok := sp.Attributes["genkit:input"].(string); ok && json.Valid([]byte(s)) {
					inputs = append(inputs, json.RawMessage(s))
				}
				if s, ok := sp.Attributes["genkit:output"].(string); ok && json.Valid([]byte(s)) {
					outputs = append(outputs, json.RawMessage(s))
				}
			}
		}
	}
	return inputs, outputs
}

// requireClientError checks that err is a 4xx answer whose message is safe to log.
func requireClientError(t *testing.T, err error) {
	t.Helper()
	var e *Error
	require.True(t, errors.As(err, &e), "%T %v", err, err)
	require.Contains(t, []int{400, 422}, e.Status, e.Message)
	require.NoError(t, store.CheckText("message", e.Message))
}

// FuzzRunStartBody checks POST /api/v1/runs's validation up to the database: a body is refused
// with a 400 or 422, or its action and input are text PostgreSQL stores, and then the action's
// schema accepts the input or refuses it with a validation error, never anything else.
func FuzzRunStartBody(f *testing.F) {
	reg := engine.NewRegistry()
	require.NoError(f, demo.Register(bridge.NewApp(reg).(*loupe.App), demo.Config{}))
	actions := []string{"/flow/travelAgent", "/flow/transferMoney", "/flow/countdown", "/flow/researchAgent"}
	for _, body := range []string{
		`{"action":"/flow/travelAgent","input":{"destination":"Lisbon"}}`,
		`{"action":"/flow/transferMoney","input":{"to":"bob","amount":500,"currency":"CNY"}}`,
		`{"action":"/flow/countdown","input":{"from":10}}`,
		`{"action":"/flow/researchAgent","input":{"topic":"durable execution","depth":30}}`,
		`{"action":"/flow/travelAgent","input":{"destination":"a\u0000b"}}`,
		`{"action":"/flow/travelAgent","input":{"destination":"\ud800"}}`,
		`{"action":"/flow/travelAgent","input":null}`, `{"action":"x"}`, `{}`, `[]`, ``, `{"action":"a","bogus":1}`, `{"action":"a"} {}`,
	} {
		f.Add([]byte(body))
	}
	inputs, _ := fixtureValues(f)
	for i, in := range inputs {
		body, err := json.Marshal(runStartRequest{Action: actions[i%len(actions)], Input: in})
		require.NoError(f, err)
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req runStartRequest
		if err := decodeJSON(body, &req); err != nil {
			requireClientError(t, err)
			return
		}
		require.NoError(t, store.CheckText("action", req.Action))
		require.NoError(t, store.CheckJSON("input", req.Input))
		input := req.Input
		if len(input) == 0 {
			input = json.RawMessage("null")
		}
		require.True(t, json.Valid(input))
		for _, key := range actions {
			if err := reg.Lookup(key).Desc().InputSchema.ValidateJSON(input); err != nil {
				var ve *engine.ValidationError
				require.ErrorAs(t, err, &ve, "%s refuses %s", key, input)
			}
		}
	})
}

// FuzzResolveBody checks POST /api/v1/interrupts/{id}/resolve's decoding: a body is refused with
// a 400 or 422, or its comment is text PostgreSQL stores, its input and output are storable JSON,
// and an approval carries neither.
func FuzzResolveBody(f *testing.F) {
	for _, body := range []string{
		`{"action":"approve","comment":"ok","version":1}`,
		`{"action":"edit","input":{"to":"bob","amount":5,"currency":"CNY"},"version":2}`,
		`{"action":"respond","output":{"booked":true},"comment":"done"}`,
		`{"action":"deny","output":"not today"}`,
		`{"action":"approve","input":{"a":1}}`,
		`{"action":"deny","comment":"a\u0000b"}`, `{"action":"edit","input":{"x":["\udc00"]}}`,
		"{\"action\":\"deny\",\"comment\":\"\xff\"}", `{"version":-1}`, `{"version":1e99}`,
	} {
		f.Add([]byte(body))
	}
	inputs, outputs := fixtureValues(f)
	for i, out := range outputs {
		body, err := json.Marshal(resolveRequest{Action: runs.ActionRespond, Output: out, Comment: "from the fixtures"})
		require.NoError(f, err)
		f.Add(body)
		if i < len(inputs) {
			body, err := json.Marshal(resolveRequest{Action: runs.ActionEdit, Input: inputs[i], Version: int64(i)})
			require.NoError(f, err)
			f.Add(body)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeResolve(body)
		if err != nil {
			requireClientError(t, err)
			return
		}
		require.NoError(t, store.CheckText("comment", req.Comment))
		require.NoError(t, store.CheckText("action", req.Action))
		for name, doc := range map[string]json.RawMessage{"input": req.Input, "output": req.Output} {
			require.NoError(t, store.CheckJSON(name, doc))
			if len(doc) > 0 {
				require.True(t, json.Valid(doc), "%s: %s", name, doc)
			}
		}
		if req.Action == runs.ActionApprove {
			require.Empty(t, req.Input)
			require.Empty(t, req.Output)
		}
	})
}
