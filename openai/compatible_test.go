package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/openai"
)

// endpointShape is how one OpenAI-compatible server answers a conversation that asks for two
// parallel weather calls and then, given their results, answers in text.
type endpointShape struct {
	base  string // the path the README's BaseURL names
	model string
	// calls and answer are the bodies of the two answers, streamed (SSE data lines) or not.
	calls, answer         string
	streamCalls, streamed []string
}

// geminiShape answers as Gemini's OpenAI-compatible endpoint does: each of two parallel calls
// whole, streamed with no index (so both count as index 0), each with its own id, the first with
// a thought signature in extra_content that it wants back; finish_reason "stop" even for calls.
var geminiShape = endpointShape{
	base:  "/v1beta/openai",
	model: "gemini-3.5-flash",
	calls: `{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","tool_calls":[` +
		`{"extra_content":{"google":{"thought_signature":"c2lnLTE="}},"function":{"arguments":"{\"city\":\"Paris\"}","name":"getWeather"},"id":"function-call-1","type":"function"},` +
		`{"function":{"arguments":"{\"city\":\"Rome\"}","name":"getWeather"},"id":"function-call-2","type":"function"}]}}],` +
		`"created":1,"id":"gem-1","model":"gemini-3.5-flash","object":"chat.completion","usage":{"completion_tokens":8,"prompt_tokens":12,"total_tokens":20}}`,
	answer: `{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"Sunny both","role":"assistant"}}],` +
		`"created":1,"id":"gem-2","model":"gemini-3.5-flash","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":30,"total_tokens":32}}`,
	streamCalls: []string{
		`{"choices":[{"delta":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"c2lnLTE="}},"function":{"arguments":"{\"city\":\"Paris\"}","name":"getWeather"},"id":"function-call-1","type":"function"}]},"index":0}],"created":1,"id":"gem-1","model":"gemini-3.5-flash","object":"chat.completion.chunk"}`,
		`{"choices":[{"delta":{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"city\":\"Rome\"}","name":"getWeather"},"id":"function-call-2","type":"function"}]},"index":0}],"created":1,"id":"gem-1","model":"gemini-3.5-flash","object":"chat.completion.chunk"}`,
		`{"choices":[{"delta":{"role":"assistant"},"finish_reason":"stop","index":0}],"created":1,"id":"gem-1","model":"gemini-3.5-flash","object":"chat.completion.chunk","usage":{"completion_tokens":8,"prompt_tokens":12,"total_tokens":20}}`,
	},
	streamed: []string{
		`{"choices":[{"delta":{"content":"Sunny ","role":"assistant"},"index":0}],"created":1,"id":"gem-2","model":"gemini-3.5-flash","object":"chat.completion.chunk"}`,
		`{"choices":[{"delta":{"content":"both","role":"assistant"},"finish_reason":"stop","index":0}],"created":1,"id":"gem-2","model":"gemini-3.5-flash","object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":30,"total_tokens":32}}`,
	},
}

