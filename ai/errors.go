package ai

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Status is a Genkit (gRPC-style) status code carried by errors.
type Status string

// Status codes, spelled as Genkit spells them.
const (
	StatusOK                 Status = "OK"
	StatusCancelled          Status = "CANCELLED"
	StatusUnknown            Status = "UNKNOWN"
	StatusInvalidArgument    Status = "INVALID_ARGUMENT"
	StatusDeadlineExceeded   Status = "DEADLINE_EXCEEDED"
	StatusNotFound           Status = "NOT_FOUND"
	StatusAlreadyExists      Status = "ALREADY_EXISTS"
	StatusPermissionDenied   Status = "PERMISSION_DENIED"
	StatusResourceExhausted  Status = "RESOURCE_EXHAUSTED"
	StatusFailedPrecondition Status = "FAILED_PRECONDITION"
	StatusAborted            Status = "ABORTED"
	StatusUnimplemented      Status = "UNIMPLEMENTED"
	StatusInternal           Status = "INTERNAL"
	StatusUnavailable        Status = "UNAVAILABLE"
)

// Error is an error with a status. Use errors.As to read it. When the generate loop gives up after
// a model answered (ABORTED on the turn limit, INVALID_ARGUMENT on an output that fails its
// schema), Response holds that last response, as Genkit's GenerationResponseError does.
type Error struct {
	Status   Status
	Message  string
	Response *ModelResponse
	cause    error
}

// NewError returns an *Error with the status and a message formatted as fmt.Sprintf does; a %w
// verb wraps a cause, which errors.Is and errors.As find.
func NewError(status Status, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Status: status, Message: err.Error(), cause: errors.Unwrap(err)}
}

// Error implements error.
func (e *Error) Error() string { return string(e.Status) + ": " + e.Message }

// Unwrap returns the wrapped cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// StatusOf returns the status of err: the status of the first *Error in its chain,
// FAILED_PRECONDITION for an interrupted or non-deterministic durable flow, CANCELLED or
// DEADLINE_EXCEEDED for context errors, OK for nil and UNKNOWN otherwise.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	var nd *NonDeterminismError
	switch {
	case errors.Is(err, ErrInterrupted), errors.As(err, &nd):
		return StatusFailedPrecondition
	case errors.Is(err, context.Canceled):
		return StatusCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return StatusDeadlineExceeded
	}
	return StatusUnknown
}

// ErrInterrupted is in the chain of every *InterruptedError: errors.Is(err, ErrInterrupted) tells
// that a durable flow stopped to wait for a person.
var ErrInterrupted = errors.New("interrupted: waiting for a person's decision")

// InterruptedError is what a generate call of a durable run returns when a tool interrupted, and
// what every later generate call and step of the same execution returns. Pass it up: the run
// waits until its reviewers have decided, then the flow runs again and the interrupted call
// continues. ModelResponse.Output returns one for an interrupted response too.
type InterruptedError struct {
	// Response is the interrupted response (FinishReasonInterrupted): its Interrupts are the tool
	// calls that wait.
	Response *ModelResponse
}

// Error implements error, naming the tool calls that wait.
func (e *InterruptedError) Error() string {
	var calls []string
	for _, p := range e.Response.Interrupts() {
		calls = append(calls, fmt.Sprintf("%s (ref %s)", p.ToolRequest.Name, p.ToolRequest.Ref))
	}
	if len(calls) == 0 {
		return ErrInterrupted.Error()
	}
	return ErrInterrupted.Error() + " on " + strings.Join(calls, ", ")
}

// Is makes errors.Is(err, ErrInterrupted) true.
func (e *InterruptedError) Is(target error) bool { return target == ErrInterrupted }

// Interrupts returns the interrupted tool request parts.
func (e *InterruptedError) Interrupts() []*Part { return e.Response.Interrupts() }

// OpKind says what an op of a durable flow is: a generate call or a step.
type OpKind string

// Op kinds.
const (
	OpGenerate OpKind = "generate"
	OpStep     OpKind = "step"
)

// NonDeterminismError is an op of a durable flow (a generate call or a step) that differs from
// what the recorded execution did at that point: the flow's code made other calls, or made them in
// another order, than it did before.
type NonDeterminismError struct {
	// Seq is the op's position among the flow's ops, from 0.
	Seq int
	// Kind and Name are what the flow called; RecordedKind and RecordedName what the recording
	// holds there. Name is a step's; a generate call has none.
	Kind, RecordedKind OpKind
	Name, RecordedName string
}

// Error implements error.
func (e *NonDeterminismError) Error() string {
	return fmt.Sprintf("non-deterministic flow: its op %d is %s, where the recorded execution made %s: "+
		"a durable flow must make the same generate calls and steps in the same order each time it runs "+
		"(put what varies, such as the clock, random numbers or an API call, inside loupe.Run)",
		e.Seq, describeOp(e.Kind, e.Name), describeOp(e.RecordedKind, e.RecordedName))
}

func describeOp(kind OpKind, name string) string {
	if kind == OpStep {
		return fmt.Sprintf("step %q", name)
	}
	return "a generate call"
}
