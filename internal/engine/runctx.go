package engine

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/trace"
)

type runIDKey struct{}

// WithRunID returns a context carrying a durable run id. Tool idempotency keys and spans use it.
func WithRunID(ctx context.Context, runID string) context.Context {
	return context.WithValue(ctx, runIDKey{}, runID)
}

// RunID returns the run id carried by ctx, or "".
func RunID(ctx context.Context) string {
	s, _ := ctx.Value(runIDKey{}).(string)
	return s
}

// IdempotencyKey returns the key of a tool call: the run id (or else the trace id) of ctx, a colon,
// and the call's ref; in the second and later Generate calls of a durable flow (GenerateIndex), the
// ref is prefixed with "g<index>:", since each call numbers its refs afresh. The same call in the
// same run always gets the same key, so a runner can use it to dedupe side effects across crashes
// and resumes.
func IdempotencyKey(ctx context.Context, ref string) string {
	scope := RunID(ctx)
	if scope == "" {
		if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
			scope = sc.TraceID().String()
		}
	}
	if n := GenerateIndex(ctx); n > 0 {
		return scope + ":g" + strconv.Itoa(n) + ":" + ref
	}
	return scope + ":" + ref
}

type spanLinksKey struct{}

// WithSpanLinks returns a context whose next root span (a flow's, or a generate's called outside a
// flow) starts with links. A durable runner links a resumed execution to the turn that was
// interrupted, so that one run reads as one story across the pause.
func WithSpanLinks(ctx context.Context, links ...trace.Link) context.Context {
	return context.WithValue(ctx, spanLinksKey{}, links)
}
