// Package openai provides models served by any OpenAI-compatible chat completions endpoint:
// OpenAI itself, Ollama, vLLM, LM Studio and the like, built on github.com/openai/openai-go/v3,
// with tool calls and streaming (streamed tool-call deltas and usage included).
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
)

// Config locates the endpoint.
type Config struct {
	// BaseURL is the endpoint, for example "http://localhost:11434/v1" (Ollama);
	// https://api.openai.com/v1 when empty.
	BaseURL string
	// APIKey is sent as a bearer token.
	APIKey string
	// HTTPClient calls the endpoint; http.DefaultClient when nil.
	HTTPClient *http.Client
}

// FromEnv reads the endpoint from OPENAI_BASE_URL and OPENAI_API_KEY. ok is false when neither is
// set, so that a program can fall back to a scripted model.
func FromEnv() (cfg Config, ok bool) {
	cfg = Config{BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY")}
	return cfg, cfg.BaseURL != "" || cfg.APIKey != ""
}

// GenerationConfig is the model configuration the provider understands (ai.WithConfig), in
// Genkit's names; a map with the same JSON keys works too.
type GenerationConfig struct {
	// Temperature is the sampling temperature.
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxOutputTokens caps the answer's length.
	MaxOutputTokens int64 `json:"maxOutputTokens,omitempty"`
	// TopP is the nucleus-sampling probability mass.
	TopP *float64 `json:"topP,omitempty"`
	// StopSequences end the answer where they appear.
	StopSequences []string `json:"stopSequences,omitempty"`
}

// New returns a model named "openai/<model>" calling model at the configured endpoint, not
// registered: pass it to ai.WithModel, or use Define.
func New(cfg Config, model string) ai.Model {
	opts := []option.RequestOption{option.WithAPIKey(cfg.APIKey)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &provider{name: "openai/" + model, client: oa.NewClient(opts...), model: model}
}

// Define registers the model named model at the endpoint, as /model/openai/<model>, and returns
// it. It fails when a model of that name is registered already.
func Define(app *loupe.App, cfg Config, model string) (m ai.Model, err error) {
	p := New(cfg, model).(*provider)
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("define model %s: %v", p.name, r)
		}
	}()
	return loupe.DefineModel(app, p.name, &ai.ModelOptions{
		Label:    "OpenAI-compatible " + model,
		Supports: &ai.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, ToolChoice: true},
	}, p.Generate), nil
}

type provider struct {
	name   string
	client oa.Client
	model  string
}

// Name implements ai.Model.
func (p *provider) Name() string { return p.name }

