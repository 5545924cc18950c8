package anthropic_test

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
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/anthropic"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type WeatherIn struct {
	City string `json:"city"`
}

// messagesServer answers POST /v1/messages in the Messages API's shapes: the first call of a
// conversation asks for two parallel tool calls (after a line of text), the call that carries
// their results answers with text. Streamed answers are server-sent events as the API sends
// them: message_start, content blocks started, their deltas (tool input as partial JSON cut
// mid-token), stopped, a message_delta with the stop reason and usage, message_stop, and pings
// between. Every answer carries a request-id header.
func messagesServer(t *testing.T) (*httptest.Server, *[]map[string]any) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("Authorization") != "Bearer sk-ant-test" || r.Header.Get("Anthropic-Version") == "" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"not_found_error","message":"%s %s"}}`, r.URL.Path, r.Header.Get("Authorization"))
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Request-Id", fmt.Sprintf("req_%02d", n))
		msgs := body["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		content, _ := last["content"].([]any)
		answering := len(content) > 0 && content[0].(map[string]any)["type"] == "tool_result"
		stream, _ := body["stream"].(bool)
		id := fmt.Sprintf("msg_%02d", n)
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			if answering {
				fmt.Fprintf(w, `{"id":%q,"type":"message","role":"assistant","model":"claude-test-20261101","content":[{"type":"text","text":"Sunny both"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}`, id)
				return
			}
			fmt.Fprintf(w, `{"id":%q,"type":"message","role":"assistant","model":"claude-test-20261101","content":[`+
				`{"type":"text","text":"Checking both."},`+
				`{"type":"tool_use","id":"toolu_a","name":"getWeather","input":{"city":"Paris"}},`+
				`{"type":"tool_use","id":"toolu_b","name":"getWeather","input":{"city":"Rome"}}],`+
				`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":8}}`, id)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(typ, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data) }
		event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%q,"type":"message","role":"assistant","model":"claude-test-20261101","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`, id, map[bool]int{false: 12, true: 30}[answering]))
		event("ping", `{"type":"ping"}`)
		if answering {
			event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Sunny "}}`)
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"both"}}`)
			event("content_block_stop", `{"type":"content_block_stop","index":0}`)
			event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`)
			event("message_stop", `{"type":"message_stop"}`)
			return
		}
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking both."}}`)
		event("content_block_stop", `{"type":"content_block_stop","index":0}`)
		for i, c := range []struct{ id, city string }{{"toolu_a", "Paris"}, {"toolu_b", "Rome"}} {
			idx := i + 1
			event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":"getWeather","input":{}}}`, idx, c.id))
			event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":""}}`, idx))
			event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}`, idx))
			event("ping", `{"type":"ping"}`)
			event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":"ty\": \"%s\"}"}}`, idx, c.city))
			event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, idx))
		}
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":8}}`)
		event("message_stop", `{"type":"message_stop"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &bodies
}

func run(t *testing.T, stream bool) {
	srv, bodies := messagesServer(t)
	app := loupe.New()
	m, err := anthropic.Define(app, anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-test", HTTPClient: srv.Client()}, "claude-test")
	require.NoError(t, err)
	var cities []string
	var mu sync.Mutex
	w := loupe.DefineTool(app, "getWeather", "Weather of a city.", func(tc *ai.ToolContext, in WeatherIn) (string, error) {
		mu.Lock()
		cities = append(cities, in.City)
		mu.Unlock()
		return "sunny in " + in.City, nil
	})
	var (
		usages    []int
		finishes  []ai.FinishReason
		providers []ai.ProviderInfo
		chunks    []*ai.ModelResponseChunk
	)
	record := func(next ai.ModelFunc) ai.ModelFunc {
		return func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			resp, err := next(ctx, req, cb)
			if err == nil {
				usages = append(usages, resp.Usage.TotalTokens)
				finishes = append(finishes, resp.FinishReason)
				providers = append(providers, resp.Provider())
			}
			return resp, err
		}
	}
	opts := []ai.GenerateOption{
		ai.WithModel(m), ai.WithSystem("Be brief."), ai.WithPrompt("weather?"), ai.WithTools(w),
		ai.WithConfig(map[string]any{"temperature": 0.1, "maxOutputTokens": 300, "topK": 5}),
		ai.WithMiddleware(record),
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
	require.Equal(t, []ai.FinishReason{ai.FinishReasonStop, ai.FinishReasonStop}, finishes, "tool_use and end_turn both end a turn")
	require.Equal(t, []ai.ProviderInfo{
		{RequestID: "req_01", ResponseID: "msg_01", Model: "claude-test-20261101"},
		{RequestID: "req_02", ResponseID: "msg_02", Model: "claude-test-20261101"},
	}, providers)
	require.Equal(t, "anthropic/claude-test", m.Name())

	first := (*bodies)[0]
	require.Equal(t, "claude-test", first["model"])
	require.Equal(t, float64(300), first["max_tokens"])
	require.Equal(t, 0.1, first["temperature"])
	require.Equal(t, float64(5), first["top_k"])
	require.Equal(t, []any{map[string]any{"type": "text", "text": "Be brief."}}, first["system"], "system messages go in system")
	tool := first["tools"].([]any)[0].(map[string]any)
	require.Equal(t, "getWeather", tool["name"])
	require.Equal(t, "Weather of a city.", tool["description"])
	schema := tool["input_schema"].(map[string]any)
	require.Equal(t, "object", schema["type"])
	require.Contains(t, schema["properties"], "city")

	// The second call sends the conversation back: the user's words, the model's text and both
	// tool calls, then both results in one user turn.
	msgs := (*bodies)[1]["messages"].([]any)
	require.Len(t, msgs, 3)
	require.Equal(t, "user", msgs[0].(map[string]any)["role"])
	asst := msgs[1].(map[string]any)
	require.Equal(t, "assistant", asst["role"])
	blocks := asst["content"].([]any)
	require.Len(t, blocks, 3)
	require.Equal(t, map[string]any{"type": "text", "text": "Checking both."}, blocks[0])
	require.Equal(t, "toolu_a", blocks[1].(map[string]any)["id"])
	require.Equal(t, map[string]any{"city": "Paris"}, blocks[1].(map[string]any)["input"])
	results := msgs[2].(map[string]any)
	require.Equal(t, "user", results["role"])
	rb := results["content"].([]any)
	require.Len(t, rb, 2)
	r0 := rb[0].(map[string]any)
	require.Equal(t, "tool_result", r0["type"])
	require.Equal(t, "toolu_a", r0["tool_use_id"])
	require.Equal(t, []any{map[string]any{"type": "text", "text": "sunny in Paris"}}, r0["content"])
	require.Equal(t, "toolu_b", rb[1].(map[string]any)["tool_use_id"])

	if stream {
		require.Equal(t, true, first["stream"])
		var text []string
		for _, c := range chunks {
			if c.Role == ai.RoleModel && c.Text() != "" {
				text = append(text, c.Text())
			}
		}
		require.Equal(t, []string{"Checking both.", "Sunny ", "both"}, text, "text streams as its deltas arrive")
		var calls []string
		for _, c := range chunks {
			for _, p := range c.Content {
				if p.ToolRequest != nil {
					calls = append(calls, p.ToolRequest.Ref)
				}
			}
		}
		require.Equal(t, []string{"toolu_a", "toolu_b"}, calls, "tool calls stream once whole")
	}
}

func TestAnthropicToolsRoundTrip(t *testing.T) { run(t, false) }

func TestAnthropicStreamedTextToolInputDeltasAndUsage(t *testing.T) { run(t, true) }

// TestAnthropicStopReasonsAndErrors: each stop reason the Messages API sends maps to Genkit's
// finish reason (a cap reached is length, a refusal blocked, a pause other, with a message that
// says what happened), cache tokens count as input, and an API error comes back with its type,
// message and request id, never as an empty answer.
func TestAnthropicStopReasonsAndErrors(t *testing.T) {
	var reason string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Request-Id", "req_x")
		w.Header().Set("Content-Type", "application/json")
		if reason == "error" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be positive"},"request_id":"req_x"}`)
			return
		}
		fmt.Fprintf(w, `{"id":"msg_x","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":"partial"}],"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":4,"cache_read_input_tokens":5,"output_tokens":6}}`, reason)
	}))
	t.Cleanup(srv.Close)
	m := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client(), MaxRetries: -1}, "claude-test")
	req := &ai.ModelRequest{Messages: []*ai.Message{ai.NewTextMessage(ai.RoleUser, "hi")}}
	for stop, want := range map[string]ai.FinishReason{
		"end_turn": ai.FinishReasonStop, "stop_sequence": ai.FinishReasonStop, "max_tokens": ai.FinishReasonLength,
		"model_context_window_exceeded": ai.FinishReasonLength, "refusal": ai.FinishReasonBlocked, "pause_turn": ai.FinishReasonOther,
	} {
		reason = stop
		resp, err := m.Generate(context.Background(), req, nil)
		require.NoError(t, err, stop)
		require.Equal(t, want, resp.FinishReason, stop)
		require.Equal(t, "partial", resp.Text())
		require.Equal(t, ai.GenerationUsage{InputTokens: 12, OutputTokens: 6, TotalTokens: 18, CachedContentTokens: 5}, *resp.Usage, stop)
		if stop == "refusal" || stop == "pause_turn" {
			require.NotEmpty(t, resp.FinishMessage, stop)
		}
	}
	reason = "error"
	_, err := m.Generate(context.Background(), req, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "max_tokens: must be positive")
	require.Contains(t, err.Error(), "req_x")
}

