package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span attribute keys: Genkit's, OTel GenAI semantic conventions, and Loupe's own.
const (
	AttrName    = "genkit:name"
	AttrType    = "genkit:type"
	AttrSubtype = "genkit:metadata:subtype"
	AttrPath    = "genkit:path"
	AttrInput   = "genkit:input"
	AttrOutput  = "genkit:output"
	AttrState   = "genkit:state"
	AttrIsRoot  = "genkit:isRoot"
	AttrRunID   = "loupe.run.id"
	// AttrStepJournaled marks a step (Run) whose result came from the durable flow's journal.
	AttrStepJournaled = "loupe.step.journaled"
	AttrTurnIndex     = "loupe.turn.index"
	AttrGenAIOp       = "gen_ai.operation.name"
	AttrGenAIModel    = "gen_ai.request.model"
	AttrGenAIToolName = "gen_ai.tool.name"
	AttrGenAIToolCall = "gen_ai.tool.call.id"
	AttrGenAIInTok    = "gen_ai.usage.input_tokens"
	AttrGenAIOutTok   = "gen_ai.usage.output_tokens"
	AttrGenAIFinish   = "gen_ai.response.finish_reasons"
	AttrGenAIRespID   = "gen_ai.response.id"
	AttrGenAIRespMdl  = "gen_ai.response.model"
	// AttrProviderRequestID is the provider's id of a model call's HTTP request (ai.ProviderInfo).
	AttrProviderRequestID = "loupe.provider.request_id"
	// AttrResumed is set on a restarted tool's span to the JSON of its resume metadata (true when
	// none was given), as Genkit's recordResumedMetadata sets the span's "resumed" metadata.
	AttrResumed = "genkit:metadata:resumed"
)

// Span states written to genkit:state.
const (
	StateSuccess     = "success"
	StateError       = "error"
	StateInterrupted = "interrupted"
)

// TruncationMarker ends an attribute value cut at the registry's attribute limit; it is followed by
// the original length in bytes and "]".
const TruncationMarker = "…[truncated, total bytes="

type pathKey struct{}

// startSpan starts a Genkit-shaped span. typ is genkit:type ("action", "util"), subtype is
// genkit:metadata:subtype ("flow", "model", "tool", or "").
func (r *Registry) startSpan(ctx context.Context, name, typ, subtype string, extra ...attribute.KeyValue) (context.Context, trace.Span) {
	parent, _ := ctx.Value(pathKey{}).(string)
	seg := "/{" + name + ",t:" + typ
	if subtype != "" {
		seg += ",s:" + subtype
	}
	path := parent + seg + "}"
	var opts []trace.SpanStartOption
	if id := RunID(ctx); id != "" {
		// At start, so that live viewers see a running span's run.
		opts = append(opts, trace.WithAttributes(attribute.String(AttrRunID, id)))
	}
	if parent == "" {
		if links, ok := ctx.Value(spanLinksKey{}).([]trace.Link); ok {
			opts = append(opts, trace.WithLinks(links...))
		}
	}
	var root *rootSpanOptions
	if parent == "" {
		root = takeRootSpan(ctx)
	}
	ctx, span := r.tracer.Load().Start(ctx, name, opts...)
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 6+len(extra))
		attrs = append(attrs,
			attribute.String(AttrName, name),
			attribute.String(AttrType, typ),
			attribute.String(AttrPath, path),
		)
		if subtype != "" {
			attrs = append(attrs, attribute.String(AttrSubtype, subtype))
		}
		if parent == "" {
			attrs = append(attrs, attribute.Bool(AttrIsRoot, true))
		}
		attrs = append(attrs, extra...)
		if root != nil {
			attrs = append(attrs, root.labels...)
		}
		span.SetAttributes(attrs...)
	}
	if root != nil && root.onStart != nil {
		root.onStart(span.SpanContext())
	}
	return context.WithValue(ctx, pathKey{}, path), span
}

// setJSONAttr marshals v into a span attribute, cut at the limit with a marker. It does nothing
// when the span is not recording, so untraced runs never pay for it. A string is encoded as JSON
// like any other value (liftoff becomes "\"liftoff\""), as Genkit's JSON.stringify does, so that
// readers such as the genkit CLI's eval:extractData can parse every genkit:input and genkit:output.
func (r *Registry) setJSONAttr(span trace.Span, key string, v any) {
	if !span.IsRecording() {
		return
	}
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			b = []byte(strconv.Quote("unencodable: " + err.Error()))
		}
		r.setFreshJSON(span, key, b)
		return
	}
	span.SetAttributes(attribute.String(key, r.truncateBytes(b)))
}

// setFreshJSON sets an attribute from JSON bytes that were just built for it and are never
// written again, so the attribute can share them instead of copying (spans hold the whole
// history of every turn; copying it showed up as a third of the engine's allocations).
func (r *Registry) setFreshJSON(span trace.Span, key string, b []byte) {
	if !span.IsRecording() {
		return
	}
	if r.attrLimit > 0 && len(b) > r.attrLimit {
		span.SetAttributes(attribute.String(key, r.truncateBytes(b)))
		return
	}
	span.SetAttributes(attribute.String(key, unsafe.String(unsafe.SliceData(b), len(b))))
}

func (r *Registry) truncateBytes(b []byte) string {
	if r.attrLimit <= 0 || len(b) <= r.attrLimit {
		return string(b)
	}
	return string(b[:r.attrLimit]) + TruncationMarker + strconv.Itoa(len(b)) + "]"
}

// endSpan records the outcome and ends the span. Interrupts are not errors: they end with state
// interrupted and an "interrupt" event carrying the metadata.
func (r *Registry) endSpan(span trace.Span, err error) {
	if span.IsRecording() {
		var ie *InterruptError
		switch {
		case err == nil:
			span.SetAttributes(attribute.String(AttrState, StateSuccess))
		case errors.Is(err, ErrInterrupted):
			// A durable flow stopped by an interrupt is waiting, not failed.
			span.SetAttributes(attribute.String(AttrState, StateInterrupted))
		case asInterrupt(err, &ie):
			span.SetAttributes(attribute.String(AttrState, StateInterrupted))
			md, _ := json.Marshal(ie.Metadata)
			span.AddEvent("interrupt", trace.WithAttributes(attribute.String("interrupt.metadata", r.truncateBytes(md))))
		default:
			span.SetAttributes(attribute.String(AttrState, StateError))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
