package engine

import (
	"errors"
)

// InterruptError is returned by ToolContext.Interrupt. A tool that returns it stops the generate
// loop with finishReason "interrupted" instead of failing it.
type InterruptError struct {
	// Metadata is stamped on the tool request as metadata.interrupt (true when nil).
	Metadata map[string]any
}

// Error implements error.
func (e *InterruptError) Error() string { return "tool interrupted" }

func asInterrupt(err error, target **InterruptError) bool { return errors.As(err, target) }

// interruptValue is the value of metadata.interrupt for the error: its metadata, or true.
func (e *InterruptError) interruptValue() any {
	if e.Metadata == nil {
		return true
	}
	return e.Metadata
}

// RespondPart builds a resume.respond entry from stored data: the answer to the interrupted call
// (toolName, ref), used instead of running the tool. Generate validates output against the tool's
// output schema when it resumes.
func RespondPart(toolName, ref string, output any) *Part {
	return &Part{
		Kind:         PartToolResponse,
		ToolResponse: &ToolResponse{Name: toolName, Ref: ref, Output: output},
		Metadata:     map[string]any{MetaInterruptResponse: true},
	}
}

// DenyPart builds a resume.respond entry that answers the interrupted call (toolName, ref) with a
// reviewer's denial. Unlike RespondPart its output is not checked against the tool's output schema:
// a denial has its own shape, which the model reads in the tool response.
func DenyPart(toolName, ref string, denial any) *Part {
	p := RespondPart(toolName, ref, denial)
	p.Metadata[MetaDenied] = true
	return p
}

// RestartPart builds a resume.restart entry from stored data: run the interrupted call (toolName,
// ref) again. replaceInput, when not nil, replaces the original input, which the tool then sees as
// ToolContext.OriginalInput. resumedMetadata is given to the tool as ToolContext.Resumed (empty when
// nil).
func RestartPart(toolName, ref string, replaceInput any, resumedMetadata map[string]any) *Part {
	var resumed any = true
	if resumedMetadata != nil {
		resumed = resumedMetadata
	}
	md := map[string]any{MetaResumed: resumed}
	if replaceInput != nil {
		// The original input is filled in from history when the restart is matched.
		md[MetaReplacedInput] = nil
	}
	return &Part{
		Kind:        PartToolRequest,
		ToolRequest: &ToolRequest{Name: toolName, Ref: ref, Input: replaceInput},
		Metadata:    md,
	}
}

// RestartOptions tunes Tool.Restart.
type RestartOptions struct {
	// ReplaceInput, when not nil, replaces the interrupted call's input.
	ReplaceInput any
	// ResumedMetadata is passed to the tool as ToolContext.Resumed.
	ResumedMetadata map[string]any
}

// respondTo builds a respond part for an interrupt part.
func respondTo(interrupt *Part, output any) (*Part, error) {
	if interrupt == nil || interrupt.ToolRequest == nil {
		return nil, Errorf(StatusInvalidArgument, "respond: part is not a tool request")
	}
	return RespondPart(interrupt.ToolRequest.Name, interrupt.ToolRequest.Ref, output), nil
}

// restartOf builds a restart part for an interrupt part, keeping its metadata as Genkit does.
func restartOf(interrupt *Part, opts *RestartOptions) (*Part, error) {
	if interrupt == nil || interrupt.ToolRequest == nil {
		return nil, Errorf(StatusInvalidArgument, "restart: part is not a tool request")
	}
	if opts == nil {
		opts = &RestartOptions{}
	}
	tr := *interrupt.ToolRequest
	set := map[string]any{MetaResumed: true}
	if opts.ResumedMetadata != nil {
		set[MetaResumed] = opts.ResumedMetadata
	}
	if opts.ReplaceInput != nil {
		set[MetaReplacedInput] = tr.Input
		tr.Input = opts.ReplaceInput
	}
	p := interrupt.withMetadata(set, MetaInterrupt)
	p.ToolRequest = &tr
	return p, nil
}
