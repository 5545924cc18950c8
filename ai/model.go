package ai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// ToolDefinition is what a model is told about a tool.
type ToolDefinition struct {
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	InputSchema  *Schema        `json:"inputSchema,omitempty"`
	OutputSchema *Schema        `json:"outputSchema,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// OutputConfig is the output constraint of a model request.
type OutputConfig struct {
	Format      string  `json:"format,omitempty"`
	Schema      *Schema `json:"schema,omitempty"`
	Constrained bool    `json:"constrained,omitempty"`
	ContentType string  `json:"contentType,omitempty"`
}

// Document is a retrieved document given to the model as context.
type Document struct {
	Content  []*Part        `json:"content"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// DocumentFromText returns a document of one text part.
func DocumentFromText(text string, metadata map[string]any) *Document {
	return &Document{Content: []*Part{NewTextPart(text)}, Metadata: metadata}
}

// ToolChoice tells the model whether it may, must or must not call tools.
type ToolChoice string

// Tool choices, as in Genkit.
const (
	ToolChoiceAuto     ToolChoice = "auto"
	ToolChoiceRequired ToolChoice = "required"
	ToolChoiceNone     ToolChoice = "none"
)

// ModelRequest is what one model call receives (Genkit's GenerateRequest).
type ModelRequest struct {
	Messages   []*Message        `json:"messages"`
	Config     any               `json:"config,omitempty"`
	Tools      []*ToolDefinition `json:"tools,omitempty"`
	ToolChoice ToolChoice        `json:"toolChoice,omitempty"`
	Output     *OutputConfig     `json:"output,omitempty"`
	Docs       []*Document       `json:"docs,omitempty"`
}

// GenerationUsage counts tokens and other units of one or more model calls.
type GenerationUsage struct {
	InputTokens         int                `json:"inputTokens,omitempty"`
	OutputTokens        int                `json:"outputTokens,omitempty"`
	TotalTokens         int                `json:"totalTokens,omitempty"`
	InputCharacters     int                `json:"inputCharacters,omitempty"`
	OutputCharacters    int                `json:"outputCharacters,omitempty"`
	ThoughtsTokens      int                `json:"thoughtsTokens,omitempty"`
	CachedContentTokens int                `json:"cachedContentTokens,omitempty"`
	Custom              map[string]float64 `json:"custom,omitempty"`
}

// ModelResponse is the result of a model call and, with the request filled in, of a whole generate
// (Genkit's GenerateResponse has the same JSON shape).
type ModelResponse struct {
	Message       *Message         `json:"message,omitempty"`
	FinishReason  FinishReason     `json:"finishReason,omitempty"`
	FinishMessage string           `json:"finishMessage,omitempty"`
	LatencyMs     float64          `json:"latencyMs,omitempty"`
	Usage         *GenerationUsage `json:"usage,omitempty"`
	Custom        any              `json:"custom,omitempty"`
	Request       *ModelRequest    `json:"request,omitempty"`
	Operation     map[string]any   `json:"operation,omitempty"`
}

// ProviderInfo is what a provider said about the call it answered. A model puts it in
// ModelResponse.Custom (the openai and anthropic packages do), and Loupe records it with the
// model call: on the model span as gen_ai.response.id, gen_ai.response.model and
// loupe.provider.request_id, and in the stored response.
type ProviderInfo struct {
	// RequestID is the provider's id of the HTTP request (Anthropic's request-id header,
	// OpenAI's x-request-id), the one its support asks for.
	RequestID string `json:"requestId,omitempty"`
	// ResponseID is the id of the answer (msg_…, chatcmpl-…).
	ResponseID string `json:"responseId,omitempty"`
	// Model is the model version that answered, which may be more precise than the one asked
	// for (an alias resolved to a dated version).
	Model string `json:"model,omitempty"`
}

// Provider returns the ProviderInfo that the response's Custom carries: a ProviderInfo the
// model put there, or its JSON form read back from storage. It is the zero value when Custom
// holds neither.
func (r *ModelResponse) Provider() ProviderInfo {
	if r == nil {
		return ProviderInfo{}
	}
	switch c := r.Custom.(type) {
	case ProviderInfo:
		return c
	case *ProviderInfo:
		if c != nil {
			return *c
		}
	case map[string]any:
		str := func(k string) string { v, _ := c[k].(string); return v }
		return ProviderInfo{RequestID: str("requestId"), ResponseID: str("responseId"), Model: str("model")}
	}
	return ProviderInfo{}
}

// Text returns the text of the response message.
func (r *ModelResponse) Text() string {
	if r == nil {
		return ""
	}
	return r.Message.Text()
}

// ToolRequests returns the tool requests of the response message, in order.
func (r *ModelResponse) ToolRequests() []*ToolRequest {
	if r == nil {
		return nil
	}
	var out []*ToolRequest
	for _, p := range r.Message.ToolRequests() {
		out = append(out, p.ToolRequest)
	}
	return out
}

// Interrupts returns the interrupted tool request parts of the response message. Each carries
// metadata.interrupt; pass it to Tool.Respond/Restart or RespondPart/RestartPart to resume.
func (r *ModelResponse) Interrupts() []*Part {
	if r == nil || r.Message == nil || r.FinishReason != FinishReasonInterrupted {
		return nil
	}
	var out []*Part
	for _, p := range r.Message.Content {
		if p.IsInterrupt() {
			out = append(out, p)
		}
	}
	return out
}

// Output decodes the JSON output of the response into v. It accepts a bare JSON text, a fenced
// ```json block, or a data part.
func (r *ModelResponse) Output(v any) error {
	if r == nil || r.Message == nil {
		return NewError(StatusFailedPrecondition, "output: response has no message")
	}
	if r.FinishReason == FinishReasonInterrupted {
		// No output yet: the tools wait for a person. In a durable flow, returning this error
		// parks the run like the generate's own.
		return &InterruptedError{Response: r}
	}
	for _, p := range r.Message.Content {
		if p.Kind == PartData {
			b, err := json.Marshal(p.Data)
			if err != nil {
				return fmt.Errorf("output: %w", err)
			}
			return json.Unmarshal(b, v)
		}
	}
	if err := json.Unmarshal(extractJSON(r.Text()), v); err != nil {
		return NewError(StatusInvalidArgument, "output: %w", err)
	}
	return nil
}

// ModelResponseChunk is one streamed piece of a generate, across all turns. Index is the position of
// the message it belongs to among the messages this generate produced; Role is model or tool.
type ModelResponseChunk struct {
	Role    Role    `json:"role,omitempty"`
	Index   int     `json:"index"`
	Content []*Part `json:"content"`
	Custom  any     `json:"custom,omitempty"`
	// Aggregated is true when the chunk carries a whole message rather than a delta.
	Aggregated bool `json:"aggregated,omitempty"`
	// PreviousChunks are the chunks streamed before this one in the same generate, as in Genkit's
	// GenerateResponseChunk. It is a read-only view shared with later chunks and is not serialized.
	PreviousChunks []*ModelResponseChunk `json:"-"`
}

// Text concatenates the text parts of the chunk.
func (c *ModelResponseChunk) Text() string {
	return (&Message{Content: c.Content}).Text()
}

// Accumulated returns the text of all previous chunks of the same message plus this one.
func (c *ModelResponseChunk) Accumulated() string {
	var s string
	for _, p := range c.PreviousChunks {
		if p.Index == c.Index {
			s += p.Text()
		}
	}
	return s + c.Text()
}

// FinishReason says why a model stopped generating, as in Genkit's FinishReasonSchema.
type FinishReason string

// Finish reasons. Interrupted is set by the generate loop when a tool interrupted it.
const (
	FinishReasonStop        FinishReason = "stop"
	FinishReasonLength      FinishReason = "length"
	FinishReasonBlocked     FinishReason = "blocked"
	FinishReasonInterrupted FinishReason = "interrupted"
	FinishReasonOther       FinishReason = "other"
	FinishReasonUnknown     FinishReason = "unknown"
)

// History returns the conversation after this response: the request's messages followed by the
// response message. Pass it to WithMessages (with WithToolResponses or WithToolRestarts) to resume.
func (r *ModelResponse) History() []*Message {
	if r == nil {
		return nil
	}
	var msgs []*Message
	if r.Request != nil {
		msgs = append(msgs, r.Request.Messages...)
	}
	if r.Message != nil {
		msgs = append(msgs, r.Message)
	}
	return stripOutputParts(msgs)
}

// stripOutputParts drops format instructions injected into request messages.
func stripOutputParts(msgs []*Message) []*Message {
	for i, m := range msgs {
		for j, p := range m.Content {
			if IsOutputPart(p) {
				cp := *m
				cp.Content = append(append([]*Part(nil), m.Content[:j]...), m.Content[j+1:]...)
				msgs[i] = &cp
				break
			}
		}
	}
	return msgs
}

// IsOutputPart reports whether p holds the output format instructions the generate loop adds to
// a request's messages (metadata.purpose "output"); History leaves them out.
func IsOutputPart(p *Part) bool {
	return p.Metadata != nil && p.Metadata["purpose"] == "output"
}

// extractJSON returns the JSON in a model's text: the body of a ``` fence if there is one, else the
// text from the first { or [ on.
func extractJSON(s string) []byte {
	b := bytes.TrimSpace([]byte(s))
	if i := bytes.Index(b, []byte("```")); i >= 0 {
		rest := b[i+3:]
		if nl := bytes.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:]
		}
		if j := bytes.Index(rest, []byte("```")); j >= 0 {
			rest = rest[:j]
		}
		return bytes.TrimSpace(rest)
	}
	if i := bytes.IndexAny(b, "{["); i > 0 {
		return b[i:]
	}
	return b
}

