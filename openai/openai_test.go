package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type WeatherIn struct {
	City string `json:"city"`
}

// fakeServer speaks the chat completions wire format: it asks for two parallel tool calls first and
// answers with text once it sees the tool results. Streaming responses split the tool-call
// arguments across deltas and end with a usage chunk.
func fakeServer(t *testing.T) (*httptest.Server, *[]map[string]any) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/chat/completions", r.URL.Path)
		require.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"))
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		require.NoError(t, json.Unmarshal(b, &body))
		mu.Lock()
		bodies = append(bodies, body)
		w.Header().Set("X-Request-Id", fmt.Sprintf("req_%d", len(bodies)))
		mu.Unlock()
		msgs := body["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		stream, _ := body["stream"].(bool)
		if last["role"] == "tool" {
			if stream {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, `data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Sunny "}}]}`+"\n\n")
				fmt.Fprint(w, `data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"both"},"finish_reason":"stop"}]}`+"\n\n")
				fmt.Fprint(w, `data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":2,"total_tokens":32}}`+"\n\n")
				fmt.Fprint(w, "data: [DONE]\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Sunny both"},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":2,"total_tokens":32}}`)
			return
		}
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range []string{
				`{"index":0,"id":"call_a","type":"function","function":{"name":"getWeather","arguments":""}}`,
				`{"index":0,"function":{"arguments":"{\"ci"}}`,
				`{"index":1,"id":"call_b","type":"function","function":{"name":"getWeather","arguments":"{\"city\":"}}`,
				`{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}`,
				`{"index":1,"function":{"arguments":"\"Rome\"}"}}`,
			} {
				fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[%s]}}]}`+"\n\n", c)
			}
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`+"\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[`+
			`{"id":"call_a","type":"function","function":{"name":"getWeather","arguments":"{\"city\":\"Paris\"}"}},`+
			`{"id":"call_b","type":"function","function":{"name":"getWeather","arguments":"{\"city\":\"Rome\"}"}}]},"finish_reason":"tool_calls"}],`+
			`"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &bodies
}

func run(t *testing.T, stream bool) {
	srv, bodies := fakeServer(t)
	app := loupe.New()
	m, err := openai.Define(app, openai.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", HTTPClient: srv.Client()}, "gpt-test")
	require.NoError(t, err)
	var cities []string
	var mu sync.Mutex
	w := loupe.DefineTool(app, "getWeather", "Weather.", func(tc *ai.ToolContext, in WeatherIn) (string, error) {
		mu.Lock()
		cities = append(cities, in.City)
		mu.Unlock()
		return "sunny in " + in.City, nil
	})
	var usages []int
	var providers []ai.ProviderInfo
	var chunks []*ai.ModelResponseChunk
	usage := func(next ai.ModelFunc) ai.ModelFunc {
		return func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			resp, err := next(ctx, req, cb)
			if err == nil && resp.Usage != nil {
				usages = append(usages, resp.Usage.TotalTokens)
				providers = append(providers, resp.Provider())
			}
			return resp, err
		}
	}
	opts := []ai.GenerateOption{
		ai.WithModel(m), ai.WithPrompt("weather?"), ai.WithTools(w), ai.WithConfig(map[string]any{"temperature": 0.1}),
		ai.WithMiddleware(usage),
	}
	if stream {
		opts = append(opts, ai.WithStreaming(func(ctx context.Context, c *ai.ModelResponseChunk) error {
			chunks = append(chunks, c)
			return nil
		}))
	}
	resp, err := loupe.Generate(context.Background(), app, opts...)
	require.NoError(t, err)
	require.Equal(t, "Sunny both", resp.Text())
	require.ElementsMatch(t, []string{"Paris", "Rome"}, cities)
	require.Equal(t, []int{20, 32}, usages)
	require.Equal(t, []ai.ProviderInfo{{RequestID: "req_1", ResponseID: "c1", Model: "m"}, {RequestID: "req_2", ResponseID: "c2", Model: "m"}},
		providers, "each model call says which request and model answered it")
	require.Equal(t, "openai/gpt-test", m.Name())

	second := (*bodies)[1]
	msgs := second["messages"].([]any)
	require.Len(t, msgs, 4)
	asst := msgs[1].(map[string]any)
	calls := asst["tool_calls"].([]any)
	require.Equal(t, "call_a", calls[0].(map[string]any)["id"])
	require.JSONEq(t, `{"city":"Paris"}`, calls[0].(map[string]any)["function"].(map[string]any)["arguments"].(string))
	require.Equal(t, map[string]any{"role": "tool", "tool_call_id": "call_a", "content": `"sunny in Paris"`}, msgs[2])
	require.Equal(t, "call_b", msgs[3].(map[string]any)["tool_call_id"])
	tools := (*bodies)[0]["tools"].([]any)
	require.Equal(t, "getWeather", tools[0].(map[string]any)["function"].(map[string]any)["name"])
	require.Equal(t, 0.1, (*bodies)[0]["temperature"])
	if stream {
		require.Equal(t, true, (*bodies)[0]["stream_options"].(map[string]any)["include_usage"])
		require.Equal(t, ai.RoleModel, chunks[0].Role)
		require.Equal(t, "call_a", chunks[0].Content[0].ToolRequest.Ref)
		require.Equal(t, ai.RoleTool, chunks[1].Role)
		require.Equal(t, 2, chunks[2].Index)
		require.Equal(t, "Sunny both", chunks[3].Accumulated())
	}
}

func TestOpenAICompatibleToolsRoundTrip(t *testing.T) { run(t, false) }

func TestOpenAICompatibleStreamedToolCallDeltasAndUsage(t *testing.T) { run(t, true) }
