package server

import (
	"context"
	"encoding/json"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
	"github.com/loupe-dev/loupe/web/templates"
)

// attrToolCallID is the GenAI conventions' tool call id, which Loupe's tool spans carry as the
// call's ref.
const attrToolCallID = "gen_ai.tool.call.id"

// spanInterrupt is the question an interrupted span asks: its "interrupt" event's metadata
// (Loupe's own spans, and Genkit Go's, whose metadata ingest takes out of the error message), or
// else, for Genkit JS, whose tool span carries no metadata, the metadata of the tool request in
// its parent generate span's output; when that is just true (ai.defineInterrupt), the tool's input
// is the question. It is "" when none is found.
func (s *Server) spanInterrupt(ctx context.Context, sp *store.Span, attrs map[string]json.RawMessage) string {
	var events []struct {
		Name       string         `json:"name"`
		Attributes map[string]any `json:"attributes"`
	}
	_ = json.Unmarshal(sp.Events, &events)
	for _, e := range events {
		if md, ok := e.Attributes[trace.EventAttrInterruptMetadata].(string); ok && e.Name == "interrupt" && md != "" {
			return md
		}
	}
	if sp.ParentSpanID == nil {
		return ""
	}
	var name string
	_ = json.Unmarshal(attrs["genkit:name"], &name)
	parent, err := s.getSpan(ctx, sp.TraceID, *sp.ParentSpanID)
	if err != nil || name == "" {
		return ""
	}
	var pattrs map[string]json.RawMessage
	_ = json.Unmarshal(parent.Attributes, &pattrs)
	var output string
	_ = json.Unmarshal(pattrs["genkit:output"], &output)
	var resp struct {
		Message struct {
			Content []struct {
				ToolRequest *struct {
					Name string `json:"name"`
				} `json:"toolRequest"`
				Metadata struct {
					Interrupt json.RawMessage `json:"interrupt"`
				} `json:"metadata"`
			} `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal([]byte(output), &resp) != nil {
		return ""
	}
	for _, c := range resp.Message.Content {
		md := c.Metadata.Interrupt
		if c.ToolRequest == nil || c.ToolRequest.Name != name || len(md) == 0 || string(md) == "false" || string(md) == "null" {
			continue
		}
		if string(md) == "true" {
			var input string
			_ = json.Unmarshal(attrs["genkit:input"], &input)
			return input
		}
		return string(compactRaw(md))
	}
	return ""
}

// spanInterruptOutcome is how the interrupt of an interrupted tool span was resolved, found by the
// trace's run and the call's ref (gen_ai.tool.call.id) and turn: nil when Loupe holds no such
// interrupt (a trace from another program), pending while it waits.
func (s *Server) spanInterruptOutcome(ctx context.Context, sp *store.Span, attrs map[string]json.RawMessage) *templates.InterruptOutcome {
	var ref string
	if json.Unmarshal(attrs[attrToolCallID], &ref) != nil || ref == "" {
		return nil
	}
	tr, err := s.reads.TraceGet(ctx, sp.TraceID)
	if err != nil || tr.RunID == nil {
		return nil
	}
	turn := -1
	if raw, ok := attrs[trace.AttrTurnIndex]; ok {
		_ = json.Unmarshal(raw, &turn)
	}
	list, err := s.store.InterruptListByRun(ctx, *tr.RunID)
	if err != nil {
		return nil
	}
	var it *store.Interrupt
	for _, i := range list {
		if i.Ref == ref && (turn < 0 || i.Turn == turn) {
			it = i // the last round of this call
		}
	}
	if it == nil {
		return nil
	}
	return &templates.InterruptOutcome{Status: it.Status, ResolvedBy: deref(it.ResolvedBy), Comment: deref(it.Comment),
		ResolvedAt: it.ResolvedAt, URL: "/runs/" + tr.RunID.String() + "#interrupt-" + it.ID.String()}
}