// ModelStreamCallback receives the chunks of a generate (or of one model call) as they come.
type ModelStreamCallback = func(ctx context.Context, chunk *ModelResponseChunk) error

// ModelFunc is a model's implementation. cb is nil when the caller does not stream.
type ModelFunc = func(ctx context.Context, req *ModelRequest, cb ModelStreamCallback) (*ModelResponse, error)

// Model is a model Generate can call: one from loupe.DefineModel or a provider package (openai,
// scripted), or one of your own.
type Model interface {
	// Name is the model's registered name ("provider/model").
	Name() string
	// Generate performs one model call.
	Generate(ctx context.Context, req *ModelRequest, cb ModelStreamCallback) (*ModelResponse, error)
}

// ModelArg is what WithModel takes: a Model, or a ModelRef to a registered one.
type ModelArg interface {
	Name() string
}

// ModelRef refers to a registered model by name, with a configuration of its own (used unless
// WithConfig gives one).
type ModelRef struct {
	name   string
	config any
}

// NewModelRef returns a reference to the registered model name, with config.
func NewModelRef(name string, config any) ModelRef { return ModelRef{name: name, config: config} }

// Name implements ModelArg.
func (m ModelRef) Name() string { return m.name }

// Config returns the reference's model configuration.
func (m ModelRef) Config() any { return m.config }

