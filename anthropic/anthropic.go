// Package anthropic provides Anthropic's Claude models through the Messages API, built on the
// official Go SDK (github.com/anthropics/anthropic-sdk-go): tool calls, streaming (text deltas as
// they come, tool calls once whole), usage with cache tokens, stop reasons mapped to Genkit's
// finish reasons, and the request id and answering model of every call (ai.ProviderInfo).
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
)

// DefaultMaxTokens caps an answer when the request's config sets no maxOutputTokens: the
// Messages API requires a cap on every call.
const DefaultMaxTokens = 4096

// Config locates the endpoint.
type Config struct {
	// BaseURL is the endpoint; https://api.anthropic.com when empty.
	BaseURL string
	// APIKey is the API key (the SDK sends it as a bearer token).
	APIKey string
	// HTTPClient calls the endpoint; the SDK's default client when nil.
	HTTPClient *http.Client
	// MaxRetries is how many times the SDK retries a failed call (429, 5xx, connection errors)
	// with backoff; the SDK's default (2) when 0, none when negative.
	MaxRetries int
}

// FromEnv reads the endpoint from ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY. ok is false when
// neither is set, so that a program can fall back to a scripted model.
func FromEnv() (cfg Config, ok bool) {
	cfg = Config{BaseURL: os.Getenv("ANTHROPIC_BASE_URL"), APIKey: os.Getenv("ANTHROPIC_API_KEY")}
	return cfg, cfg.BaseURL != "" || cfg.APIKey != ""
}

// GenerationConfig is the model configuration the provider understands (ai.WithConfig), in
// Genkit's names; a map with the same JSON keys works too.
type GenerationConfig struct {
	// Temperature is the sampling temperature.
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxOutputTokens caps the answer's length (DefaultMaxTokens when 0).
	MaxOutputTokens int64 `json:"maxOutputTokens,omitempty"`
	// TopP is the nucleus-sampling probability mass.
	TopP *float64 `json:"topP,omitempty"`
	// TopK samples from the K likeliest tokens only.
	TopK int64 `json:"topK,omitempty"`
	// StopSequences end the answer where they appear.
	StopSequences []string `json:"stopSequences,omitempty"`
}

// New returns a model named "anthropic/<model>" calling model at the configured endpoint, not
// registered: pass it to ai.WithModel, or use Define. The client reads no environment variable;
// FromEnv does that.
func New(cfg Config, model string) ai.Model {
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithAPIKey(cfg.APIKey)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	switch {
	case cfg.MaxRetries > 0:
		opts = append(opts, option.WithMaxRetries(cfg.MaxRetries))
	case cfg.MaxRetries < 0:
		opts = append(opts, option.WithMaxRetries(0))
	}
	return &provider{name: "anthropic/" + model, client: sdk.NewClient(opts...), model: model}
}

// Define registers the model named model at the endpoint, as /model/anthropic/<model>, and
// returns it. It fails when a model of that name is registered already.
func Define(app *loupe.App, cfg Config, model string) (m ai.Model, err error) {
	p := New(cfg, model).(*provider)
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("define model %s: %v", p.name, r)
		}
	}()
	return loupe.DefineModel(app, p.name, &ai.ModelOptions{
		Label:    "Anthropic " + model,
		Supports: &ai.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, ToolChoice: true, Media: true},
	}, p.Generate), nil
}

type provider struct {
	name   string
	client sdk.Client
	model  string
}

// Name implements ai.Model.
func (p *provider) Name() string { return p.name }

// Generate implements ai.Model.
func (p *provider) Generate(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	params, opts, err := p.params(req)
	if err != nil {
		return nil, err
	}
	var httpResp *http.Response
	opts = append(opts, option.WithResponseInto(&httpResp))
	if cb == nil {
		msg, err := p.client.Messages.New(ctx, params, opts...)
		if err != nil {
			return nil, fmt.Errorf("anthropic messages: %w", err)
		}
		return response(msg, httpResp)
	}

	stream := p.client.Messages.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var acc sdk.Message
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			return nil, fmt.Errorf("anthropic messages stream: %w", err)
		}
		if ev.Type != "content_block_delta" {
			continue
		}
		var part *ai.Part
		switch ev.Delta.Type {
		case "text_delta":
			part = ai.NewTextPart(ev.Delta.Text)
		case "thinking_delta":
			part = ai.NewReasoningPart(ev.Delta.Thinking, nil)
		}
		if part != nil {
			if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: []*ai.Part{part}}); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, fmt.Errorf("anthropic messages stream: %w", err)
	}
	resp, err := response(&acc, httpResp)
	if err != nil {
		return nil, err
	}
	if calls := resp.Message.ToolRequests(); len(calls) > 0 {
		var parts []*ai.Part
		for _, c := range calls {
			parts = append(parts, ai.NewToolRequestPart(c.ToolRequest))
		}
		if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: parts}); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// response converts a whole message (received, or accumulated from a stream).
