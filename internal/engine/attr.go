package engine

import (
	"encoding/json"
	"strconv"
)

// Span attribute encoding. History messages are immutable once appended, so each is marshalled
// once per Generate and its JSON reused by every later turn's genkit:input; tool definitions are
// marshalled once per Generate. That keeps attribute cost linear in the conversation instead of
// quadratic.

func (g *generation) messageJSON(m *Message) []byte {
	if b, ok := g.msgJSON[m]; ok {
		return b
	}
	b, err := json.Marshal(m)
	if err != nil {
		b = []byte(strconv.Quote("unencodable: " + err.Error()))
	}
	if g.msgJSON == nil {
		g.msgJSON = make(map[*Message][]byte, 8)
	}
	g.msgJSON[m] = b
	return b
}

func (g *generation) appendMessages(buf []byte, msgs []*Message) []byte {
	buf = append(buf, '[')
	for i, m := range msgs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, g.messageJSON(m)...)
	}
	return append(buf, ']')
}

func appendField(buf []byte, first *bool, key string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return buf
	}
	return appendRawField(buf, first, key, b)
}

// appendKey starts an object field: the value is appended by the caller.
func appendKey(buf []byte, first *bool, key string) []byte {
	if !*first {
		buf = append(buf, ',')
	}
	*first = false
	buf = append(buf, '"')
	buf = append(buf, key...)
	return append(buf, '"', ':')
}

func appendRawField(buf []byte, first *bool, key string, raw []byte) []byte {
	if !*first {
		buf = append(buf, ',')
	}
	*first = false
	buf = append(buf, '"')
	buf = append(buf, key...)
	buf = append(buf, '"', ':')
	return append(buf, raw...)
}

// modelRequestAttr encodes a model request as Genkit's GenerateRequest JSON.
func (g *generation) modelRequestAttr(req *ModelRequest) json.RawMessage {
	first := true
	buf := make([]byte, 0, 1024)
	buf = append(buf, '{')
	buf = appendKey(buf, &first, "messages")
	buf = g.appendMessages(buf, req.Messages)
	if req.Config != nil {
		buf = appendField(buf, &first, "config", req.Config)
	}
	if len(req.Tools) > 0 {
		if g.toolsJSON == nil {
			g.toolsJSON, _ = json.Marshal(req.Tools)
		}
		buf = appendRawField(buf, &first, "tools", g.toolsJSON)
	}
	if req.ToolChoice != "" {
		buf = appendField(buf, &first, "toolChoice", req.ToolChoice)
	}
	if req.Output != nil {
		buf = appendField(buf, &first, "output", req.Output)
	}
	if len(req.Docs) > 0 {
		buf = appendField(buf, &first, "docs", req.Docs)
	}
	return append(buf, '}')
}

// turnAttr encodes a turn's GenerateActionOptions.
func (g *generation) turnAttr(o *GenerateActionOptions) json.RawMessage {
	first := true
	buf := make([]byte, 0, 1024)
	buf = append(buf, '{')
	buf = appendField(buf, &first, "model", g.model.Name())
	buf = appendKey(buf, &first, "messages")
	buf = g.appendMessages(buf, o.Messages)
	if len(o.Tools) > 0 || len(g.toolDefs) > 0 {
		if g.toolNamesJSON == nil {
			names := make([]string, len(g.toolDefs))
			for i, d := range g.toolDefs {
				names[i] = d.Name
			}
			g.toolNamesJSON, _ = json.Marshal(names)
		}
		buf = appendRawField(buf, &first, "tools", g.toolNamesJSON)
	}
	if o.Config != nil {
		buf = appendField(buf, &first, "config", o.Config)
	}
	if o.Output != nil {
		buf = appendField(buf, &first, "output", o.Output)
	}
	if o.Resume != nil {
		buf = appendField(buf, &first, "resume", o.Resume)
	}
	if o.ReturnToolRequests {
		buf = appendRawField(buf, &first, "returnToolRequests", []byte("true"))
	}
	buf = appendRawField(buf, &first, "maxTurns", strconv.AppendInt(nil, int64(g.maxTurns), 10))
	return append(buf, '}')
}

// responseAttr encodes a response without its request (the request is the span's input already).
func (g *generation) responseAttr(r *ModelResponse) json.RawMessage {
	first := true
	buf := make([]byte, 0, 256)
	buf = append(buf, '{')
	if r.Message != nil {
		buf = appendRawField(buf, &first, "message", g.messageJSON(r.Message))
	}
	if r.FinishReason != "" {
		buf = appendRawField(buf, &first, "finishReason", strconv.AppendQuote(nil, string(r.FinishReason)))
	}
	if r.FinishMessage != "" {
		buf = appendRawField(buf, &first, "finishMessage", strconv.AppendQuote(nil, r.FinishMessage))
	}
	if r.Usage != nil {
		buf = appendField(buf, &first, "usage", r.Usage)
	}
	return append(buf, '}')
}
