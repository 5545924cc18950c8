package loupe

import "github.com/loupe-dev/loupe/internal/engine"

// Messages and parts, in Genkit's JSON shapes.
type (
	// Message is one message of a conversation: a role and its parts.
	Message = engine.Message
	// Part is one piece of a message: text, media, data, reasoning, a tool request or a tool
	// response.
	Part = engine.Part
	// Role says who wrote a message.
	Role = engine.Role
	// Media is a part's media: a content type and a URL (data: URLs included).
	Media = engine.Media
	// ToolRequest is a model's request to call a tool.
	ToolRequest = engine.ToolRequest
	// ToolResponse is a tool's answer to a ToolRequest.
	ToolResponse = engine.ToolResponse
	// Document is a retrieved document given to the model as context.
	Document = engine.Document
)

// Roles.
const (
	RoleUser   = engine.RoleUser
	RoleModel  = engine.RoleModel
	RoleTool   = engine.RoleTool
	RoleSystem = engine.RoleSystem
)

// Requests and responses.
type (
	// ModelRequest is what a model is asked: the messages, tool definitions and configuration.
	ModelRequest = engine.ModelRequest
	// ModelResponse is a model's answer, and Generate's result: the message, finish reason,
	// usage, and the whole conversation (History).
	ModelResponse = engine.ModelResponse
	// ModelResponseChunk is one streamed piece of a model's answer.
	ModelResponseChunk = engine.ModelResponseChunk
	// Usage counts a response's tokens.
	Usage = engine.Usage
	// FinishReason says why a model stopped; FinishReasonInterrupted when a tool interrupted.
	FinishReason = engine.FinishReason
	// ToolChoice tells the model whether it may, must or must not call tools.
	ToolChoice = engine.ToolChoice
)

// Finish reasons.
const (
	FinishReasonStop        = engine.FinishReasonStop
	FinishReasonLength      = engine.FinishReasonLength
	FinishReasonBlocked     = engine.FinishReasonBlocked
	FinishReasonInterrupted = engine.FinishReasonInterrupted
	FinishReasonOther       = engine.FinishReasonOther
)

// Tool choices.
const (
	ToolChoiceAuto     = engine.ToolChoiceAuto
	ToolChoiceRequired = engine.ToolChoiceRequired
	ToolChoiceNone     = engine.ToolChoiceNone
)

// Actions.
type (
	// Flow is a registered flow with input In, output Out and stream chunks Stream.
	Flow[In, Out, Stream any] = engine.Flow[In, Out, Stream]
	// Tool is anything Generate can give the model as a tool.
	Tool = engine.Tool
	// TypedTool is a tool defined from a Go function; its JSON schemas come from In and Out.
	TypedTool[In, Out any] = engine.TypedTool[In, Out]
	// ToolContext is what a tool function gets: the context, the call's name, ref and idempotency
	// key, and, on a restart, the resume metadata and the original input.
	ToolContext = engine.ToolContext
	// ToolOutput is a multipart tool's answer: an output and content parts.
	ToolOutput = engine.ToolOutput
	// ToolOption configures a tool.
	ToolOption = engine.ToolOption
	// Model is a model Generate can call.
	Model = engine.Model
	// ModelInfo describes a model: its label and what it supports.
	ModelInfo = engine.ModelInfo
	// ModelSupports says what a model can do (tools, multiturn, media, system role, …).
	ModelSupports = engine.ModelSupports
	// ModelFunc is a model's implementation. cb is nil unless the caller streams.
	ModelFunc = engine.ModelFunc
	// ModelStreamFunc receives streamed chunks.
	ModelStreamFunc = engine.ModelStreamFunc
	// Prompt is a registered prompt: a typed input rendered into the user's message, then a
	// generate with the prompt's model, system instruction and tools.
	Prompt[In any] = engine.Prompt[In]
	// PromptConfig is a prompt's model, system instruction, tools, turn limit and configuration.
	PromptConfig = engine.PromptConfig
)

// Generate's options and middleware.
type (
	// GenerateOption configures Generate.
	GenerateOption = engine.GenerateOption
	// Middleware wraps each turn (Generate), each model call (Model) and each tool execution
	// (Tool), as Genkit's generate middleware does.
	Middleware = engine.Middleware
	// GenerateTurn is one turn as the Generate middleware sees it.
	GenerateTurn = engine.GenerateTurn
	// GenerateNext calls the rest of the turn.
	GenerateNext = engine.GenerateNext
	// ModelNext calls the model.
	ModelNext = engine.ModelNext
	// ToolCall is one tool execution as the Tool middleware sees it.
	ToolCall = engine.ToolCall
	// ToolNext runs the tool.
	ToolNext = engine.ToolNext
)

// Errors.
type (
	// Error is an error with a Genkit status code; errors.As finds it.
	Error = engine.Error
	// Status is a Genkit status code such as INVALID_ARGUMENT or ABORTED.
	Status = engine.Status
	// InterruptError is what a tool returns to interrupt (ToolContext.Interrupt makes one).
	InterruptError = engine.InterruptError
)

// StatusOf returns the Genkit status of err: ABORTED for a turn limit, INVALID_ARGUMENT for input
// that fails a schema, and so on; INTERNAL for an error without one.
func StatusOf(err error) Status { return engine.StatusOf(err) }

// NewTextPart returns a text part.
func NewTextPart(text string) *Part { return engine.NewTextPart(text) }

// NewDataPart returns a part holding structured data.
func NewDataPart(data any) *Part { return engine.NewDataPart(data) }

// NewMediaPart returns a media part.
func NewMediaPart(contentType, url string) *Part { return engine.NewMediaPart(contentType, url) }

// NewTextMessage returns a message of one text part.
func NewTextMessage(role Role, text string) *Message { return engine.NewTextMessage(role, text) }
