package engine

import (
	"context"
	"errors"
	"fmt"
)

// Status is a Genkit (gRPC-style) status code carried by engine errors.
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

// Error is an engine error with a status. Use errors.As to read it. When the generate loop gives up
// after a model answered (ABORTED on maxTurns, INVALID_ARGUMENT on an output schema mismatch),
// Response holds that last response, as Genkit's GenerationResponseError does.
type Error struct {
	Status   Status
	Message  string
	Response *ModelResponse
	cause    error
}

// Errorf returns an *Error with the status and a formatted message; %w wraps a cause.
func Errorf(status Status, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Status: status, Message: err.Error(), cause: errors.Unwrap(err)}
}

// Error implements error.
func (e *Error) Error() string { return string(e.Status) + ": " + e.Message }

// Unwrap returns the wrapped cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// StatusOf returns the status of err: the status of the first *Error in its chain, CANCELLED or
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

// ctxError turns a context error into a CANCELLED or DEADLINE_EXCEEDED *Error.
func ctxError(ctx context.Context, what string) error {
	err := context.Cause(ctx)
	if err == nil {
		err = ctx.Err()
	}
	st := StatusCancelled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		st = StatusDeadlineExceeded
	}
	return Errorf(st, "%s: %w", what, err)
}

// asStatusError keeps *Error values and maps context errors; anything else stays as is.
func asStatusError(ctx context.Context, err error, what string) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctxError(ctx, what)
	}
	return err
}
