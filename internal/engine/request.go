package engine

import (
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

// Usage counts tokens and other units of one or more model calls.
type Usage struct {
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
	Message       *Message       `json:"message,omitempty"`
	FinishReason  FinishReason   `json:"finishReason,omitempty"`
	FinishMessage string         `json:"finishMessage,omitempty"`
	LatencyMs     float64        `json:"latencyMs,omitempty"`
	Usage         *Usage         `json:"usage,omitempty"`
	Custom        any            `json:"custom,omitempty"`
	Request       *ModelRequest  `json:"request,omitempty"`
	Operation     map[string]any `json:"operation,omitempty"`
}

// Text returns the text of the response message.
func (r *ModelResponse) Text() string {
	if r == nil {
		return ""
	}
	return r.Message.Text()
}

// ToolRequests returns the tool request parts of the response message.
func (r *ModelResponse) ToolRequests() []*Part {
	if r == nil {
		return nil
	}
	return r.Message.ToolRequests()
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
		return Errorf(StatusFailedPrecondition, "output: response has no message")
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
		return Errorf(StatusInvalidArgument, "output: %w", err)
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

// GenerateOutputOptions is the output part of GenerateActionOptions.
type GenerateOutputOptions struct {
	Format       string  `json:"format,omitempty"`
	ContentType  string  `json:"contentType,omitempty"`
	Instructions any     `json:"instructions,omitempty"`
	Schema       *Schema `json:"jsonSchema,omitempty"`
	Constrained  bool    `json:"constrained,omitempty"`
}

// UnmarshalJSON accepts both Genkit's "jsonSchema" and the request-level "schema" key.
func (o *GenerateOutputOptions) UnmarshalJSON(b []byte) error {
	type plain GenerateOutputOptions
	var in struct {
		plain
		Alt *Schema `json:"schema,omitempty"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*o = GenerateOutputOptions(in.plain)
	if o.Schema == nil {
		o.Schema = in.Alt
	}
	return nil
}

// Resume answers the interrupts of the last model message of a history.
type Resume struct {
	// Respond holds toolResponse parts: the answer to an interrupted call, in place of running it.
	Respond []*Part `json:"respond,omitempty"`
	// Restart holds toolRequest parts: interrupted calls to run again, maybe with a new input.
	Restart []*Part `json:"restart,omitempty"`
	// Metadata is stamped on the resumed tool message as metadata.resumed.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// GenerateActionOptions is the serializable form of a generate call (Genkit's
// GenerateActionOptions). It is the input of the /util/generate action, and what a durable runner
// stores and replays.
type GenerateActionOptions struct {
	Model              string                 `json:"model,omitempty"`
	Docs               []*Document            `json:"docs,omitempty"`
	Messages           []*Message             `json:"messages"`
	Tools              []string               `json:"tools,omitempty"`
	ToolChoice         ToolChoice             `json:"toolChoice,omitempty"`
	Config             any                    `json:"config,omitempty"`
	Output             *GenerateOutputOptions `json:"output,omitempty"`
	Resume             *Resume                `json:"resume,omitempty"`
	ReturnToolRequests bool                   `json:"returnToolRequests,omitempty"`
	// MaxTurns is the turn limit. In a Go literal, zero means DefaultMaxTurns; an explicit zero
	// (no tool turn at all, as Genkit's maxTurns ?? 5 has it) comes from SetMaxTurns, WithMaxTurns
	// or a "maxTurns" field in JSON, which round-trips.
	MaxTurns int `json:"maxTurns,omitempty"`
	// maxTurnsSet tells an explicit MaxTurns (honoured even when 0) from an unset one.
	maxTurnsSet bool
}

// DefaultMaxTurns is the turn limit when MaxTurns is unset, as in Genkit.
const DefaultMaxTurns = 5

// SetMaxTurns sets an explicit turn limit, honoured even when n is 0 or less: the first tool
// request is then ABORTED before any tool runs.
func (o *GenerateActionOptions) SetMaxTurns(n int) {
	o.MaxTurns = n
	o.maxTurnsSet = true
}

// TurnLimit returns the turn limit in effect: MaxTurns when set explicitly or non-zero, else
// DefaultMaxTurns (Genkit's rawRequest.maxTurns ?? 5).
func (o *GenerateActionOptions) TurnLimit() int {
	if o.maxTurnsSet || o.MaxTurns != 0 {
		return o.MaxTurns
	}
	return DefaultMaxTurns
}

// UnmarshalJSON records whether "maxTurns" is present, so that {"maxTurns":0} from a Genkit client
// means no tool turn while an absent field means DefaultMaxTurns.
func (o *GenerateActionOptions) UnmarshalJSON(b []byte) error {
	type plain GenerateActionOptions
	in := struct {
		*plain
		MaxTurns *int `json:"maxTurns"`
	}{plain: (*plain)(o)}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	o.MaxTurns, o.maxTurnsSet = 0, in.MaxTurns != nil
	if in.MaxTurns != nil {
		o.MaxTurns = *in.MaxTurns
	}
	return nil
}

// MarshalJSON writes "maxTurns" when it is non-zero or set explicitly, so an explicit 0 survives a
// round trip (a durable runner stores and replays these options).
func (o GenerateActionOptions) MarshalJSON() ([]byte, error) {
	type plain GenerateActionOptions
	out := struct {
		*plain
		MaxTurns *int `json:"maxTurns,omitempty"`
	}{plain: (*plain)(&o)}
	if o.maxTurnsSet || o.MaxTurns != 0 {
		out.MaxTurns = &o.MaxTurns
	}
	return json.Marshal(out)
}
