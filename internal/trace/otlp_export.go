package trace

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loupe-dev/loupe/internal/store"
)

// OTLPJSON is a stored trace as an OTLP ExportTraceServiceRequest in OTLP/JSON (the shape POST
// /v1/traces takes, here or at any OTLP collector), so a trace can be downloaded, and sent again.
func (s *Service) OTLPJSON(ctx context.Context, traceID string) ([]byte, error) {
	traceID, err := ParseTraceID(traceID)
	if err != nil {
		return nil, err
	}
	s.flushStarts(ctx)
	tr, err := s.reads.TraceGet(ctx, traceID)
	if err != nil {
		return nil, err
	}
	spans, err := s.reads.SpansByTrace(ctx, traceID, tr.SpanCount)
	if err != nil {
		return nil, err
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(ToOTLP(spans)).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("trace %s as OTLP JSON: %w", traceID, err)
	}
	return b, nil
}

// ToOTLP converts stored spans back to pdata traces, the inverse of FromOTLP: spans that share a
// resource and an instrumentation scope are grouped under one ResourceSpans and ScopeSpans, in
// the order they first appear. Attribute values come back with their JSON types (a whole number
// as an int, any other number as a double); a value that was bytes was stored as base64 text and
// comes back as that text.
func ToOTLP(spans []store.Span) ptrace.Traces {
	td := ptrace.NewTraces()
	resources := map[string]ptrace.ResourceSpans{}
	scopes := map[[3]string]ptrace.ScopeSpans{}
	for i := range spans {
		sp := &spans[i]
		resKey := string(compactJSON(sp.Resource))
		rs, ok := resources[resKey]
		if !ok {
			rs = td.ResourceSpans().AppendEmpty()
			putAttrs(rs.Resource().Attributes(), sp.Resource)
			resources[resKey] = rs
		}
		scopeKey := [3]string{resKey, sp.Scope, sp.ScopeVersion}
		ss, ok := scopes[scopeKey]
		if !ok {
			ss = rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(sp.Scope)
			ss.Scope().SetVersion(sp.ScopeVersion)
			scopes[scopeKey] = ss
		}
		out := ss.Spans().AppendEmpty()
		out.SetTraceID(pcommon.TraceID(traceIDBytes(sp.TraceID)))
		out.SetSpanID(pcommon.SpanID(spanIDBytes(sp.SpanID)))
		if sp.ParentSpanID != nil && *sp.ParentSpanID != "" {
			out.SetParentSpanID(pcommon.SpanID(spanIDBytes(*sp.ParentSpanID)))
		}
		out.SetName(sp.Name)
		out.SetKind(ptrace.SpanKind(sp.Kind))
		out.SetStartTimestamp(pcommon.Timestamp(max(sp.StartTime, 0)))
		out.SetEndTimestamp(pcommon.Timestamp(max(sp.EndTime, 0)))
		out.Status().SetCode(ptrace.StatusCode(sp.StatusCode))
		out.Status().SetMessage(sp.StatusMessage)
		putAttrs(out.Attributes(), sp.Attributes)
		var events []storedEvent
		if len(sp.Events) > 0 && json.Unmarshal(sp.Events, &events) == nil {
			for _, e := range events {
				ev := out.Events().AppendEmpty()
				ev.SetName(e.Name)
				ev.SetTimestamp(pcommon.Timestamp(max(e.TimeUnixNano, 0)))
				putAttrs(ev.Attributes(), e.Attributes)
			}
		}
		var links []storedLink
		if len(sp.Links) > 0 && json.Unmarshal(sp.Links, &links) == nil {
			for _, l := range links {
				lk := out.Links().AppendEmpty()
				lk.SetTraceID(pcommon.TraceID(traceIDBytes(l.TraceID)))
				lk.SetSpanID(pcommon.SpanID(spanIDBytes(l.SpanID)))
				lk.TraceState().FromRaw(l.TraceState)
				lk.SetFlags(l.Flags)
				putAttrs(lk.Attributes(), l.Attributes)
			}
		}
	}
	return td
}

// traceIDBytes and spanIDBytes decode a stored hex id; an id that is not hex of the right length
// (none is stored so) comes back right-aligned, zero-padded.
func traceIDBytes(id string) (b [16]byte) {
	decodeIDInto(b[:], id)
	return b
}

func spanIDBytes(id string) (b [8]byte) {
	decodeIDInto(b[:], id)
	return b
}

func decodeIDInto(dst []byte, id string) {
	raw, err := hex.DecodeString(strings.TrimSpace(id))
	if err != nil {
		return
	}
	if len(raw) > len(dst) {
		raw = raw[len(raw)-len(dst):]
	}
	copy(dst[len(dst)-len(raw):], raw)
}

// compactJSON is raw without insignificant space, as a grouping key; an empty raw is "{}".
func compactJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("{}")
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// putAttrs fills m from a stored attribute object, its keys sorted so that a download is the
// same each time. Anything but an object leaves m empty.
func putAttrs(m pcommon.Map, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var obj map[string]any
	if d.Decode(&obj) != nil || obj == nil {
		return
	}
	m.EnsureCapacity(len(obj))
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		putValue(m.PutEmpty(k), obj[k])
	}
}

// putValue sets dst to a JSON-decoded value (numbers as json.Number).
func putValue(dst pcommon.Value, v any) {
	switch x := v.(type) {
	case nil:
		// An empty value.
	case string:
		dst.SetStr(x)
	case bool:
		dst.SetBool(x)
	case json.Number:
		if n, err := x.Int64(); err == nil && !strings.ContainsAny(x.String(), ".eE") {
			dst.SetInt(n)
		} else if f, err := x.Float64(); err == nil && !math.IsInf(f, 0) {
			dst.SetDouble(f)
		} else {
			dst.SetStr(x.String())
		}
	case []any:
		s := dst.SetEmptySlice()
		s.EnsureCapacity(len(x))
		for _, e := range x {
			putValue(s.AppendEmpty(), e)
		}
	case map[string]any:
		m := dst.SetEmptyMap()
		m.EnsureCapacity(len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			putValue(m.PutEmpty(k), x[k])
		}
	default:
		dst.SetStr(fmt.Sprint(x))
	}
}
