package engine

import (
	"github.com/loupe-dev/loupe/ai"
)

// The engine works on the public vocabulary of package ai; these names keep its code, and the
// internal packages built on it, short.
type (
	Role                  = ai.Role
	Part                  = ai.Part
	PartKind              = ai.PartKind
	Media                 = ai.Media
	ToolRequest           = ai.ToolRequest
	ToolResponse          = ai.ToolResponse
	Message               = ai.Message
	Document              = ai.Document
	ToolDefinition        = ai.ToolDefinition
	OutputConfig          = ai.OutputConfig
	ToolChoice            = ai.ToolChoice
	ModelRequest          = ai.ModelRequest
	Usage                 = ai.GenerationUsage
	ModelResponse         = ai.ModelResponse
	ModelResponseChunk    = ai.ModelResponseChunk
	FinishReason          = ai.FinishReason
	GenerateOutputOptions = ai.GenerateOutputOptions
	Resume                = ai.Resume
	GenerateActionOptions = ai.GenerateActionOptions
	Schema                = ai.Schema
	FieldError            = ai.FieldError
	ValidationError       = ai.ValidationError
	Status                = ai.Status
	Error                 = ai.Error
	InterruptedError      = ai.InterruptedError
	NonDeterminismError   = ai.NonDeterminismError
	OpKind                = ai.OpKind
	ToolContext           = ai.ToolContext
	Tool                  = ai.Tool
	ToolOutput            = ai.MultipartToolResponse
	InterruptError        = ai.ToolInterruptError
	InterruptOptions      = ai.InterruptOptions
	RestartOptions        = ai.RestartOptions
	ToolOption            = ai.ToolOption
	ModelStreamFunc       = ai.ModelStreamCallback
	ModelFunc             = ai.ModelFunc
	ModelOptions          = ai.ModelOptions
	ModelSupports         = ai.ModelSupports
	Middleware            = ai.Middleware
	GenerateTurn          = ai.GenerateTurn
	GenerateNext          = ai.GenerateNext
	ModelNext             = ai.ModelNext
	ToolCall              = ai.ToolCall
	ToolNext              = ai.ToolNext
)

// TypedTool is a tool with Go input and output types.
type TypedTool[In, Out any] = ai.ToolDef[In, Out]

// ToolFunc is the implementation of a typed tool.
type ToolFunc[In, Out any] = ai.ToolFunc[In, Out]

// MultipartToolFunc is the implementation of a multipart tool.
type MultipartToolFunc[In any] = ai.MultipartToolFunc[In]

// Roles, finish reasons, part kinds, tool choices and statuses.
const (
	RoleUser   = ai.RoleUser
	RoleModel  = ai.RoleModel
	RoleTool   = ai.RoleTool
	RoleSystem = ai.RoleSystem

	FinishReasonStop        = ai.FinishReasonStop
	FinishReasonLength      = ai.FinishReasonLength
	FinishReasonBlocked     = ai.FinishReasonBlocked
	FinishReasonInterrupted = ai.FinishReasonInterrupted
	FinishReasonOther       = ai.FinishReasonOther
	FinishReasonUnknown     = ai.FinishReasonUnknown

	PartText         = ai.PartText
	PartMedia        = ai.PartMedia
	PartToolRequest  = ai.PartToolRequest
	PartToolResponse = ai.PartToolResponse
	PartData         = ai.PartData
	PartReasoning    = ai.PartReasoning
	PartCustom       = ai.PartCustom

	ToolChoiceAuto     = ai.ToolChoiceAuto
	ToolChoiceRequired = ai.ToolChoiceRequired
	ToolChoiceNone     = ai.ToolChoiceNone

	StatusOK                 = ai.StatusOK
	StatusCancelled          = ai.StatusCancelled
	StatusUnknown            = ai.StatusUnknown
	StatusInvalidArgument    = ai.StatusInvalidArgument
	StatusDeadlineExceeded   = ai.StatusDeadlineExceeded
	StatusNotFound           = ai.StatusNotFound
	StatusAlreadyExists      = ai.StatusAlreadyExists
	StatusPermissionDenied   = ai.StatusPermissionDenied
	StatusResourceExhausted  = ai.StatusResourceExhausted
	StatusFailedPrecondition = ai.StatusFailedPrecondition
	StatusAborted            = ai.StatusAborted
	StatusUnimplemented      = ai.StatusUnimplemented
	StatusInternal           = ai.StatusInternal
	StatusUnavailable        = ai.StatusUnavailable

	OpGenerate = ai.OpGenerate
	OpStep     = ai.OpStep

	DefaultMaxTurns = ai.DefaultMaxTurns
)

var (
	// ErrInterrupted is ai.ErrInterrupted.
	ErrInterrupted = ai.ErrInterrupted

	NewTextPart         = ai.NewTextPart
	NewDataPart         = ai.NewDataPart
	NewMediaPart        = ai.NewMediaPart
	NewToolRequestPart  = ai.NewToolRequestPart
	NewToolResponsePart = ai.NewToolResponsePart
	NewTextMessage      = ai.NewTextMessage
	NewSchema           = ai.NewSchema
	MustSchema          = ai.MustSchema
	RespondPart         = ai.RespondPart
	RestartPart         = ai.RestartPart
	StatusOf            = ai.StatusOf
	// Errorf is ai.NewError.
	Errorf = ai.NewError

	WithDenial           = ai.WithDenial
	WithToolInputSchema  = ai.WithToolInputSchema
	WithToolOutputSchema = ai.WithToolOutputSchema
	WithToolMetadata     = ai.WithToolMetadata
)

// NewReasoningPart returns a reasoning part without a signature.
func NewReasoningPart(text string) *Part { return ai.NewReasoningPart(text, nil) }

// SchemaFor is ai.SchemaFor.
func SchemaFor[T any]() (*Schema, bool, error) { return ai.SchemaFor[T]() }

// WithRequestMetadata is ai.WithRequestMetadata.
func WithRequestMetadata[In any](f func(In) map[string]any) ToolOption {
	return ai.WithRequestMetadata(f)
}

// DenyPart builds a resume.respond entry that answers the interrupted call (toolName, ref) with a
// reviewer's denial. Unlike RespondPart its output is not checked against the tool's output schema:
// a denial has its own shape, which the model reads in the tool response.
func DenyPart(toolName, ref string, denial any) *Part {
	p := RespondPart(toolName, ref, denial)
	p.Metadata[MetaDenied] = true
	return p
}
