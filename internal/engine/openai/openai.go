// Package openai is a model provider for any OpenAI-compatible chat completions endpoint (OpenAI,
// Ollama, vLLM, LM Studio), built on github.com/openai/openai-go/v3. It supports tools and
// streaming, including streamed tool-call deltas and usage.
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loupe-dev/loupe/internal/engine"
)

// Config locates the endpoint. BaseURL is for example "https://api.openai.com/v1" or
// "http://localhost:11434/v1" (Ollama).
type Config struct {
	BaseURL    string
	APIKey     string
	HTTPClient *http.Client
}

// GenerationConfig is the model configuration the provider understands; a map with the same JSON
// keys works too.
type GenerationConfig struct {
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxOutputTokens int64    `json:"maxOutputTokens,omitempty"`
	TopP            *float64 `json:"topP,omitempty"`
	StopSequences   []string `json:"stopSequences,omitempty"`
}

// New returns a model named "openai/<model>" calling model at the configured endpoint.
func New(cfg Config, model string) engine.Model {
	opts := []option.RequestOption{option.WithAPIKey(cfg.APIKey)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	p := &provider{client: oa.NewClient(opts...), model: model}
	return engine.NewModel("openai/"+model, engine.ModelInfo{
		Label:    "OpenAI-compatible " + model,
		Supports: engine.ModelSupports{Multiturn: true, Tools: true, SystemRole: true, ToolChoice: true},
	}, p.generate)
}

// Define registers New(cfg, model) in r.
func Define(r *engine.Registry, cfg Config, model string) (engine.Model, error) {
	m := New(cfg, model)
	if err := r.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

type provider struct {
	client oa.Client
	model  string
}

func (p *provider) generate(ctx context.Context, req *engine.ModelRequest, cb engine.ModelStreamFunc) (*engine.ModelResponse, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	if cb == nil {
		cc, err := p.client.Chat.Completions.New(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("openai chat completion: %w", err)
		}
		if len(cc.Choices) == 0 {
			return nil, engine.Errorf(engine.StatusUnknown, "openai chat completion: no choices")
		}
		ch := cc.Choices[0]
		msg := &engine.Message{Role: engine.RoleModel}
		if ch.Message.Content != "" {
			msg.Content = append(msg.Content, engine.NewTextPart(ch.Message.Content))
		}
		for _, tc := range ch.Message.ToolCalls {
			msg.Content = append(msg.Content, toolRequest(tc.ID, tc.Function.Name, tc.Function.Arguments))
		}
		return &engine.ModelResponse{Message: msg, FinishReason: finishReason(ch.FinishReason), Usage: usage(cc.Usage)}, nil
	}

	params.StreamOptions = oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var (
		text   strings.Builder
		calls  []*partialCall
		finish string
		use    *engine.Usage
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Usage.TotalTokens > 0 || chunk.Usage.PromptTokens > 0 {
			use = usage(chunk.Usage)
		}
		for _, ch := range chunk.Choices {
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				if err := cb(ctx, &engine.ModelResponseChunk{Role: engine.RoleModel, Content: []*engine.Part{engine.NewTextPart(d)}}); err != nil {
					return nil, err
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				for int(tc.Index) >= len(calls) {
					calls = append(calls, &partialCall{})
				}
				c := calls[tc.Index]
				if tc.ID != "" {
					c.id = tc.ID
				}
				if tc.Function.Name != "" {
					c.name += tc.Function.Name
				}
				c.args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, fmt.Errorf("openai chat completion stream: %w", err)
	}
	msg := &engine.Message{Role: engine.RoleModel}
	if text.Len() > 0 {
		msg.Content = append(msg.Content, engine.NewTextPart(text.String()))
	}
	var toolParts []*engine.Part
	for _, c := range calls {
		toolParts = append(toolParts, toolRequest(c.id, c.name, c.args.String()))
	}
	if len(toolParts) > 0 {
		msg.Content = append(msg.Content, toolParts...)
		if err := cb(ctx, &engine.ModelResponseChunk{Role: engine.RoleModel, Content: toolParts}); err != nil {
			return nil, err
		}
	}
	return &engine.ModelResponse{Message: msg, FinishReason: finishReason(finish), Usage: use}, nil
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func toolRequest(id, name, args string) *engine.Part {
	var input any
	if strings.TrimSpace(args) != "" {
		input = json.RawMessage(args)
	}
	return engine.NewToolRequestPart(&engine.ToolRequest{Name: name, Ref: id, Input: input})
}

func usage(u oa.CompletionUsage) *engine.Usage {
	return &engine.Usage{InputTokens: int(u.PromptTokens), OutputTokens: int(u.CompletionTokens), TotalTokens: int(u.TotalTokens)}
}

func finishReason(s string) engine.FinishReason {
	switch s {
	case "stop", "tool_calls", "function_call":
		return engine.FinishReasonStop
	case "length":
		return engine.FinishReasonLength
	case "content_filter":
		return engine.FinishReasonBlocked
	case "":
		return engine.FinishReasonUnknown
	}
	return engine.FinishReasonOther
}

func (p *provider) params(req *engine.ModelRequest) (oa.ChatCompletionNewParams, error) {
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
	case engine.ToolChoiceAuto, engine.ToolChoiceNone, engine.ToolChoiceRequired:
		params.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String(string(req.ToolChoice))}
	}
	if req.Config != nil {
		var gc GenerationConfig
		b, err := json.Marshal(req.Config)
		if err != nil {
			return params, fmt.Errorf("openai: config: %w", err)
		}
		if err := json.Unmarshal(b, &gc); err != nil {
			return params, engine.Errorf(engine.StatusInvalidArgument, "openai: config: %w", err)
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

func convertMessage(m *engine.Message) ([]oa.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case engine.RoleSystem:
		return []oa.ChatCompletionMessageParamUnion{oa.SystemMessage(m.Text())}, nil
	case engine.RoleUser:
		return []oa.ChatCompletionMessageParamUnion{oa.UserMessage(m.Text())}, nil
	case engine.RoleModel:
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
			am.ToolCalls = append(am.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
					ID:       p.ToolRequest.Ref,
					Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: p.ToolRequest.Name, Arguments: string(args)},
				},
			})
		}
		return []oa.ChatCompletionMessageParamUnion{{OfAssistant: &am}}, nil
	case engine.RoleTool:
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
	return nil, engine.Errorf(engine.StatusInvalidArgument, "openai: unsupported role %q", m.Role)
}
