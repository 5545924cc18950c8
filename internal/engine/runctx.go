package engine

import (
	"context"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
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

type rootSpanKey struct{}

// rootSpanOptions are what WithRootSpan asks of the next root span under a context.
type rootSpanOptions struct {
	labels  []attribute.KeyValue
	onStart func(trace.SpanContext)
	taken   atomic.Bool
}

// WithRootSpan asks that the next root span started under ctx (an action run on its own: a
// flow's, a tool's, a generate's outside a flow) carry labels as extra attributes and, once it has
// started, be reported to onStart (which may be nil) with its trace and span ids. This is Genkit's
// telemetryLabels and onTraceStart: its reflection server labels a batch run's root span, and
// sends the trace id in a response header before the action's first chunk.
func WithRootSpan(ctx context.Context, labels map[string]string, onStart func(trace.SpanContext)) context.Context {
	o := &rootSpanOptions{onStart: onStart}
	for k, v := range labels {
		o.labels = append(o.labels, attribute.String(k, v))
	}
	return context.WithValue(ctx, rootSpanKey{}, o)
}

// takeRootSpan returns the options of WithRootSpan the first time it is called under ctx.
func takeRootSpan(ctx context.Context) *rootSpanOptions {
	o, ok := ctx.Value(rootSpanKey{}).(*rootSpanOptions)
	if !ok || !o.taken.CompareAndSwap(false, true) {
		return nil
	}
	return o
}

type rootSpanIDsKey struct{}

type rootSpanIDs struct {
	traceID trace.TraceID
	spanID  trace.SpanID
	taken   atomic.Bool
}

// WithRootSpanIDs asks that the next root span started under ctx (a flow's) get these ids. A
// durable runner gives every execution of a run the same root span this way, so that a run taken
// over after a crash continues its first execution's trace, under the same root, instead of
// starting another. A TracerProvider honors it through an IDGenerator that calls RootSpanIDs
// (internal/trace's does); others ignore it.
func WithRootSpanIDs(ctx context.Context, traceID trace.TraceID, spanID trace.SpanID) context.Context {
	return context.WithValue(ctx, rootSpanIDsKey{}, &rootSpanIDs{traceID: traceID, spanID: spanID})
}

// RootSpanIDs returns the ids WithRootSpanIDs asked for, the first time it is called under ctx.
func RootSpanIDs(ctx context.Context) (trace.TraceID, trace.SpanID, bool) {
	ids, ok := ctx.Value(rootSpanIDsKey{}).(*rootSpanIDs)
	if !ok || !ids.traceID.IsValid() || !ids.spanID.IsValid() || !ids.taken.CompareAndSwap(false, true) {
		return trace.TraceID{}, trace.SpanID{}, false
	}
	return ids.traceID, ids.spanID, true
}

type actionContextKey struct{}

// WithActionContext returns a context carrying an action context: what the caller of an action
// says about itself (auth above all), as Genkit's runAction takes it in "context". A durable run
// carries the one it was started with on every execution.
func WithActionContext(ctx context.Context, actx map[string]any) context.Context {
	return context.WithValue(ctx, actionContextKey{}, actx)
}

// ActionContextFrom returns the action context carried by ctx, or nil.
func ActionContextFrom(ctx context.Context) map[string]any {
	m, _ := ctx.Value(actionContextKey{}).(map[string]any)
	return m
}
