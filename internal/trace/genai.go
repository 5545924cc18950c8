package trace

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/internal/store"
)

// The one rule by which Loupe reads what a span is, whichever attribute set it carries: Genkit's
// (genkit:type, genkit:metadata:subtype, genkit:input and genkit:output) or the OpenTelemetry GenAI
// semantic conventions (gen_ai.operation.name, gen_ai.request.model, gen_ai.usage.*,
// gen_ai.tool.*, gen_ai.input.messages and gen_ai.output.messages). Loupe's own spans carry both.
// The turn summary, the trace page's labels, the trace list's totals (folded at ingest, see
// usageOf) and the span panel's messages all read spans through it.

// Span kinds, as SpanKind reads them.
const (
	// KindTurn is a Genkit generate span (Loupe's too): one turn of the loop, with its model call
	// and tool calls inside it.
	KindTurn = "turn"
	// KindModel is a model call: Genkit's model action, or a GenAI chat (text_completion,
	// generate_content) span. A GenAI model call outside any generate span is itself a turn.
	KindModel = "model"
	// KindTool is a tool call: Genkit's tool action, or a GenAI execute_tool span.
	KindTool = "tool"
	// KindAgent is a GenAI invoke_agent (or create_agent) span: an agent's run, whose model calls
	// are its turns.
	KindAgent = "agent"
)

// SpanKind says what a span is: KindTurn, KindModel, KindTool, KindAgent, or "" for anything else.
func SpanKind(f *store.SpanTurnFacts) string {
	op, subtype := deref(f.Operation), deref(f.Subtype)
	switch {
	case isTurnSpan(f):
		return KindTurn
	case op == "chat" || op == "text_completion" || op == "generate_content" || subtype == "model":
		return KindModel
	case op == "execute_tool" || subtype == "tool" || subtype == "tool.v2":
		return KindTool
	case op == "invoke_agent" || op == "create_agent":
		return KindAgent
	}
	return ""
}

func isTurnSpan(f *store.SpanTurnFacts) bool {
	if f.TurnIndex != nil && (deref(f.Operation) == "invoke_agent" || deref(f.GenkitType) == "util") {
		return true
	}
	return deref(f.GenkitType) == "util" && deref(f.GenkitName) == "generate"
}

// SpanLabel is the label the span tree shows beside a span that is not a turn: model, tool, the
// Genkit subtype (flow, prompt…), agent for a GenAI agent, and for a root its Genkit type.
func SpanLabel(f *store.SpanTurnFacts, root bool) string {
	kind := SpanKind(f)
	switch kind {
	case KindModel, KindTool:
		return kind
	}
	agent := ""
	if kind == KindAgent {
		agent = KindAgent
	}
	if root {
		return firstNonEmpty(deref(f.Subtype), deref(f.GenkitType), agent)
	}
	return firstNonEmpty(deref(f.Subtype), agent)
}

// modelName is a model call's model: the requested one, else the one that answered, else Genkit's
// action name, else the span's name without GenAI's "chat " prefix.
func modelName(f *store.SpanTurnFacts) string {
	name := f.Name
	if op := deref(f.Operation); op != "" {
		name = strings.TrimPrefix(name, op+" ")
	}
	return firstNonEmpty(deref(f.Model), deref(f.ResponseModel), deref(f.GenkitName), name)
}

// toolName is a tool call's tool.
func toolName(f *store.SpanTurnFacts) string {
	return firstNonEmpty(deref(f.ToolName), deref(f.GenkitName), strings.TrimPrefix(f.Name, "execute_tool "))
}

// factState is a span's outcome as the turn summary words it: genkit:state when the span has one
// (success, error, interrupted), else error or success from an OTel status, else "".
func factState(f *store.SpanTurnFacts) string {
	if s := deref(f.State); s != "" {
		return s
	}
	switch f.StatusCode {
	case store.StatusError:
		return "error"
	case store.StatusOK:
		return "success"
	}
	return ""
}

