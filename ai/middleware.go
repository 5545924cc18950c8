package ai

import (
	"context"
	"encoding/json"
)

// GenerateTurn is what generate-level middleware sees: the request of a turn and where it stands.
type GenerateTurn struct {
	// Request is the turn's action options. Its Tools hold the names of the registered tools
	// given to WithTools (ToolName), then the refs ("/tool/<name>", "/tool.v2/<name>") of the
	// tools given as values, as Genkit's toolsToActionRefs does; Middleware.Tools are not among
	// them. The tools are resolved once per
	// Generate, so changing Tools here does not change what the model is offered.
	Request *GenerateActionOptions
	// Turn is the 0-based turn of this Generate call.
	Turn int
	// MessageIndex is the index, among the messages this Generate produces, of the turn's model
	// message.
	MessageIndex int
}

// GenerateNext continues a generate-level middleware chain.
type GenerateNext func(ctx context.Context, turn *GenerateTurn) (*ModelResponse, error)

// ModelNext continues a model-level middleware chain.
type ModelNext func(ctx context.Context, req *ModelRequest, cb ModelStreamCallback) (*ModelResponse, error)

// ToolCall is one tool execution as tool middleware sees it.
type ToolCall struct {
	Tool Tool
	Name string
	Ref  string
	// Input is the (validated) input as JSON.
	Input json.RawMessage
	// IdempotencyKey is the run (or trace) id plus the ref (ToolContext.IdempotencyKey).
	IdempotencyKey string
	Turn           int
	// Resumed is non-nil for a restarted call; OriginalInput is set when the restart replaced the
	// input.
	Resumed       map[string]any
	OriginalInput any
}

// ToolNext continues a tool middleware chain; at its end the tool runs.
type ToolNext func(ctx context.Context, call *ToolCall) (*MultipartToolResponse, error)

// Middleware hooks into the generate loop at three levels, each an onion chain in slice order: the
// first middleware is the outermost. Any hook may be nil. Give it to WithGenerateMiddleware.
type Middleware struct {
	// Name labels the middleware in errors.
	Name string
	// Generate wraps each turn, including the turns that follow it (Genkit's recursion).
	Generate func(ctx context.Context, turn *GenerateTurn, next GenerateNext) (*ModelResponse, error)
	// Model wraps each model call.
	Model func(ctx context.Context, req *ModelRequest, cb ModelStreamCallback, next ModelNext) (*ModelResponse, error)
	// Tool wraps each single tool execution, including restarts. It can record intent before next
	// and the result after it, or return a recorded output without calling next (crash recovery).
	// An interrupt reaches it as a *ToolInterruptError from next; it may return one too. It runs
	// concurrently for the parallel calls of a turn, so it must be safe for concurrent use.
	Tool func(ctx context.Context, call *ToolCall, next ToolNext) (*MultipartToolResponse, error)
	// Tools are made available to the model in every turn, as if passed with WithTools.
	Tools []Tool
}

// ModelMiddleware wraps a model call, as Genkit Go's does: it returns the function that calls next
// with what it changes. Give it to WithMiddleware.
type ModelMiddleware = func(next ModelFunc) ModelFunc
