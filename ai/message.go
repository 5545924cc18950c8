package ai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Role is the author of a message, as in Genkit's RoleSchema.
type Role string

// Roles a message can have.
const (
	RoleUser   Role = "user"
	RoleModel  Role = "model"
	RoleTool   Role = "tool"
	RoleSystem Role = "system"
)

// Message is one entry of a conversation history.
type Message struct {
	Role     Role           `json:"role"`
	Content  []*Part        `json:"content"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// NewMessage returns a message of role with parts and metadata (which may be nil).
func NewMessage(role Role, metadata map[string]any, parts ...*Part) *Message {
	return &Message{Role: role, Content: parts, Metadata: metadata}
}

// NewTextMessage returns a message with a single text part.
func NewTextMessage(role Role, text string) *Message {
	return &Message{Role: role, Content: []*Part{NewTextPart(text)}}
}

// NewUserMessage returns a user's message of parts.
func NewUserMessage(parts ...*Part) *Message { return NewMessage(RoleUser, nil, parts...) }

// NewUserTextMessage returns a user's message of one text part.
func NewUserTextMessage(text string) *Message { return NewTextMessage(RoleUser, text) }

// NewModelMessage returns a model's message of parts.
func NewModelMessage(parts ...*Part) *Message { return NewMessage(RoleModel, nil, parts...) }

// NewModelTextMessage returns a model's message of one text part.
func NewModelTextMessage(text string) *Message { return NewTextMessage(RoleModel, text) }

// NewSystemMessage returns a system message of parts.
func NewSystemMessage(parts ...*Part) *Message { return NewMessage(RoleSystem, nil, parts...) }

// NewSystemTextMessage returns a system message of one text part.
func NewSystemTextMessage(text string) *Message { return NewTextMessage(RoleSystem, text) }

// Text concatenates the text parts of the message.
func (m *Message) Text() string {
	if m == nil {
		return ""
	}
	if len(m.Content) == 1 {
		return m.Content[0].Text
	}
	var b strings.Builder
	for _, p := range m.Content {
		if p.Kind == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ToolRequests returns the tool request parts of the message, in order.
func (m *Message) ToolRequests() []*Part {
	if m == nil {
		return nil
	}
	var out []*Part
	for _, p := range m.Content {
		if p.ToolRequest != nil {
			out = append(out, p)
		}
	}
	return out
}

// PartKind says which of Part's payload fields is set.
type PartKind int8

// Part kinds. They map one to one to the keys of Genkit's part union.
const (
	PartText PartKind = iota
	PartMedia
	PartToolRequest
	PartToolResponse
	PartData
	PartReasoning
	PartCustom
)

// Part is one piece of a message's content. Exactly one payload field, chosen by Kind, is
// meaningful; the JSON form is Genkit's part union (text, media, toolRequest, toolResponse, data,
// reasoning, custom), each with optional metadata.
type Part struct {
	Kind         PartKind
	Text         string
	Media        *Media
	ToolRequest  *ToolRequest
	ToolResponse *ToolResponse
	Data         any
	Reasoning    string
	Custom       map[string]any
	Metadata     map[string]any
}

// Media is a reference to media content.
type Media struct {
	URL         string `json:"url"`
	ContentType string `json:"contentType,omitempty"`
}

// ToolRequest is a model's request to call a tool.
type ToolRequest struct {
	Name    string `json:"name"`
	Ref     string `json:"ref,omitempty"`
	Input   any    `json:"input,omitempty"`
	Partial bool   `json:"partial,omitempty"`
}

// ToolResponse is the result of a tool call, sent back to the model.
type ToolResponse struct {
	Name    string  `json:"name"`
	Ref     string  `json:"ref,omitempty"`
	Output  any     `json:"output,omitempty"`
	Content []*Part `json:"content,omitempty"`
}

// NewTextPart returns a text part.
func NewTextPart(text string) *Part { return &Part{Kind: PartText, Text: text} }

// NewDataPart returns a data part.
func NewDataPart(data any) *Part { return &Part{Kind: PartData, Data: data} }

// NewMediaPart returns a media part.
func NewMediaPart(contentType, url string) *Part {
	return &Part{Kind: PartMedia, Media: &Media{URL: url, ContentType: contentType}}
}

// NewReasoningPart returns a reasoning part. A signature (which some providers return with their
// reasoning) is kept in the part's metadata, as Genkit keeps it.
func NewReasoningPart(text string, signature []byte) *Part {
	p := &Part{Kind: PartReasoning, Reasoning: text}
	if signature != nil {
		p.Metadata = map[string]any{"signature": signature}
	}
	return p
}

// NewToolRequestPart returns a tool request part.
func NewToolRequestPart(req *ToolRequest) *Part {
	return &Part{Kind: PartToolRequest, ToolRequest: req}
}

// NewToolResponsePart returns a tool response part.
func NewToolResponsePart(resp *ToolResponse) *Part {
	return &Part{Kind: PartToolResponse, ToolResponse: resp}
}

// IsText reports whether the part is text.
func (p *Part) IsText() bool { return p.Kind == PartText }

// IsMedia reports whether the part is media.
func (p *Part) IsMedia() bool { return p.Kind == PartMedia }

// IsData reports whether the part is structured data.
func (p *Part) IsData() bool { return p.Kind == PartData }

// IsReasoning reports whether the part is a model's reasoning.
func (p *Part) IsReasoning() bool { return p.Kind == PartReasoning }

// IsCustom reports whether the part is a provider's custom content.
func (p *Part) IsCustom() bool { return p.Kind == PartCustom }

// IsToolRequest reports whether the part is a model's request to call a tool.
func (p *Part) IsToolRequest() bool { return p.Kind == PartToolRequest }

// IsToolResponse reports whether the part is a tool's response.
func (p *Part) IsToolResponse() bool { return p.Kind == PartToolResponse }

// IsInterrupt reports whether the part is a tool request that interrupted.
func (p *Part) IsInterrupt() bool {
	if p == nil || p.ToolRequest == nil || p.Metadata == nil {
		return false
	}
	v, ok := p.Metadata[metaInterrupt]
	return ok && v != nil && v != false
}

// WithMetadata returns a shallow copy of p whose metadata is a copy of p's, with the keys of set set
// and the keys del deleted. Parts are shared between a history and the responses built from it,
// so they are changed by copy, never in place.
func (p *Part) WithMetadata(set map[string]any, del ...string) *Part {
	cp := *p
	md := make(map[string]any, len(p.Metadata)+len(set))
	for k, v := range p.Metadata {
		md[k] = v
	}
	for _, k := range del {
		delete(md, k)
	}
	for k, v := range set {
		md[k] = v
	}
	if len(md) == 0 {
		md = nil
	}
	cp.Metadata = md
	return &cp
}

type partJSON struct {
	Text         *string         `json:"text,omitempty"`
	Media        *Media          `json:"media,omitempty"`
	ToolRequest  *ToolRequest    `json:"toolRequest,omitempty"`
	ToolResponse *ToolResponse   `json:"toolResponse,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`
	Reasoning    *string         `json:"reasoning,omitempty"`
	Custom       map[string]any  `json:"custom,omitempty"`
	Metadata     map[string]any  `json:"metadata,omitempty"`
}