// TestAnthropicSendsMediaAndRefusesWhatItCannotSend: an image given as a base64 data: URL goes
// inline and one given as an https URL by reference; any other media is refused before a call.
func TestAnthropicSendsMediaAndRefusesWhatItCannotSend(t *testing.T) {
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_m","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":"a cat"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	m := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client()}, "claude-test")
	msg := &ai.Message{Role: ai.RoleUser, Content: []*ai.Part{
		ai.NewTextPart("what is it?"),
		ai.NewMediaPart("image/png", "data:image/png;base64,iVBORw0KGgo="),
		ai.NewMediaPart("", "https://example.com/cat.jpg"),
	}}
	resp, err := m.Generate(context.Background(), &ai.ModelRequest{Messages: []*ai.Message{msg}}, nil)
	require.NoError(t, err)
	require.Equal(t, "a cat", resp.Text())
	content := body["messages"].([]any)[0].(map[string]any)["content"].([]any)
	require.Equal(t, map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}, content[1])
	require.Equal(t, map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": "https://example.com/cat.jpg"}}, content[2])

	msg.Content = []*ai.Part{ai.NewMediaPart("", "file:///etc/passwd")}
	_, err = m.Generate(context.Background(), &ai.ModelRequest{Messages: []*ai.Message{msg}}, nil)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "data: URL or an http(s) URL"), err.Error())
}
