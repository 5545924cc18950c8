package engine

import (
	"context"
	"encoding/json"
)

// History returns the conversation after this response: the request's messages followed by the
// response message. Pass it to WithMessages (with WithRespond/WithRestart) to resume.
func (r *ModelResponse) History() []*Message {
	if r == nil {
		return nil
	}
	var msgs []*Message
	if r.Request != nil {
		msgs = append(msgs, r.Request.Messages...)
	}
	if r.Message != nil {
		msgs = append(msgs, r.Message)
	}
	return stripOutputParts(msgs)
}

// stripOutputParts drops format instructions injected into request messages.
func stripOutputParts(msgs []*Message) []*Message {
	for i, m := range msgs {
		for j, p := range m.Content {
			if isOutputPart(p) {
				cp := *m
				cp.Content = append(append([]*Part(nil), m.Content[:j]...), m.Content[j+1:]...)
				msgs[i] = &cp
				break
			}
		}
	}
	return msgs
}

// generateAction is /util/generate: Generate with GenerateActionOptions as JSON input.
type generateAction struct{ r *Registry }

func (a *generateAction) Desc() *ActionDesc {
	return &ActionDesc{
		Key: ActionKey(ActionTypeUtil, "generate"), Name: "generate", Type: ActionTypeUtil,
		Description: "Runs the generate loop on GenerateActionOptions.",
	}
}

func (a *generateAction) RunJSON(ctx context.Context, input json.RawMessage, cb StreamFunc) (json.RawMessage, error) {
	var opts GenerateActionOptions
	if err := json.Unmarshal(input, &opts); err != nil {
		return nil, Errorf(StatusInvalidArgument, "generate: decode options: %w", err)
	}
	gopts := []GenerateOption{WithActionOptions(&opts)}
	if cb != nil {
		gopts = append(gopts, WithStreaming(func(ctx context.Context, c *ModelResponseChunk) error {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			return cb(ctx, b)
		}))
	}
	resp, err := Generate(ctx, a.r, gopts...)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}