// ollamaShape answers as Ollama's /v1 endpoint does: calls whole in one chunk with their
// indexes, finish_reason "tool_calls", system_fingerprint fp_ollama, and usage in a last chunk.
var ollamaShape = endpointShape{
	base:  "/v1",
	model: "llama3.1",
	calls: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[` +
		`{"id":"call_p","index":0,"type":"function","function":{"name":"getWeather","arguments":"{\"city\":\"Paris\"}"}},` +
		`{"id":"call_r","index":1,"type":"function","function":{"name":"getWeather","arguments":"{\"city\":\"Rome\"}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`,
	answer: `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"Sunny both"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":30,"completion_tokens":2,"total_tokens":32}}`,
	streamCalls: []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[` +
			`{"id":"call_p","index":0,"type":"function","function":{"name":"getWeather","arguments":"{\"city\":\"Paris\"}"}},` +
			`{"id":"call_r","index":1,"type":"function","function":{"name":"getWeather","arguments":"{\"city\":\"Rome\"}"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llama3.1","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`,
	},
	streamed: []string{
		`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"Sunny "},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"both"},"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"llama3.1","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":2,"total_tokens":32}}`,
	},
}

// serve answers at shape.base+"/chat/completions" as the shape says, and keeps the bodies.
func (shape endpointShape) serve(t *testing.T) (*httptest.Server, *[]map[string]any) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != shape.base+"/chat/completions" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if json.Unmarshal(b, &body) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		msgs := body["messages"].([]any)
		answering := msgs[len(msgs)-1].(map[string]any)["role"] == "tool"
		if stream, _ := body["stream"].(bool); stream {
			w.Header().Set("Content-Type", "text/event-stream")
			lines := shape.streamCalls
			if answering {
				lines = shape.streamed
			}
			for _, l := range lines {
				fmt.Fprintf(w, "data: %s\n\n", l)
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if answering {
			fmt.Fprint(w, shape.answer)
			return
		}
		fmt.Fprint(w, shape.calls)
	}))
	t.Cleanup(srv.Close)
	return srv, &bodies
}

// TestGeminiAndOllamaThroughTheirOpenAIEndpoints runs the README's two configurations, Gemini's
// OpenAI-compatible endpoint and Ollama's, against local servers that answer in those servers'
// shapes, streamed and not: both parallel calls run once each with their own arguments, the
// answer and usage come through, and the calls go back in the next request with their ids (and,
// for Gemini, the thought signature it sent with the first).
func TestGeminiAndOllamaThroughTheirOpenAIEndpoints(t *testing.T) {
	for name, shape := range map[string]endpointShape{"gemini": geminiShape, "ollama": ollamaShape} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", name, stream), func(t *testing.T) {
				srv, bodies := shape.serve(t)
				app := loupe.New()
				m, err := openai.Define(app, openai.Config{BaseURL: srv.URL + shape.base, APIKey: "key", HTTPClient: srv.Client()}, shape.model)
				require.NoError(t, err)
				var mu sync.Mutex
				var cities []string
				w := loupe.DefineTool(app, "getWeather", "Weather.", func(tc *ai.ToolContext, in WeatherIn) (string, error) {
					mu.Lock()
					defer mu.Unlock()
					cities = append(cities, in.City)
					return "sunny in " + in.City, nil
				})
				opts := []ai.GenerateOption{ai.WithModel(m), ai.WithPrompt("weather?"), ai.WithTools(w)}
				if stream {
					opts = append(opts, ai.WithStreaming(func(context.Context, *ai.ModelResponseChunk) error { return nil }))
				}
				resp, err := loupe.Generate(context.Background(), app, opts...)
				require.NoError(t, err)
				require.Equal(t, "Sunny both", resp.Text())
				require.ElementsMatch(t, []string{"Paris", "Rome"}, cities, "each parallel call ran once, with its own arguments")
				require.Equal(t, 32, resp.Usage.TotalTokens, "the last model call's usage, as Genkit reports it")

				require.Len(t, *bodies, 2)
				msgs := (*bodies)[1]["messages"].([]any)
				calls := msgs[1].(map[string]any)["tool_calls"].([]any)
				require.Len(t, calls, 2)
				first := calls[0].(map[string]any)
				require.JSONEq(t, `{"city":"Paris"}`, first["function"].(map[string]any)["arguments"].(string))
				if name == "gemini" {
					require.Equal(t, "function-call-1", first["id"])
					require.Equal(t, map[string]any{"google": map[string]any{"thought_signature": "c2lnLTE="}}, first["extra_content"],
						"Gemini's thought signature goes back with its call")
					require.NotContains(t, calls[1].(map[string]any), "extra_content")
				}
				var ids []string
				for _, msg := range msgs[2:] {
					ids = append(ids, msg.(map[string]any)["tool_call_id"].(string))
				}
				require.Len(t, ids, 2)
				require.True(t, strings.HasPrefix(ids[0], map[string]string{"gemini": "function-call-", "ollama": "call_"}[name]))
			})
		}
	}
}
