package trace

import (
	"bytes"
	"encoding/json"
)

// Message is one message of a model call in Genkit's shape ({"role", "content": [parts]}), the
// shape Loupe's conversation views render: a Genkit span's own messages, or a GenAI message
// converted part by part (see ModelMessages).
type Message struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

// ModelMessages reads a model call's request and response messages from a span's attributes:
// Genkit's genkit:input ({"messages"}) and genkit:output ({"message"}, or the older
// {"candidates":[{"message"}]}), else the GenAI conventions' gen_ai.system_instructions,
// gen_ai.input.messages and gen_ai.output.messages (JSON in a string, as the conventions record
// them, or structured). A GenAI message's parts become Genkit's: text, tool_call as toolRequest,
// tool_call_response as toolResponse, reasoning, uri and blob as media, anything else custom; the
// assistant role is Genkit's model. What cannot be read is left out.
func ModelMessages(attrs map[string]json.RawMessage) (input, output []Message) {
	var in struct {
		Messages []Message `json:"messages"`
	}
	if unmarshalValue(attrs["genkit:input"], &in) {
		input = in.Messages
	}
	var out struct {
		Message    *Message `json:"message"`
		Candidates []struct {
			Message *Message `json:"message"`
		} `json:"candidates"`
	}
	if unmarshalValue(attrs["genkit:output"], &out) {
		switch {
		case out.Message != nil:
			output = []Message{*out.Message}
		case len(out.Candidates) > 0 && out.Candidates[0].Message != nil:
			output = []Message{*out.Candidates[0].Message}
		}
	}
	if len(input) == 0 {
		var system []genaiPart
		if unmarshalValue(attrs["gen_ai.system_instructions"], &system) && len(system) > 0 {
			input = append(input, genaiMessage(genaiChatMessage{Role: "system", Parts: system}))
		}
		var msgs []genaiChatMessage
		if unmarshalValue(attrs["gen_ai.input.messages"], &msgs) {
			for _, m := range msgs {
				input = append(input, genaiMessage(m))
			}
		}
	}
	if len(output) == 0 {
		var msgs []genaiChatMessage
		if unmarshalValue(attrs["gen_ai.output.messages"], &msgs) {
			for _, m := range msgs {
				output = append(output, genaiMessage(m))
			}
		}
	}
	return input, output
}

// genaiChatMessage is a message of gen_ai.input.messages or gen_ai.output.messages.
type genaiChatMessage struct {
	Role  string      `json:"role"`
	Parts []genaiPart `json:"parts"`
}

// genaiPart is one part of a GenAI message: its type, the fields Loupe reads, and itself whole.
type genaiPart struct {
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Response  json.RawMessage `json:"response"`
	Result    json.RawMessage `json:"result"`
	URI       string          `json:"uri"`
	MimeType  string          `json:"mime_type"`
	raw       json.RawMessage
}

func (p *genaiPart) UnmarshalJSON(b []byte) error {
	type plain genaiPart
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	p.raw = append(json.RawMessage(nil), b...)
	return nil
}

func genaiMessage(m genaiChatMessage) Message {
	role := m.Role
	if role == "assistant" {
		role = "model"
	}
	msg := Message{Role: role, Content: make([]json.RawMessage, 0, len(m.Parts))}
	for _, p := range m.Parts {
		msg.Content = append(msg.Content, genaiGenkitPart(p))
	}
	return msg
}

// genaiGenkitPart converts one GenAI part to Genkit's part shape.
func genaiGenkitPart(p genaiPart) json.RawMessage {
	var v any
	text := func() string {
		var s string
		if json.Unmarshal(p.Content, &s) != nil {
			return string(p.Content)
		}
		return s
	}
	switch p.Type {
	case "text":
		v = map[string]any{"text": text()}
	case "reasoning":
		v = map[string]any{"reasoning": text()}
	case "tool_call":
		v = map[string]any{"toolRequest": map[string]any{"name": p.Name, "ref": p.ID, "input": jsonOrNull(decodeIfString(p.Arguments))}}
	case "tool_call_response":
		res := p.Response
		if len(res) == 0 {
			res = p.Result
		}
		v = map[string]any{"toolResponse": map[string]any{"name": p.Name, "ref": p.ID, "output": jsonOrNull(decodeIfString(res))}}
	case "uri", "file", "blob":
		url := p.URI
		if url == "" && p.Type == "blob" {
			url = "data:" + p.MimeType + ";base64," + text()
		}
		if url != "" {
			v = map[string]any{"media": map[string]any{"url": url, "contentType": p.MimeType}}
			break
		}
		fallthrough
	default:
		v = map[string]any{"custom": jsonOrNull(p.raw)}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{"custom":null}`)
	}
	return b
}

// unmarshalValue decodes an attribute that holds JSON, either as its value or as a string of it.
func unmarshalValue(raw json.RawMessage, v any) bool {
	raw = decodeIfString(raw)
	return len(raw) > 0 && json.Unmarshal(raw, v) == nil
}

// decodeIfString returns the JSON text a JSON string holds when it holds JSON, else raw.
func decodeIfString(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return raw
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return raw
	}
	if t := bytes.TrimSpace([]byte(s)); json.Valid(t) && (len(t) > 0 && (t[0] == '{' || t[0] == '[')) {
		return t
	}
	return raw
}

func jsonOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
