package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/loupe-dev/loupe/internal/store"
)

// DecodeOTLPLogs parses an OTLP/HTTP ExportLogsServiceRequest, protobuf or JSON as contentType
// says, with the collector's own decoder, and returns the records it accepted and how many it
// rejected (a time out of range) and why. A record with no time takes its observed time, and one
// with neither the time it arrived.
func DecodeOTLPLogs(body []byte, contentType string, now time.Time) (logs []store.Log, rejected int64, reason string, err error) {
	req := plogotlp.NewExportRequest()
	switch contentType {
	case ContentTypeProtobuf:
		if err := req.UnmarshalProto(body); err != nil {
			return nil, 0, "", inputErrorf("malformed OTLP protobuf: %s", printable(err.Error()))
		}
	case ContentTypeJSON:
		if err := req.UnmarshalJSON(body); err != nil {
			return nil, 0, "", inputErrorf("malformed OTLP JSON: %s", printable(err.Error()))
		}
	default:
		return nil, 0, "", inputErrorf("unsupported content type %q (want %s or %s)", contentType, ContentTypeProtobuf, ContentTypeJSON)
	}
	logs, rejected, reason = FromOTLPLogs(req.Logs(), now)
	return logs, rejected, reason, nil
}

// FromOTLPLogs converts pdata logs to stored records (see DecodeOTLPLogs).
func FromOTLPLogs(ld plog.Logs, now time.Time) (logs []store.Log, rejected int64, reason string) {
	logs = make([]store.Log, 0, ld.LogRecordCount())
	var reasons []string
	var aw attrsWriter
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		resource := aw.object(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			recs := sl.LogRecords()
			for k := 0; k < recs.Len(); k++ {
				r := recs.At(k)
				ts, observed := uint64(r.Timestamp()), uint64(r.ObservedTimestamp())
				if ts > math.MaxInt64 || observed > math.MaxInt64 {
					if len(reasons) < maxRejectReasons {
						reasons = append(reasons, fmt.Sprintf("log record %d: time out of range", len(logs)+int(rejected)))
					}
					rejected++
					continue
				}
				l := store.Log{
					SeverityNumber: int16(r.SeverityNumber()),
					SeverityText:   store.CleanText(r.SeverityText()),
					Body:           mustJSON(r.Body().AsRaw()),
					Attributes:     aw.object(r.Attributes()),
					Resource:       resource,
					Scope:          store.CleanText(sl.Scope().Name()),
				}
				switch {
				case ts != 0:
					l.Time = time.Unix(0, int64(ts)).UTC()
				case observed != 0:
					l.Time = time.Unix(0, int64(observed)).UTC()
				default:
					l.Time = now.UTC()
				}
				if observed != 0 {
					o := time.Unix(0, int64(observed)).UTC()
					l.ObservedTime = &o
				}
				if tid := r.TraceID(); !tid.IsEmpty() {
					l.TraceID = hexID(tid[:])
					if sid := r.SpanID(); !sid.IsEmpty() {
						l.SpanID = hexID(sid[:])
					}
				}
				logs = append(logs, l)
			}
		}
	}
	return logs, rejected, rejectReason(rejected, reasons)
}

// IngestOTLPLogs stores an OTLP/HTTP logs export request and returns the response body to send,
// in the request's content type, with a partial success when some records were rejected.
func (s *Service) IngestOTLPLogs(ctx context.Context, body []byte, contentType string) ([]byte, error) {
	logs, rejected, reason, err := DecodeOTLPLogs(body, contentType, time.Now())
	if err != nil {
		return nil, err
	}
	if err := s.store.LogInsert(ctx, logs); err != nil {
		return nil, err
	}
	resp := plogotlp.NewExportResponse()
	if rejected > 0 {
		resp.PartialSuccess().SetRejectedLogRecords(rejected)
		resp.PartialSuccess().SetErrorMessage(reason)
	}
	if contentType == ContentTypeJSON {
		return resp.MarshalJSON()
	}
	return resp.MarshalProto()
}

// Logs lists stored log records: of a trace, of one span of it, or the newest of all.
func (s *Service) Logs(ctx context.Context, p store.LogListParams) ([]store.Log, error) {
	if p.TraceID != "" {
		id, err := ParseTraceID(p.TraceID)
		if err != nil {
			return nil, err
		}
		p.TraceID = id
	}
	if p.SpanID != "" {
		id, err := ParseSpanID(p.SpanID)
		if err != nil {
			return nil, err
		}
		p.SpanID = id
	}
	return s.reads.LogList(ctx, p)
}

// GenkitLog is one record in the answer of Genkit's log lists (GET /api/logs and the trace and
// span variants): the OTLP record's fields, times in milliseconds as Genkit's spans have them.
type GenkitLog struct {
	// LogID is the record's id, which Genkit's LogRecordData requires (the genkit CLI's log:list
	// refuses a list without it).
	LogID          string          `json:"logId"`
	Timestamp      float64         `json:"timestamp"`
	SeverityNumber int16           `json:"severityNumber"`
	SeverityText   string          `json:"severityText"`
	Body           json.RawMessage `json:"body"`
	Attributes     json.RawMessage `json:"attributes"`
	Resource       json.RawMessage `json:"resource"`
	TraceID        string          `json:"traceId,omitempty"`
	SpanID         string          `json:"spanId,omitempty"`
	// InstrumentationLibrary is the record's OTel scope, as Genkit's server names it.
	InstrumentationLibrary *GenkitInstrumentationLibrary `json:"instrumentationLibrary,omitempty"`
}

// GenkitInstrumentationLibrary is Genkit's name for an OTel instrumentation scope.
type GenkitInstrumentationLibrary struct {
	Name string `json:"name"`
}

// GenkitLogsOf converts stored records to Genkit's log list entries.
func GenkitLogsOf(logs []store.Log) []GenkitLog {
	out := make([]GenkitLog, len(logs))
	for i, l := range logs {
		out[i] = GenkitLog{LogID: strconv.FormatInt(l.ID, 10), Timestamp: float64(l.Time.UnixNano()) / 1e6,
			SeverityNumber: l.SeverityNumber, SeverityText: l.SeverityText,
			Body: l.Body, Attributes: l.Attributes, Resource: l.Resource, TraceID: l.TraceID, SpanID: l.SpanID}
		if l.Scope != "" {
			out[i].InstrumentationLibrary = &GenkitInstrumentationLibrary{Name: l.Scope}
		}
	}
	return out
}
