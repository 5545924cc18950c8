package engine

import (
	"context"
)

// resume answers the interrupts of the last model message before the model is called. Each tool
// request is matched by name and ref, with precedence pendingOutput > respond > restart; one left
// unanswered is INVALID_ARGUMENT. It returns the next request (history with the revised model
// message and the resumed tool message), or, when a restarted tool interrupts again, an interrupted
// response whose message replaces the last model message (Genkit fails with FAILED_PRECONDITION).
func (g *generation) resume(ctx context.Context, raw *GenerateActionOptions) (*GenerateActionOptions, *ModelResponse, error) {
	msgs := raw.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != RoleModel || countToolRequests(msgs[len(msgs)-1]) == 0 {
		return nil, nil, Errorf(StatusFailedPrecondition,
			"resume: the last message must be a model message with at least one tool request")
	}
	last := msgs[len(msgs)-1]
	lastIdx := len(msgs) - 1
	rs := raw.Resume
	revised := append([]*Part(nil), last.Content...)
	slots := make([]*Part, 0, len(last.Content))
	slotOf := make(map[int]int) // content position -> slot, for restarts
	var restarts []*pendingCall

	for i, p := range last.Content {
		tr := p.ToolRequest
		if tr == nil {
			continue
		}
		if out, ok := p.Metadata[MetaPendingOutput]; ok {
			revised[i] = p.WithMetadata(nil, MetaPendingOutput)
			slots = append(slots, &Part{
				Kind:         PartToolResponse,
				ToolResponse: &ToolResponse{Name: tr.Name, Ref: tr.Ref, Output: out},
				Metadata:     map[string]any{MetaSource: "pending"},
			})
			continue
		}
		if rp := findPart(rs.Respond, tr, true); rp != nil {
			t, ok := g.tools[tr.Name]
			if !ok {
				return nil, nil, Errorf(StatusNotFound, "resume: tool %q (ref %s) not found", tr.Name, tr.Ref)
			}
			if denied, _ := rp.Metadata[MetaDenied].(bool); denied {
				// A denial has its own shape; the output schema does not apply.
			} else if err := t.Definition().OutputSchema.Validate(rp.ToolResponse.Output); err != nil {
				return nil, nil, Errorf(StatusInvalidArgument, "resume: respond to %s (ref %s): %w", tr.Name, tr.Ref, err)
			}
			revised[i] = resolved(p)
			resp := *rp
			resp.Kind = PartToolResponse
			slots = append(slots, &resp)
			continue
		}
		if sp := findPart(rs.Restart, tr, false); sp != nil {
			t, ok := g.tools[tr.Name]
			if !ok {
				return nil, nil, Errorf(StatusNotFound, "resume: tool %q (ref %s) not found", tr.Name, tr.Ref)
			}
			if !restartable(t) {
				return nil, nil, Errorf(StatusFailedPrecondition, "resume: tool %s is not restartable; respond to it instead", tr.Name)
			}
			input := sp.ToolRequest.Input
			var original any
			if _, replaced := sp.Metadata[MetaReplacedInput]; replaced && input != nil {
				original = tr.Input
			}
			if input == nil {
				input = tr.Input
			}
			np := &Part{Kind: PartToolRequest, ToolRequest: &ToolRequest{Name: tr.Name, Ref: tr.Ref, Input: input}, Metadata: p.Metadata}
			c, err := g.prepareCall(np, input)
			if err != nil {
				return nil, nil, err
			}
			c.pos = i
			c.resumed = map[string]any{}
			c.resumedValue = true
			if m, ok := sp.Metadata[MetaResumed].(map[string]any); ok {
				c.resumed = m
				c.resumedValue = m
			}
			c.originalInput = original
			restarts = append(restarts, c)
			revised[i] = resolved(p)
			slotOf[i] = len(slots)
			slots = append(slots, nil)
			continue
		}
		return nil, nil, Errorf(StatusInvalidArgument,
			"resume: unresolved tool request %s (ref %s): it must be answered in resume.respond or resume.restart", tr.Name, tr.Ref)
	}

	if len(restarts) > 0 {
		if err := g.execCalls(ctx, 0, restarts); err != nil {
			return nil, nil, err
		}
	}
	reinterrupted := false
	for _, c := range restarts {
		if c.interrupt != nil {
			reinterrupted = true
			continue
		}
		slots[slotOf[c.pos]] = c.responsePart()
	}

	if reinterrupted {
		resp, err := g.reinterrupt(ctx, raw, last, restarts, slots)
		return nil, resp, err
	}

	revMsg := &Message{Role: last.Role, Content: revised, Metadata: last.Metadata}
	var resumedMeta any = true
	if rs.Metadata != nil {
		resumedMeta = rs.Metadata
	}
	toolMsg := &Message{Role: RoleTool, Content: slots, Metadata: map[string]any{MetaResumed: resumedMeta}}
	if g.hooks.OnMessage != nil {
		if err := g.hooks.OnMessage(ctx, &MessageEvent{Index: lastIdx, Replace: true, Source: SourceResume, Message: revMsg}); err != nil {
			return nil, nil, err
		}
		if err := g.hooks.OnMessage(ctx, &MessageEvent{Index: lastIdx + 1, Source: SourceResume, Message: toolMsg}); err != nil {
			return nil, nil, err
		}
	}
	if err := g.emitChunk(ctx, RoleTool, g.msgIndex, toolMsg.Content, true); err != nil {
		return nil, nil, err
	}
	g.msgIndex++
	next := *raw
	next.Resume = nil
	next.Messages = append(append(make([]*Message, 0, len(msgs)+1), msgs[:lastIdx]...), revMsg, toolMsg)
	return &next, nil, nil
}