// finishReason is a model call's first finish reason: gen_ai.response.finish_reasons (an array, or
// a string) or, for a Genkit model span, its output's finishReason.
func finishReason(f *store.SpanTurnFacts) string {
	if v := strings.TrimSpace(deref(f.FinishReasons)); v != "" {
		var list []string
		if json.Unmarshal([]byte(v), &list) == nil {
			if len(list) > 0 {
				return list[0]
			}
			return ""
		}
		return v
	}
	if f.ModelOutput == nil {
		return ""
	}
	var o struct {
		FinishReason string `json:"finishReason"`
	}
	_ = json.Unmarshal([]byte(*f.ModelOutput), &o)
	return o.FinishReason
}

// factKeys are the attributes FactsOf reads, in the order of its destinations.
var factKeys = [...]string{AttrTurnIndex, "genkit:name", "genkit:type", "genkit:metadata:subtype", "genkit:state",
	"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.tool.name", "gen_ai.usage.input_tokens",
	"gen_ai.usage.output_tokens", "genkit:output", "gen_ai.response.model", "gen_ai.response.finish_reasons",
	"gen_ai.tool.call.id"}

var modelOutputFact = slices.Index(factKeys[:], "genkit:output")

// Every key has a destination and every destination a key: either would fail to compile otherwise.
var (
	_ [len(factKeys) - len(factDests)]struct{}
	_ [len(factDests) - len(factKeys)]struct{}
)

// FactsOf reads a span's turn facts from its attributes in Go, as store.SpanTurnFactsByTrace reads
// them in SQL (each value as text, a string unquoted): ingest uses it to fold the trace list's
// totals by the same rule as the turn summary. The attributes must be a valid JSON object, as
// ingest leaves them; they are scanned, not decoded.
func FactsOf(sp *store.Span) store.SpanTurnFacts {
	f := store.SpanTurnFacts{SpanID: sp.SpanID, ParentSpanID: sp.ParentSpanID, Name: sp.Name,
		StartTime: sp.StartTime, EndTime: sp.EndTime, StatusCode: sp.StatusCode, StatusMessage: sp.StatusMessage}
	attrs := bytes.TrimSpace(sp.Attributes)
	if len(attrs) < 2 || attrs[0] != '{' {
		return f
	}
	var values [len(factDests)]json.RawMessage
	v := objectValuesInto(attrs, factKeys[:], values[:])
	texts := new([len(factDests)]string) // one allocation for every fact's text
	for i, dest := range factDests {
		if i != modelOutputFact && rawTextInto(v[i], &texts[i]) {
			*dest(&f) = &texts[i]
		}
	}
	// As the SQL reads it: only a Genkit model span's output, without gen_ai usage. Read only
	// then, since it is the one value that is large and escaped (JSON held in a string).
	if f.InputTokens == nil && f.OutputTokens == nil && deref(f.Subtype) == "model" && rawTextInto(v[modelOutputFact], &texts[modelOutputFact]) {
		f.ModelOutput = &texts[modelOutputFact]
	}
	return f
}

// factDests are the fields of SpanTurnFacts that factKeys' values go to, in the same order.
var factDests = [...]func(*store.SpanTurnFacts) **string{
	func(f *store.SpanTurnFacts) **string { return &f.TurnIndex },
	func(f *store.SpanTurnFacts) **string { return &f.GenkitName },
	func(f *store.SpanTurnFacts) **string { return &f.GenkitType },
	func(f *store.SpanTurnFacts) **string { return &f.Subtype },
	func(f *store.SpanTurnFacts) **string { return &f.State },
	func(f *store.SpanTurnFacts) **string { return &f.Operation },
	func(f *store.SpanTurnFacts) **string { return &f.Model },
	func(f *store.SpanTurnFacts) **string { return &f.ToolName },
	func(f *store.SpanTurnFacts) **string { return &f.InputTokens },
	func(f *store.SpanTurnFacts) **string { return &f.OutputTokens },
	func(f *store.SpanTurnFacts) **string { return &f.ModelOutput },
	func(f *store.SpanTurnFacts) **string { return &f.ResponseModel },
	func(f *store.SpanTurnFacts) **string { return &f.FinishReasons },
	func(f *store.SpanTurnFacts) **string { return &f.ToolCallID },
}