// ModelOptions describe a model: how the UI labels it and what it supports.
type ModelOptions struct {
	// ConfigSchema is the JSON schema of the model's configuration.
	ConfigSchema map[string]any `json:"configSchema,omitempty"`
	// Label is a friendly name.
	Label string `json:"label,omitempty"`
	// Stage is the model's maturity.
	Stage ModelStage `json:"stage,omitempty"`
	// Supports says what the model can do.
	Supports *ModelSupports `json:"supports,omitempty"`
	// Versions are other names the model answers to.
	Versions []string `json:"versions,omitempty"`
}

// ModelStage says how mature a model is.
type ModelStage string

// Model stages, as in Genkit.
const (
	ModelStageFeatured   ModelStage = "featured"
	ModelStageStable     ModelStage = "stable"
	ModelStageUnstable   ModelStage = "unstable"
	ModelStageLegacy     ModelStage = "legacy"
	ModelStageDeprecated ModelStage = "deprecated"
)

// ConstrainedSupport says whether a model can be held to an output schema.
type ConstrainedSupport string

// Constrained generation support, as in Genkit.
const (
	ConstrainedSupportNone    ConstrainedSupport = "none"
	ConstrainedSupportAll     ConstrainedSupport = "all"
	ConstrainedSupportNoTools ConstrainedSupport = "no-tools"
)

// ModelSupports lists what a model can do, as in Genkit's ModelInfo.supports.
type ModelSupports struct {
	// Constrained is its support for output held to a schema.
	Constrained ConstrainedSupport `json:"constrained,omitempty"`
	// ContentType lists the content types it can output.
	ContentType []string `json:"contentType,omitempty"`
	// Context says it grounds answers on documents (WithDocs) natively.
	Context bool `json:"context,omitempty"`
	// LongRunning says it runs long operations.
	LongRunning bool `json:"longRunning,omitempty"`
	// Media says it reads media in prompts.
	Media bool `json:"media,omitempty"`
	// Multiturn says it reads a conversation's earlier messages.
	Multiturn bool `json:"multiturn,omitempty"`
	// Output lists the kinds of data it can output.
	Output []string `json:"output,omitempty"`
	// SystemRole says it takes system messages.
	SystemRole bool `json:"systemRole,omitempty"`
	// ToolChoice says it honours WithToolChoice.
	ToolChoice bool `json:"toolChoice,omitempty"`
	// Tools says it calls tools.
	Tools bool `json:"tools,omitempty"`
}
