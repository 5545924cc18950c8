package trace

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/google/uuid"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loupe-dev/loupe/internal/store"
)

// OTLP content types.
const (
	ContentTypeProtobuf = "application/x-protobuf"
	ContentTypeJSON     = "application/json"
)

// DecodeOTLP parses an OTLP/HTTP ExportTraceServiceRequest, protobuf or JSON as contentType says:
// JSON with the collector's own decoder, protobuf straight from the wire to the same spans
// (decodeOTLPProto). It returns the spans it accepted, how many it rejected (an
// empty or all-zero trace or span id, no start time, an end before the start, a time out of
// range) and why, for the partial-success answer (see FromOTLP).
func DecodeOTLP(body []byte, contentType string) (spans []store.Span, rejected int64, reason string, err error) {
	req := ptraceotlp.NewExportRequest()
	switch contentType {
	case ContentTypeProtobuf:
		spans, rejected, reason, err = decodeOTLPProto(body)
		if err != nil {
			return nil, 0, "", inputErrorf("malformed OTLP protobuf: %s", printable(err.Error()))
		}
		return spans, rejected, reason, nil
	case ContentTypeJSON:
		if err := req.UnmarshalJSON(body); err != nil {
			return nil, 0, "", inputErrorf("malformed OTLP JSON: %s", printable(err.Error()))
		}
	default:
		return nil, 0, "", inputErrorf("unsupported content type %q (want %s or %s)", contentType, ContentTypeProtobuf, ContentTypeJSON)
	}
	spans, rejected, reason = fromOTLP(req.Traces(), len(body))
	return spans, rejected, reason, nil
}

// maxRejectReasons is how many rejected spans' reasons a partial-success message lists.
const maxRejectReasons = 3

// FromOTLP converts pdata traces to stored spans. Spans that cannot be stored are counted in
// rejected, and reason says how many and why, for the first few: `2 spans rejected: span "a"
// (00f067aa0ba902b7): start_time_unix_nano is 0 or missing; span "b" ...`, ending "and N more"
// past maxRejectReasons. A span with end time 0 is still running and is kept. Text that
// PostgreSQL cannot store becomes U+FFFD, as in DecodeGenkit.
func FromOTLP(td ptrace.Traces) (spans []store.Span, rejected int64, reason string) {
	return fromOTLP(td, 0)
}