// Preview is what an input asked, in a few words: a lone string argument as itself ("durable
// execution retries" from {"query": "durable execution retries"}, or from that object as a JSON
// string, as Genkit stores it), several as their keys and values, a list of messages (GenAI's
// gen_ai.input.messages, Genkit's) as its first user message's text, anything else as compact
// JSON; "" for none. It is cut to max runes.
func Preview(in string, max int) string {
	in = strings.TrimSpace(in)
	if in == "" || in == "null" || in == "{}" || in == "[]" {
		return ""
	}
	var v any
	if json.Unmarshal([]byte(in), &v) == nil {
		in = previewValue(v)
	}
	in = strings.Join(strings.Fields(in), " ")
	if r := []rune(in); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return in
}

// firstUserText is the text of the first user message of msgs, when msgs is a list of messages
// ({"role": …, "parts" or "content": …}).
func firstUserText(msgs []any) (string, bool) {
	var first map[string]any
	for _, m := range msgs {
		msg, ok := m.(map[string]any)
		if !ok || msg["role"] == nil {
			return "", false
		}
		if first == nil || (msg["role"] == "user" && first["role"] != "user") {
			first = msg
		}
	}
	if first == nil {
		return "", false
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			texts = append(texts, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range []string{"text", "content"} {
				if s, ok := x[k].(string); ok {
					texts = append(texts, s)
					return
				}
			}
		}
	}
	walk(first["content"])
	walk(first["parts"])
	return strings.Join(texts, " "), len(texts) > 0
}