func response(m *sdk.Message, httpResp *http.Response) (*ai.ModelResponse, error) {
	msg := &ai.Message{Role: ai.RoleModel}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			msg.Content = append(msg.Content, ai.NewTextPart(b.Text))
		case "thinking":
			var sig []byte
			if b.Signature != "" {
				sig = []byte(b.Signature)
			}
			msg.Content = append(msg.Content, ai.NewReasoningPart(b.Thinking, sig))
		case "tool_use":
			var input any
			if len(b.Input) > 0 && string(b.Input) != "{}" {
				input = json.RawMessage(b.Input)
			} else {
				input = map[string]any{}
			}
			msg.Content = append(msg.Content, ai.NewToolRequestPart(&ai.ToolRequest{Name: b.Name, Ref: b.ID, Input: input}))
		}
	}
	pi := ai.ProviderInfo{ResponseID: m.ID, Model: string(m.Model)}
	if httpResp != nil {
		pi.RequestID = httpResp.Header.Get("Request-Id")
	}
	resp := &ai.ModelResponse{
		Message:      msg,
		FinishReason: finishReason(m.StopReason),
		Usage: &ai.GenerationUsage{
			InputTokens:         int(m.Usage.InputTokens + m.Usage.CacheCreationInputTokens + m.Usage.CacheReadInputTokens),
			OutputTokens:        int(m.Usage.OutputTokens),
			TotalTokens:         int(m.Usage.InputTokens + m.Usage.CacheCreationInputTokens + m.Usage.CacheReadInputTokens + m.Usage.OutputTokens),
			CachedContentTokens: int(m.Usage.CacheReadInputTokens),
		},
		Custom: pi,
	}
	switch m.StopReason {
	case sdk.StopReasonRefusal:
		resp.FinishMessage = "the model declined to answer"
	case sdk.StopReasonPauseTurn:
		resp.FinishMessage = "the model paused a long turn (pause_turn): send the answer back to continue it"
	case sdk.StopReasonModelContextWindowExceeded:
		resp.FinishMessage = "the answer reached the model's context window"
	}
	return resp, nil
}

// finishReason maps the Messages API's stop reasons to Genkit's finish reasons, as Genkit's
// Anthropic plugin does: a turn that ended (its end, a stop sequence, a tool call) is stop, a cap
// reached is length, a refusal is blocked.
func finishReason(r sdk.StopReason) ai.FinishReason {
	switch r {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence, sdk.StopReasonToolUse:
		return ai.FinishReasonStop
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return ai.FinishReasonLength
	case sdk.StopReasonRefusal:
		return ai.FinishReasonBlocked
	case "":
		return ai.FinishReasonUnknown
	}
	return ai.FinishReasonOther
}

// params builds the request, and the options that carry what the SDK's params no longer name
// (sampling settings).
func (p *provider) params(req *ai.ModelRequest) (sdk.MessageNewParams, []option.RequestOption, error) {
	params := sdk.MessageNewParams{Model: sdk.Model(p.model), MaxTokens: DefaultMaxTokens}
	var opts []option.RequestOption
	// The API wants user and assistant turns alternating: a tool message is a user turn, and two
	// user turns in a row (a tool's answer, then the user's words) become one.
	var turns []turn
	for _, m := range req.Messages {
		if m.Role == ai.RoleSystem {
			params.System = append(params.System, sdk.TextBlockParam{Text: m.Text()})
			continue
		}
		t, err := convertMessage(m)
		if err != nil {
			return params, nil, err
		}
		if n := len(turns); n > 0 && turns[n-1].assistant == t.assistant {
			turns[n-1].blocks = append(turns[n-1].blocks, t.blocks...)
			continue
		}
		turns = append(turns, t)
	}
	for _, t := range turns {
		if t.assistant {
			params.Messages = append(params.Messages, sdk.NewAssistantMessage(t.blocks...))
		} else {
			params.Messages = append(params.Messages, sdk.NewUserMessage(t.blocks...))
		}
	}
	for _, t := range req.Tools {
		schema := sdk.ToolInputSchemaParam{}
		if t.InputSchema != nil {
			var s map[string]any
			if err := json.Unmarshal(t.InputSchema.Raw(), &s); err != nil {
				return params, nil, fmt.Errorf("anthropic: tool %s schema: %w", t.Name, err)
			}
			schema.Properties = s["properties"]
			if req, ok := s["required"].([]any); ok {
				for _, r := range req {
					if name, ok := r.(string); ok {
						schema.Required = append(schema.Required, name)
					}
				}
			}
			delete(s, "properties")
			delete(s, "required")
			delete(s, "type")
			delete(s, "$schema")
			if len(s) > 0 {
				schema.ExtraFields = s
			}
		}
		tool := sdk.ToolUnionParamOfTool(schema, t.Name)
		if t.Description != "" {
			tool.OfTool.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, tool)
	}
	switch req.ToolChoice {
	case ai.ToolChoiceAuto:
		params.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{}}
	case ai.ToolChoiceRequired:
		params.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	case ai.ToolChoiceNone:
		params.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	}
	if req.Config != nil {
		var gc GenerationConfig
		b, err := json.Marshal(req.Config)
		if err != nil {
			return params, nil, fmt.Errorf("anthropic: config: %w", err)
		}
		if err := json.Unmarshal(b, &gc); err != nil {
			return params, nil, ai.NewError(ai.StatusInvalidArgument, "anthropic: config: %w", err)
		}
		if gc.MaxOutputTokens > 0 {
			params.MaxTokens = gc.MaxOutputTokens
		}
		params.StopSequences = gc.StopSequences
		if gc.Temperature != nil {
			opts = append(opts, option.WithJSONSet("temperature", *gc.Temperature))
		}
		if gc.TopP != nil {
			opts = append(opts, option.WithJSONSet("top_p", *gc.TopP))
		}
		if gc.TopK > 0 {
			opts = append(opts, option.WithJSONSet("top_k", gc.TopK))
		}
	}
	return params, opts, nil
}