// fromOTLP is FromOTLP with room for about bodySize bytes of attributes made at once (an encoded
// request's size is close to its attributes' JSON).
func fromOTLP(td ptrace.Traces, bodySize int) (spans []store.Span, rejected int64, reason string) {
	spans = make([]store.Span, 0, td.SpanCount())
	var reasons []string
	reject := func(format string, args ...any) {
		if len(reasons) < maxRejectReasons {
			reasons = append(reasons, fmt.Sprintf(format, args...))
		}
		rejected++
	}
	aw := attrsWriter{buf: make([]byte, 0, bodySize+bodySize/4)}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		resource := aw.object(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			scope := ss.Scope()
			list := ss.Spans()
			for k := 0; k < list.Len(); k++ {
				s := list.At(k)
				tid, sid := s.TraceID(), s.SpanID()
				// A missing id decodes as all zeros, protobuf and JSON alike.
				if tid.IsEmpty() {
					reject("span %q: trace id is all zeros or missing", s.Name())
					continue
				}
				if sid.IsEmpty() {
					reject("span %q: span id is all zeros or missing", s.Name())
					continue
				}
				start, end := uint64(s.StartTimestamp()), uint64(s.EndTimestamp())
				switch {
				case start > math.MaxInt64 || end > math.MaxInt64:
					reject("span %q (%s): time out of range", s.Name(), hexID(sid[:]))
					continue
				case start == 0:
					reject("span %q (%s): start_time_unix_nano is 0 or missing", s.Name(), hexID(sid[:]))
					continue
				case end != 0 && end < start:
					reject("span %q (%s): end_time_unix_nano %d is before its start_time_unix_nano %d", s.Name(), hexID(sid[:]), end, start)
					continue
				}
				sp := store.Span{
					TraceID:       hexID(tid[:]),
					SpanID:        hexID(sid[:]),
					Name:          s.Name(),
					Kind:          int16(s.Kind()),
					StartTime:     int64(start),
					EndTime:       int64(end),
					StatusCode:    int16(s.Status().Code()),
					StatusMessage: s.Status().Message(),
					Attributes:    aw.object(s.Attributes()),
					Resource:      resource,
					Scope:         scope.Name(),
					ScopeVersion:  scope.Version(),
					Source:        store.SpanSourceOTLP,
				}
				if p := s.ParentSpanID(); !p.IsEmpty() {
					parent := hexID(p[:])
					sp.ParentSpanID = &parent
				}
				if v, ok := s.Attributes().Get(AttrRunID); ok {
					if id, err := uuid.Parse(v.AsString()); err == nil {
						sp.RunID = &id
					}
				}
				if evs := s.Events(); evs.Len() > 0 {
					events := make([]storedEvent, evs.Len())
					for e := 0; e < evs.Len(); e++ {
						ev := evs.At(e)
						events[e] = storedEvent{TimeUnixNano: int64(min(uint64(ev.Timestamp()), math.MaxInt64)), Name: ev.Name(), Attributes: aw.object(ev.Attributes())}
					}
					sp.Events = mustJSON(events)
				}
				if ls := s.Links(); ls.Len() > 0 {
					links := make([]storedLink, ls.Len())
					for l := 0; l < ls.Len(); l++ {
						lk := ls.At(l)
						ltid, lsid := lk.TraceID(), lk.SpanID()
						links[l] = storedLink{TraceID: hexID(ltid[:]), SpanID: hexID(lsid[:]), TraceState: lk.TraceState().AsRaw(),
							Attributes: aw.object(lk.Attributes()), Flags: lk.Flags()}
					}
					sp.Links = mustJSON(links)
				}
				if sp.StatusCode == store.StatusError {
					markInterrupt(&sp) // a Genkit app exporting OTLP
				}
				cleanSpanText(&sp)
				spans = append(spans, sp)
			}
		}
	}
	return spans, rejected, rejectReason(rejected, reasons)
}

// rejectReason is the partial-success message for rejected spans, of which reasons are the first
// few: the count, the reasons, and how many more were rejected. It is "" when none were.
func rejectReason(rejected int64, reasons []string) string {
	if rejected == 0 {
		return ""
	}
	var b strings.Builder
	if rejected == 1 {
		b.WriteString("1 span rejected: ")
	} else {
		fmt.Fprintf(&b, "%d spans rejected: ", rejected)
	}
	b.WriteString(strings.Join(reasons, "; "))
	if more := rejected - int64(len(reasons)); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	return b.String()
}

// attrsJSON encodes attributes as one JSON object: strings, numbers, booleans, arrays and maps as
// themselves, bytes as base64. It is the reference that attrsWriter, which FromOTLP uses, matches.
func attrsJSON(m pcommon.Map) json.RawMessage {
	if m.Len() == 0 {
		return json.RawMessage("{}")
	}
	return mustJSON(m.AsRaw())
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only NaN and infinities fail; they have no JSON form.
		b, _ = json.Marshal(map[string]string{"loupe.encoding_error": err.Error()})
	}
	return store.CleanJSON(b)
}

// OTLPResponse encodes an ExportTraceServiceResponse in the request's content type, with a
// partial success when spans were rejected.
func OTLPResponse(contentType string, rejected int64, reason string) ([]byte, error) {
	resp := ptraceotlp.NewExportResponse()
	if rejected > 0 {
		resp.PartialSuccess().SetRejectedSpans(rejected)
		resp.PartialSuccess().SetErrorMessage(reason)
	}
	if contentType == ContentTypeJSON {
		return resp.MarshalJSON()
	}
	return resp.MarshalProto()
}