// Generate implements ai.Model.
func (p *provider) Generate(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	var httpResp *http.Response
	if cb == nil {
		cc, err := p.client.Chat.Completions.New(ctx, params, option.WithResponseInto(&httpResp))
		if err != nil {
			return nil, fmt.Errorf("openai chat completion: %w", err)
		}
		if len(cc.Choices) == 0 {
			return nil, ai.NewError(ai.StatusUnknown, "openai chat completion: no choices")
		}
		ch := cc.Choices[0]
		msg := &ai.Message{Role: ai.RoleModel}
		if ch.Message.Content != "" {
			msg.Content = append(msg.Content, ai.NewTextPart(ch.Message.Content))
		}
		for _, tc := range ch.Message.ToolCalls {
			msg.Content = append(msg.Content, toolRequest(tc.ID, tc.Function.Name, tc.Function.Arguments, extraOf(tc.RawJSON())))
		}
		return &ai.ModelResponse{Message: msg, FinishReason: finishReason(ch.FinishReason), Usage: usage(cc.Usage),
			Custom: providerInfo(httpResp, cc.ID, cc.Model)}, nil
	}

	params.StreamOptions = oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}
	stream := p.client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&httpResp))
	defer stream.Close()
	var (
		text      strings.Builder
		calls     []*partialCall
		byIndex   = map[int64]*partialCall{}
		finish    string
		use       *ai.GenerationUsage
		id, model string
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.ID != "" {
			id = chunk.ID
		}
		if chunk.Model != "" {
			model = chunk.Model
		}
		if chunk.Usage.TotalTokens > 0 || chunk.Usage.PromptTokens > 0 {
			use = usage(chunk.Usage)
		}
		for _, ch := range chunk.Choices {
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: []*ai.Part{ai.NewTextPart(d)}}); err != nil {
					return nil, err
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				// A delta continues the call at its index, unless it names another call: Gemini's
				// endpoint sends each of several parallel calls whole, all at index 0 (or with no
				// index), each with its own id.
				c := byIndex[tc.Index]
				if c == nil || (tc.ID != "" && c.id != "" && tc.ID != c.id) {
					c = &partialCall{}
					calls = append(calls, c)
					byIndex[tc.Index] = c
				}
				if tc.ID != "" {
					c.id = tc.ID
				}
				if tc.Function.Name != "" {
					c.name += tc.Function.Name
				}
				if raw := tc.JSON.ExtraFields[extraContent].Raw(); raw != "" {
					c.extra = raw
				}
				c.args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, fmt.Errorf("openai chat completion stream: %w", err)
	}
	msg := &ai.Message{Role: ai.RoleModel}
	if text.Len() > 0 {
		msg.Content = append(msg.Content, ai.NewTextPart(text.String()))
	}
	var toolParts []*ai.Part
	for _, c := range calls {
		toolParts = append(toolParts, toolRequest(c.id, c.name, c.args.String(), c.extra))
	}
	if len(toolParts) > 0 {
		msg.Content = append(msg.Content, toolParts...)
		if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: toolParts}); err != nil {
			return nil, err
		}
	}
	return &ai.ModelResponse{Message: msg, FinishReason: finishReason(finish), Usage: use,
		Custom: providerInfo(httpResp, id, model)}, nil
}

// providerInfo is what the endpoint said about the call: its x-request-id header (OpenAI's; many
// compatible servers send none), the completion's id and the model that answered.
func providerInfo(resp *http.Response, id, model string) ai.ProviderInfo {
	pi := ai.ProviderInfo{ResponseID: id, Model: model}
	if resp != nil {
		pi.RequestID = resp.Header.Get("X-Request-Id")
	}
	return pi
}

type partialCall struct {
	id, name, extra string
	args            strings.Builder
}

// extraContent is the tool call field in which Gemini's endpoint returns a thought signature
// ({"google": {"thought_signature": …}}) that it wants back with the call in the next request.
// It is kept in the tool request part's metadata under the same name and sent back as it came.
const extraContent = "extra_content"

// extraOf reads extra_content from a tool call's JSON.
func extraOf(raw string) string {
	var tc struct {
		Extra json.RawMessage `json:"extra_content"`
	}
	if json.Unmarshal([]byte(raw), &tc) != nil {
		return ""
	}
	return string(tc.Extra)
}

func toolRequest(id, name, args, extra string) *ai.Part {
	var input any
	if strings.TrimSpace(args) != "" {
		input = json.RawMessage(args)
	}
	p := ai.NewToolRequestPart(&ai.ToolRequest{Name: name, Ref: id, Input: input})
	if extra != "" && json.Valid([]byte(extra)) {
		p.Metadata = map[string]any{extraContent: json.RawMessage(extra)}
	}
	return p
}

func usage(u oa.CompletionUsage) *ai.GenerationUsage {
	return &ai.GenerationUsage{InputTokens: int(u.PromptTokens), OutputTokens: int(u.CompletionTokens), TotalTokens: int(u.TotalTokens)}
}

func finishReason(s string) ai.FinishReason {
	switch s {
	case "stop", "tool_calls", "function_call":
		return ai.FinishReasonStop
	case "length":
		return ai.FinishReasonLength
	case "content_filter":
		return ai.FinishReasonBlocked
	case "":
		return ai.FinishReasonUnknown
	}
	return ai.FinishReasonOther
}