// turn is one message of the conversation sent: the model's (assistant) or not (user).
type turn struct {
	assistant bool
	blocks    []sdk.ContentBlockParamUnion
}

func convertMessage(m *ai.Message) (turn, error) {
	var t turn
	switch m.Role {
	case ai.RoleUser, ai.RoleTool:
	case ai.RoleModel:
		t.assistant = true
	default:
		return t, ai.NewError(ai.StatusInvalidArgument, "anthropic: unsupported role %q", m.Role)
	}
	for _, p := range m.Content {
		switch {
		case p.ToolRequest != nil:
			input := p.ToolRequest.Input
			if input == nil {
				input = map[string]any{}
			}
			t.blocks = append(t.blocks, sdk.NewToolUseBlock(p.ToolRequest.Ref, input, p.ToolRequest.Name))
		case p.ToolResponse != nil:
			out, err := toolOutput(p.ToolResponse.Output)
			if err != nil {
				return t, fmt.Errorf("anthropic: tool response %s: %w", p.ToolResponse.Name, err)
			}
			t.blocks = append(t.blocks, sdk.NewToolResultBlock(p.ToolResponse.Ref, out, false))
		case p.Media != nil:
			b, err := mediaBlock(p.Media)
			if err != nil {
				return t, err
			}
			t.blocks = append(t.blocks, b)
		case p.Reasoning != "":
			// Thinking goes back only with its signature, which the API checks.
			if sig := signature(p.Metadata["signature"]); t.assistant && sig != "" {
				t.blocks = append(t.blocks, sdk.NewThinkingBlock(sig, p.Reasoning))
			}
		case p.Text != "":
			t.blocks = append(t.blocks, sdk.NewTextBlock(p.Text))
		}
	}
	return t, nil
}

// signature reads a reasoning part's signature: bytes as the model put them, or their base64
// JSON form read back from storage.
func signature(v any) string {
	switch s := v.(type) {
	case []byte:
		return string(s)
	case string:
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return string(b)
		}
	}
	return ""
}

// toolOutput is a tool's answer as the text the model reads: a string as it is, anything else
// as JSON.
func toolOutput(v any) (string, error) {
	switch o := v.(type) {
	case string:
		return o, nil
	case json.RawMessage:
		var s string
		if json.Unmarshal(o, &s) == nil {
			return s, nil
		}
		return string(o), nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// mediaBlock is an image given by a data: URL (sent inline) or an http(s) URL (fetched by the
// API).
func mediaBlock(m *ai.Media) (sdk.ContentBlockParamUnion, error) {
	if rest, ok := strings.CutPrefix(m.URL, "data:"); ok {
		meta, data, found := strings.Cut(rest, ",")
		mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !found || !isBase64 {
			return sdk.ContentBlockParamUnion{}, ai.NewError(ai.StatusInvalidArgument, "anthropic: media must be a base64 data: URL or an http(s) URL")
		}
		if mediaType == "" {
			mediaType = m.ContentType
		}
		return sdk.NewImageBlockBase64(mediaType, data), nil
	}
	if strings.HasPrefix(m.URL, "https://") || strings.HasPrefix(m.URL, "http://") {
		return sdk.NewImageBlock(sdk.URLImageSourceParam{URL: m.URL}), nil
	}
	return sdk.ContentBlockParamUnion{}, ai.NewError(ai.StatusInvalidArgument, "anthropic: media must be a base64 data: URL or an http(s) URL")
}
