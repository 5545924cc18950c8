package engine

import (
	"context"
)

func chainModel(mws []*Middleware, final ModelNext) ModelNext {
	next := final
	for i := len(mws) - 1; i >= 0; i-- {
		if h := mws[i].Model; h != nil {
			n := next
			next = func(ctx context.Context, req *ModelRequest, cb ModelStreamFunc) (*ModelResponse, error) {
				return h(ctx, req, cb, n)
			}
		}
	}
	return next
}

func chainGenerate(mws []*Middleware, final GenerateNext) GenerateNext {
	next := final
	for i := len(mws) - 1; i >= 0; i-- {
		if h := mws[i].Generate; h != nil {
			n := next
			next = func(ctx context.Context, t *GenerateTurn) (*ModelResponse, error) { return h(ctx, t, n) }
		}
	}
	return next
}

func chainTool(mws []*Middleware, final ToolNext) ToolNext {
	next := final
	for i := len(mws) - 1; i >= 0; i-- {
		if h := mws[i].Tool; h != nil {
			n := next
			next = func(ctx context.Context, c *ToolCall) (*ToolOutput, error) { return h(ctx, c, n) }
		}
	}
	return next
}