// reinterrupt builds the interrupted response of a resume in which a restarted tool interrupted
// again. Its message replaces the last model message: re-interrupted requests carry the new
// metadata.interrupt, every other request carries its answer as metadata.pendingOutput, so the next
// resume needs to answer only the new interrupts and nothing runs twice.
func (g *generation) reinterrupt(ctx context.Context, raw *GenerateActionOptions, last *Message, restarts []*pendingCall, slots []*Part) (*ModelResponse, error) {
	content := append([]*Part(nil), last.Content...)
	slot := 0
	byPos := make(map[int]*pendingCall, len(restarts))
	for _, c := range restarts {
		byPos[c.pos] = c
	}
	for i, p := range last.Content {
		if p.ToolRequest == nil {
			continue
		}
		if c, ok := byPos[i]; ok && c.interrupt != nil {
			np := c.part.WithMetadata(map[string]any{MetaInterrupt: interruptValue(c.interrupt)}, MetaResumed, MetaReplacedInput)
			content[i] = np
		} else {
			content[i] = p.WithMetadata(map[string]any{MetaPendingOutput: slots[slot].ToolResponse.Output}, MetaInterrupt)
		}
		slot++
	}
	msg := &Message{Role: last.Role, Content: content, Metadata: last.Metadata}
	resp := &ModelResponse{
		Message:      msg,
		FinishReason: FinishReasonInterrupted,
		Request:      &ModelRequest{Messages: raw.Messages[:len(raw.Messages)-1], Tools: g.toolDefs},
	}
	if g.hooks.OnMessage != nil {
		if err := g.hooks.OnMessage(ctx, &MessageEvent{Index: len(raw.Messages) - 1, Replace: true, Source: SourceResume, Message: msg}); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// resolved re-stamps an answered interrupt as resolvedInterrupt.
func resolved(p *Part) *Part {
	v, ok := p.Metadata[MetaInterrupt]
	if !ok {
		return p
	}
	return p.WithMetadata(map[string]any{MetaResolvedInterrupt: v}, MetaInterrupt)
}

// findPart finds the respond (toolResponse) or restart (toolRequest) part matching the request by
// name and ref.
func findPart(parts []*Part, tr *ToolRequest, response bool) *Part {
	for _, p := range parts {
		if response {
			if r := p.ToolResponse; r != nil && r.Name == tr.Name && r.Ref == tr.Ref {
				return p
			}
		} else if r := p.ToolRequest; r != nil && r.Name == tr.Name && r.Ref == tr.Ref {
			return p
		}
	}
	return nil
}
