package trace

import (
	"encoding/json"
	"strings"

	"github.com/loupe-dev/loupe/internal/store"
)

// resumeFactsOf reads, from ended generate spans, the tool requests that interrupted them (the
// output's message, finishReason interrupted) and those they resume (the input's resume.respond
// and resume.restart), so that a Genkit app's resumed trace can be linked to the one it resumes
// (store.TraceResumeFold).
func resumeFactsOf(spans []store.Span) ([]store.InterruptRef, []store.ResumeRef) {
	var refs []store.InterruptRef
	var resumes []store.ResumeRef
	for i := range spans {
		sp := &spans[i]
		a := sp.Attributes
		if sp.EndTime == 0 || len(a) < 2 || a[0] != '{' || !store.ContainsWord(a, "interrupt") && !store.ContainsWord(a, "resume") {
			continue
		}
		in, out := objectMembers(a, "genkit:input", "genkit:output")
		session := sessionOf(a)
		var resp struct {
			FinishReason string `json:"finishReason"`
			Message      struct {
				Content []struct {
					ToolRequest *struct {
						Name string `json:"name"`
						Ref  string `json:"ref"`
					} `json:"toolRequest"`
					Metadata map[string]json.RawMessage `json:"metadata"`
				} `json:"content"`
			} `json:"message"`
		}
		if s := jsonString(out); s != "" && leadingMembers(s, &resp.FinishReason, &resp.Message) && resp.FinishReason == "interrupted" {
			for _, p := range resp.Message.Content {
				if p.ToolRequest != nil && p.ToolRequest.Ref != "" && len(p.Metadata["interrupt"]) > 0 {
					refs = append(refs, store.InterruptRef{TraceID: sp.TraceID, Tool: p.ToolRequest.Name, Ref: p.ToolRequest.Ref,
						StartTime: sp.StartTime, Session: session})
				}
			}
		}
		var req struct {
			Resume *struct {
				Respond []struct {
					ToolResponse *struct {
						Name string `json:"name"`
						Ref  string `json:"ref"`
					} `json:"toolResponse"`
				} `json:"respond"`
				Restart []struct {
					ToolRequest *struct {
						Name string `json:"name"`
						Ref  string `json:"ref"`
					} `json:"toolRequest"`
				} `json:"restart"`
			} `json:"resume"`
		}
		add := func(name, ref string) {
			if ref != "" {
				resumes = append(resumes, store.ResumeRef{TraceID: sp.TraceID, Tool: name, Ref: ref, StartTime: sp.StartTime, Session: session})
			}
		}
		text := jsonString(in)
		// Genkit records the resumed generate with the resume already in its history. Genkit JS: a
		// tool message answering with metadata.interruptResponse, or a restarted request with
		// metadata.resumed. Genkit Go: the answered request marked metadata.resolvedInterrupt, and
		// a restart's answer in a tool message whose own metadata says resumed.
		var msgs []struct {
			Metadata map[string]json.RawMessage `json:"metadata"`
			Content  []struct {
				ToolRequest *struct {
					Name string `json:"name"`
					Ref  string `json:"ref"`
				} `json:"toolRequest"`
				ToolResponse *struct {
					Name string `json:"name"`
					Ref  string `json:"ref"`
				} `json:"toolResponse"`
				Metadata map[string]json.RawMessage `json:"metadata"`
			} `json:"content"`
		}
		if text != "" && leadingMember(text, "messages", &msgs) {
			for _, m := range msgs {
				for _, p := range m.Content {
					switch {
					case p.ToolResponse != nil && len(p.Metadata["interruptResponse"]) > 0:
						add(p.ToolResponse.Name, p.ToolResponse.Ref)
					case p.ToolRequest != nil && (marked(p.Metadata["resumed"]) || marked(p.Metadata["resolvedInterrupt"])):
						add(p.ToolRequest.Name, p.ToolRequest.Ref)
					case p.ToolResponse != nil && marked(m.Metadata["resumed"]):
						add(p.ToolResponse.Name, p.ToolResponse.Ref)
					}
				}
			}
		}
		if text != "" && leadingMember(text, "resume", &req.Resume) && req.Resume != nil {
			for _, r := range req.Resume.Respond {
				if r.ToolResponse != nil {
					add(r.ToolResponse.Name, r.ToolResponse.Ref)
				}
			}
			for _, r := range req.Resume.Restart {
				if r.ToolRequest != nil {
					add(r.ToolRequest.Name, r.ToolRequest.Ref)
				}
			}
		}
	}
	return refs, resumes
}

// marked reports whether a metadata value is present and not false or null.
func marked(v json.RawMessage) bool {
	return len(v) > 0 && string(v) != "false" && string(v) != "null"
}

// leadingMembers decodes a generate response's finishReason and message from its JSON, reading
// members in order and stopping once both are read: a stored output may be cut short (long
// payloads are), and these come before the long request that Genkit puts after them.
func leadingMembers(text string, finish *string, message any) bool {
	dec := json.NewDecoder(strings.NewReader(text))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	got := 0
	for got < 2 && dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		var target any
		switch t {
		case "finishReason":
			target = finish
		case "message":
			target = message
		default:
			var skip json.RawMessage
			target = &skip
		}
		if err := dec.Decode(target); err != nil {
			return false
		}
		if t == "finishReason" || t == "message" {
			got++
		}
	}
	return got == 2
}

// leadingMember decodes one member of a JSON object, reading members in order until it is found
// (a stored input may be cut short after it).
func leadingMember(text, name string, into any) bool {
	dec := json.NewDecoder(strings.NewReader(text))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if t == name {
			return dec.Decode(into) == nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}
