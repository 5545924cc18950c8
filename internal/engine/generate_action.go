package engine

import (
	"context"
	"encoding/json"
)

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