func previewValue(v any) string {
	switch x := v.(type) {
	case string:
		var inner any
		if t := strings.TrimSpace(x); (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Unmarshal([]byte(t), &inner) == nil {
			return previewValue(inner) // Genkit stores an input as a JSON string
		}
		return x
	case map[string]any:
		if len(x) == 1 {
			for _, e := range x {
				return previewValue(e)
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+": "+previewValue(x[k]))
		}
		return strings.Join(parts, ", ")
	case []any:
		if text, ok := firstUserText(x); ok {
			return text
		}
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, previewValue(e))
		}
		return strings.Join(parts, ", ")
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// objectValues returns the raw values of keys in obj, a valid JSON object, the last one when a name
// repeats, or nil when absent, skipping every other value undecoded (see objectMembers).
func objectValues(obj []byte, keys []string) []json.RawMessage {
	return objectValuesInto(obj, keys, make([]json.RawMessage, len(keys)))
}

// objectValuesInto is objectValues into out, which has a value per key. A name without escapes,
// nearly all of them, is compared in place: no allocation per member.
func objectValuesInto(obj []byte, keys []string, out []json.RawMessage) []json.RawMessage {
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		end := skipValue(obj, i)
		name := obj[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var unquoted string
			_ = json.Unmarshal(obj[i:end], &unquoted)
			name = []byte(unquoted)
		}
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // the colon
		end = skipValue(obj, i)
		for k, key := range keys {
			if string(name) == key {
				out[k] = obj[i:end]
			}
		}
		i = skipSpace(obj, end)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return out
}

// rawText is a JSON value as PostgreSQL's ->> gives it: a string unquoted, null as nil, anything
// else as its JSON text.
func rawText(raw json.RawMessage) *string {
	var s string
	if !rawTextInto(raw, &s) {
		return nil
	}
	return &s
}

// rawTextInto is rawText into dst; false for no value (absent, null, or a string that does not
// decode).
func rawTextInto(raw json.RawMessage, dst *string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	if raw[0] != '"' {
		*dst = string(raw)
		return true
	}
	if plain, ok := plainJSONString(raw); ok {
		*dst = plain
		return true
	}
	return json.Unmarshal(raw, dst) == nil
}

// plainJSONString returns the text of a JSON string with nothing escaped in it (nearly every
// attribute value read here), which is the bytes between its quotes, without decoding it.
func plainJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	ascii := true
	for _, c := range body {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	if !ascii && !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// usageOf is what spans add to their traces' totals in the trace list: each model or tool call
// (by SpanKind, so the list counts what the turn summary shows) among ended, the spans their
// ingest stored ended for the first time, and for OTLP the resource's service.name, once per trace.
func usageOf(spans []store.Span, ended []store.SpanKey) ([]store.SpanUsage, []store.TraceService) {
	var (
		usage    []store.SpanUsage
		services []store.TraceService
		seen     map[string]bool
		counted  = make(map[store.SpanKey]struct{}, len(ended))
	)
	for _, k := range ended {
		counted[k] = struct{}{}
	}
	for i := range spans {
		sp := &spans[i]
		if !seen[sp.TraceID] {
			name := ""
			if sp.Source == store.SpanSourceOTLP {
				name = serviceName(sp.Resource)
			}
			if session := sessionOf(sp.Attributes); name != "" || session != "" {
				if seen == nil {
					seen = map[string]bool{}
				}
				seen[sp.TraceID] = true
				services = append(services, store.TraceService{TraceID: sp.TraceID, Service: name, Session: session, Thread: threadOf(sp.Attributes, session)})
			}
		}
		if sp.EndTime == 0 {
			continue
		}
		key := store.SpanKey{TraceID: sp.TraceID, SpanID: sp.SpanID}
		if _, ok := counted[key]; !ok {
			continue // running, or stored ended before: its share is counted already
		}
		delete(counted, key) // a span repeated in one group counts once
		f := FactsOf(sp)
		kind := SpanKind(&f)
		if kind != KindModel && kind != KindTool {
			continue
		}
		u := store.SpanUsage{TraceID: sp.TraceID, SpanID: sp.SpanID, Kind: kind, StartTime: sp.StartTime,
			Failed: StatusName(sp.StatusCode, deref(f.State)) == "error"}
		if kind == KindModel {
			u.Model = modelName(&f)
			u.InputTokens, u.OutputTokens = tokens(&f)
		}
		usage = append(usage, u)
	}
	return usage, services
}

// sessionOf is the conversation a span's attributes name: Genkit's genkit:sessionId, else the GenAI
// conventions' gen_ai.conversation.id; "" when neither is there.
func sessionOf(attrs json.RawMessage) string {
	if len(attrs) < 2 || attrs[0] != '{' || !store.ContainsWord(attrs, "ession") && !store.ContainsWord(attrs, "conversation") {
		return ""
	}
	genkit, genai := objectMembers(attrs, "genkit:sessionId", "gen_ai.conversation.id")
	if s := jsonString(genkit); s != "" {
		return s
	}
	return jsonString(genai)
}

// threadOf is the chat thread of a span's session: Genkit's genkit:threadName, which a chat sets
// beside genkit:sessionId ("main" unless the app names another); "" without a session.
func threadOf(attrs json.RawMessage, session string) string {
	if session == "" || !store.ContainsWord(attrs, "genkit:threadName") {
		return ""
	}
	thread, _ := objectMembers(attrs, "genkit:threadName", "")
	return jsonString(thread)
}

// serviceName is an OTLP resource's service.name, unless it is the SDK's placeholder
// ("unknown_service", "unknown_service:node").
func serviceName(resource json.RawMessage) string {
	if len(resource) < 2 || resource[0] != '{' {
		return ""
	}
	v := objectValues(resource, []string{"service.name"})
	name := deref(rawText(v[0]))
	if strings.HasPrefix(name, "unknown_service") {
		return ""
	}
	return name
}
