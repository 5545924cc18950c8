package engine

import (
	"context"
	"errors"
)

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
