package engine

import (
	"github.com/loupe-dev/loupe/ai"
)

// Output formats.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// outputFormat is a generate's resolved output format. The instructions are built once per
// Generate from the schema's stored JSON; nothing is marshalled per turn.
type outputFormat struct {
	name         string
	schema       *Schema
	instructions string
}

func resolveFormat(o *GenerateOutputOptions) (*outputFormat, error) {
	if o == nil {
		return &outputFormat{name: FormatText}, nil
	}
	f := &outputFormat{name: o.Format, schema: o.Schema}
	if f.name == "" {
		f.name = FormatText
		if o.Schema != nil {
			f.name = FormatJSON
		}
	}
	switch f.name {
	case FormatText:
	case FormatJSON:
		if f.schema != nil {
			f.instructions = "Output should be in JSON format and conform to the following schema:\n\n```\n" +
				string(f.schema.Raw()) + "\n```\n"
		}
	default:
		return nil, Errorf(StatusInvalidArgument, "unsupported output format %q", f.name)
	}
	switch v := o.Instructions.(type) {
	case string:
		f.instructions = v
	case bool:
		if !v {
			f.instructions = ""
		}
	}
	return f, nil
}

func (f *outputFormat) requestOutput() *OutputConfig {
	if f.name == FormatText && f.schema == nil {
		return nil
	}
	oc := &OutputConfig{Format: f.name, Schema: f.schema}
	if f.name == FormatJSON {
		oc.ContentType = "application/json"
	}
	return oc
}

// inject returns msgs with the format instructions added, as Genkit's injectInstructions does: to
// the system message, or else the last user message, unless an output part is already there. It
// copies only the message it changes.
func (f *outputFormat) inject(msgs []*Message) []*Message {
	if f.instructions == "" {
		return msgs
	}
	target := -1
	for i, m := range msgs {
		for _, p := range m.Content {
			if ai.IsOutputPart(p) {
				return msgs
			}
		}
		if m.Role == RoleSystem && target < 0 {
			target = i
		}
	}
	if target < 0 {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == RoleUser {
				target = i
				break
			}
		}
	}
	if target < 0 {
		return msgs
	}
	out := make([]*Message, len(msgs))
	copy(out, msgs)
	m := *msgs[target]
	m.Content = append(m.Content[:len(m.Content):len(m.Content)], &Part{
		Kind: PartText, Text: f.instructions, Metadata: map[string]any{"purpose": "output"},
	})
	out[target] = &m
	return out
}

// validate checks the final message against the schema.
func (f *outputFormat) validate(resp *ModelResponse) error {
	if f.name != FormatJSON || f.schema == nil {
		return nil
	}
	var err error
	if d := dataPart(resp.Message); d != nil {
		err = f.schema.Validate(d.Data)
	} else {
		var v any
		if err = resp.Output(&v); err != nil {
			err = &ValidationError{Fields: []FieldError{{Message: "invalid JSON: " + err.Error()}}}
		} else {
			err = f.schema.Validate(v)
		}
	}
	if err != nil {
		e := Errorf(StatusInvalidArgument, "output does not match schema: %w", err)
		e.Response = resp
		return e
	}
	return nil
}

func dataPart(m *Message) *Part {
	if m == nil {
		return nil
	}
	for _, p := range m.Content {
		if p.Kind == PartData {
			return p
		}
	}
	return nil
}
