package ai

import "encoding/json"

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