type partOut struct {
	Text         *string        `json:"text,omitempty"`
	Media        *Media         `json:"media,omitempty"`
	ToolRequest  *ToolRequest   `json:"toolRequest,omitempty"`
	ToolResponse *ToolResponse  `json:"toolResponse,omitempty"`
	Data         any            `json:"data,omitempty"`
	Reasoning    *string        `json:"reasoning,omitempty"`
	Custom       map[string]any `json:"custom,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// MarshalJSON encodes the part as Genkit's part union.
func (p *Part) MarshalJSON() ([]byte, error) {
	out := partOut{Metadata: p.Metadata}
	switch p.Kind {
	case PartText:
		out.Text = &p.Text
	case PartMedia:
		out.Media = p.Media
	case PartToolRequest:
		out.ToolRequest = p.ToolRequest
	case PartToolResponse:
		out.ToolResponse = p.ToolResponse
	case PartData:
		out.Data = p.Data
	case PartReasoning:
		out.Reasoning = &p.Reasoning
	case PartCustom:
		out.Custom = p.Custom
	default:
		return nil, fmt.Errorf("marshal part: unknown kind %d", p.Kind)
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes Genkit's part union.
func (p *Part) UnmarshalJSON(b []byte) error {
	var in partJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("unmarshal part: %w", err)
	}
	*p = Part{Metadata: in.Metadata}
	switch {
	case in.ToolRequest != nil:
		p.Kind, p.ToolRequest = PartToolRequest, in.ToolRequest
	case in.ToolResponse != nil:
		p.Kind, p.ToolResponse = PartToolResponse, in.ToolResponse
	case in.Media != nil:
		p.Kind, p.Media = PartMedia, in.Media
	case in.Data != nil:
		p.Kind = PartData
		if err := json.Unmarshal(in.Data, &p.Data); err != nil {
			return fmt.Errorf("unmarshal part data: %w", err)
		}
	case in.Reasoning != nil:
		p.Kind, p.Reasoning = PartReasoning, *in.Reasoning
	case in.Custom != nil:
		p.Kind, p.Custom = PartCustom, in.Custom
	case in.Text != nil:
		p.Kind, p.Text = PartText, *in.Text
	default:
		return fmt.Errorf("unmarshal part: no known payload in %s", b)
	}
	return nil
}
