package trace

import (
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// ResumeLink links a span of a resumed run to the span of the turn that was interrupted, so that
// the explorer shows one run across the pause (Genkit leaves those traces unlinked). traceID and
// spanID are the stored hex ids of the interrupted turn's span. Pass the link when starting the
// resumed run's first span:
//
//	link, err := trace.ResumeLink(run.TraceID, interruptedSpanID)
//	ctx, span := tracer.Start(ctx, "resume", oteltrace.WithLinks(link))
func ResumeLink(traceID, spanID string) (oteltrace.Link, error) {
	sc, err := SpanContextOf(traceID, spanID)
	if err != nil {
		return oteltrace.Link{}, err
	}
	return oteltrace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String(AttrLinkType, LinkTypeResume)}}, nil
}

// WithResumeLink is ResumeLink as a span start option; it adds nothing when the ids are invalid,
// since a missing link must never stop a run.
func WithResumeLink(traceID, spanID string) oteltrace.SpanStartOption {
	link, err := ResumeLink(traceID, spanID)
	if err != nil {
		return oteltrace.WithLinks()
	}
	return oteltrace.WithLinks(link)
}

// SpanContextOf rebuilds a remote, sampled span context from stored hex ids.
func SpanContextOf(traceID, spanID string) (oteltrace.SpanContext, error) {
	tid, err := oteltrace.TraceIDFromHex(traceID)
	if err != nil {
		return oteltrace.SpanContext{}, fmt.Errorf("trace id %q: %w", traceID, err)
	}
	sid, err := oteltrace.SpanIDFromHex(spanID)
	if err != nil {
		return oteltrace.SpanContext{}, fmt.Errorf("span id %q: %w", spanID, err)
	}
	return oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: oteltrace.FlagsSampled, Remote: true}), nil
}