func (p *provider) params(req *ai.ModelRequest) (oa.ChatCompletionNewParams, error) {
	params := oa.ChatCompletionNewParams{Model: p.model}
	for _, m := range req.Messages {
		msgs, err := convertMessage(m)
		if err != nil {
			return params, err
		}
		params.Messages = append(params.Messages, msgs...)
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fd.Description = oa.String(t.Description)
		}
		if t.InputSchema != nil {
			var ps map[string]any
			if err := json.Unmarshal(t.InputSchema.Raw(), &ps); err != nil {
				return params, fmt.Errorf("openai: tool %s schema: %w", t.Name, err)
			}
			fd.Parameters = ps
		}
		params.Tools = append(params.Tools, oa.ChatCompletionFunctionTool(fd))
	}
	switch req.ToolChoice {
	case ai.ToolChoiceAuto, ai.ToolChoiceNone, ai.ToolChoiceRequired:
		params.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String(string(req.ToolChoice))}
	}
	if req.Config != nil {
		var gc GenerationConfig
		b, err := json.Marshal(req.Config)
		if err != nil {
			return params, fmt.Errorf("openai: config: %w", err)
		}
		if err := json.Unmarshal(b, &gc); err != nil {
			return params, ai.NewError(ai.StatusInvalidArgument, "openai: config: %w", err)
		}
		if gc.Temperature != nil {
			params.Temperature = oa.Float(*gc.Temperature)
		}
		if gc.TopP != nil {
			params.TopP = oa.Float(*gc.TopP)
		}
		if gc.MaxOutputTokens > 0 {
			params.MaxCompletionTokens = oa.Int(gc.MaxOutputTokens)
		}
		if len(gc.StopSequences) > 0 {
			params.Stop = oa.ChatCompletionNewParamsStopUnion{OfStringArray: gc.StopSequences}
		}
	}
	return params, nil
}

func convertMessage(m *ai.Message) ([]oa.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case ai.RoleSystem:
		return []oa.ChatCompletionMessageParamUnion{oa.SystemMessage(m.Text())}, nil
	case ai.RoleUser:
		return []oa.ChatCompletionMessageParamUnion{oa.UserMessage(m.Text())}, nil
	case ai.RoleModel:
		am := oa.ChatCompletionAssistantMessageParam{}
		if t := m.Text(); t != "" {
			am.Content.OfString = oa.String(t)
		}
		for _, p := range m.Content {
			if p.ToolRequest == nil {
				continue
			}
			args, err := json.Marshal(p.ToolRequest.Input)
			if err != nil {
				return nil, fmt.Errorf("openai: tool request %s: %w", p.ToolRequest.Name, err)
			}
			if p.ToolRequest.Input == nil {
				args = []byte("{}")
			}
			call := &oa.ChatCompletionMessageFunctionToolCallParam{
				ID:       p.ToolRequest.Ref,
				Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: p.ToolRequest.Name, Arguments: string(args)},
			}
			if extra, ok := p.Metadata[extraContent]; ok {
				call.SetExtraFields(map[string]any{extraContent: extra})
			}
			am.ToolCalls = append(am.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{OfFunction: call})
		}
		return []oa.ChatCompletionMessageParamUnion{{OfAssistant: &am}}, nil
	case ai.RoleTool:
		var out []oa.ChatCompletionMessageParamUnion
		for _, p := range m.Content {
			if p.ToolResponse == nil {
				continue
			}
			b, err := json.Marshal(p.ToolResponse.Output)
			if err != nil {
				return nil, fmt.Errorf("openai: tool response %s: %w", p.ToolResponse.Name, err)
			}
			out = append(out, oa.ToolMessage(string(b), p.ToolResponse.Ref))
		}
		return out, nil
	}
	return nil, ai.NewError(ai.StatusInvalidArgument, "openai: unsupported role %q", m.Role)
}
