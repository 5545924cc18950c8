package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/store"
)

// TraceData is Genkit's trace shape (genkit-tools/common/src/types/trace.ts), as its telemetry API
// takes and returns it.
type TraceData struct {
	TraceID     string               `json:"traceId"`
	DisplayName *string              `json:"displayName,omitempty"`
	StartTime   *Millis              `json:"startTime,omitempty"`
	EndTime     *Millis              `json:"endTime,omitempty"`
	Spans       map[string]*SpanData `json:"spans"`
}

// SpanData is Genkit's span shape.
type SpanData struct {
	SpanID                  string                 `json:"spanId"`
	TraceID                 string                 `json:"traceId"`
	ParentSpanID            string                 `json:"parentSpanId,omitempty"`
	StartTime               Millis                 `json:"startTime"`
	EndTime                 Millis                 `json:"endTime"`
	Attributes              json.RawMessage        `json:"attributes"`
	DisplayName             string                 `json:"displayName"`
	Links                   []GenkitLink           `json:"links"`
	InstrumentationLibrary  InstrumentationLibrary `json:"instrumentationLibrary"`
	SpanKind                string                 `json:"spanKind"`
	SameProcessAsParentSpan *BoolValue             `json:"sameProcessAsParentSpan,omitempty"`
	Status                  *SpanStatus            `json:"status,omitempty"`
	TimeEvents              *TimeEvents            `json:"timeEvents,omitempty"`
	Truncated               bool                   `json:"truncated,omitempty"`
}

// InstrumentationLibrary is Genkit's name for the instrumentation scope.
type InstrumentationLibrary struct {
	Name      string `json:"name"`
	Version   string `json:"version,omitempty"`
	SchemaURL string `json:"schemaUrl,omitempty"`
}

// BoolValue is Genkit's {"value": bool} wrapper.
type BoolValue struct {
	Value bool `json:"value"`
}

// SpanStatus is a span's status. Genkit JS numbers codes as OTLP does (2 is an error); Genkit Go
// uses Go's numbering (1 is an error).
type SpanStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
}

// TimeEvents holds a span's events.
type TimeEvents struct {
	TimeEvent []TimeEvent `json:"timeEvent"`
}

// TimeEvent is one span event.
type TimeEvent struct {
	Time       Millis `json:"time"`
	Annotation struct {
		Attributes  json.RawMessage `json:"attributes,omitempty"`
		Description string          `json:"description"`
	} `json:"annotation"`
}

// GenkitLink is one span link.
type GenkitLink struct {
	Context *struct {
		TraceID    string `json:"traceId"`
		SpanID     string `json:"spanId"`
		IsRemote   bool   `json:"isRemote,omitempty"`
		TraceFlags int    `json:"traceFlags"`
	} `json:"context,omitempty"`
	Attributes             json.RawMessage `json:"attributes,omitempty"`
	DroppedAttributesCount int             `json:"droppedAttributesCount,omitempty"`
}

// Millis is a time that Genkit writes as fractional milliseconds since the epoch, held as Unix
// nanoseconds. It is parsed from the JSON text exactly, never through a float64, so the
// sub-microsecond digits that Genkit Go sends survive the round trip.
type Millis int64

// UnmarshalJSON parses a JSON number of milliseconds.
func (m *Millis) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = 0
		return nil
	}
	n, err := parseMillis(string(b))
	if err != nil {
		return err
	}
	*m = Millis(n)
	return nil
}

// MarshalJSON writes milliseconds with up to six decimals, losing nothing.
func (m Millis) MarshalJSON() ([]byte, error) {
	return appendMillis(nil, int64(m)), nil
}

func appendMillis(b []byte, nanos int64) []byte {
	if nanos < 0 {
		b = append(b, '-')
		nanos = -nanos
	}
	b = strconv.AppendInt(b, nanos/1e6, 10)
	frac := nanos % 1e6
	if frac == 0 {
		return b
	}
	digits := []byte(fmt.Sprintf("%06d", frac))
	digits = bytes.TrimRight(digits, "0")
	b = append(b, '.')
	return append(b, digits...)
}

// parseMillis converts a decimal number of milliseconds to nanoseconds, exactly when it has at
// most six decimals, and rounded beyond.
func parseMillis(s string) (int64, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if !strings.ContainsAny(s, "eE+-") && len(whole) > 0 && len(whole) <= 13 && len(frac) <= 6 && (!hasDot || len(frac) > 0) {
		w, err1 := strconv.ParseInt(whole, 10, 64)
		f, err2 := int64(0), error(nil)
		if frac != "" {
			f, err2 = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		}
		if err1 == nil && err2 == nil && w < math.MaxInt64/1_000_000 {
			return w*1e6 + f, nil
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("%q is not a number of milliseconds", s)
	}
	r.Mul(r, big.NewRat(1e6, 1))
	f, _ := r.Float64()
	if math.IsInf(f, 0) || math.IsNaN(f) || f >= math.MaxInt64 || f <= math.MinInt64 {
		return 0, fmt.Errorf("%q milliseconds is out of range", s)
	}
	num, den := r.Num(), r.Denom()
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if new(big.Int).Mul(rem, big.NewInt(2)).CmpAbs(den) >= 0 {
		q.Add(q, big.NewInt(int64(num.Sign())))
	}
	return q.Int64(), nil
}

// genkitKinds maps Genkit's span kind names to OTLP's numbers.
var genkitKinds = map[string]int16{"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}

var genkitKindNames = map[int16]string{0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}

// decodeOptions decode a TraceData body with JSON v2 (github.com/go-json-experiment/json), which
// validates as it decodes in one pass instead of validating the whole body first and then
// scanning it again, about twice as fast as encoding/json on Genkit's bodies, most of whose bytes
// are attribute objects kept raw. It keeps encoding/json's leniency: duplicate member names, and
// invalid UTF-8 and lone surrogate escapes in strings (which Genkit JS sends when it truncates a
// string mid-pair), become U+FFFD when decoded and are replaced in raw values (store.CleanJSON).
var decodeOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// DecodeGenkit parses one POST /api/traces body into spans, validating ids and span times. It
// takes Genkit's quirks as they are: a body per span with the root last, trace-level displayName
// "" and times 0 on non-root bodies (the trace summary is derived from the root span instead),
// endTime 0 on a span still running (Genkit JS's realtime start), and Genkit Go's status numbering
// (see genkitStatus). What PostgreSQL cannot store (U+0000, lone surrogates, invalid UTF-8, which
// models print and Genkit JS makes when it cuts a string mid-pair) becomes U+FFFD rather than an
// error: one such character must not cost a batch of spans.
func DecodeGenkit(body []byte) ([]store.Span, error) {
	return decodeGenkit(body, true)
}

// decodeGenkit is DecodeGenkit, trying decodeTraceDataFast first when fast is set.
func decodeGenkit(body []byte, fast bool) ([]store.Span, error) {
	var td TraceData
	if !fast || !decodeTraceDataFast(body, &td) {
		// Unmarshal, not a Decoder: the body is already in memory. Unmarshal also refuses data
		// after the object. See decodeOptions for why JSON v2.
		td = TraceData{}
		if err := jsonv2.Unmarshal(body, &td, decodeOptions); err != nil {
			return nil, inputErrorf("malformed TraceData JSON: %s", printable(err.Error()))
		}
	}
	traceID := normalizeID(td.TraceID)
	if !ValidTraceID(traceID) {
		return nil, inputErrorf("traceId %q %s", td.TraceID, badID(traceID, 32, "trace"))
	}
	if td.Spans == nil {
		return nil, inputErrorf("TraceData %s has no spans object", traceID)
	}
	keys := make([]string, 0, len(td.Spans))
	for k := range td.Spans {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	spans := make([]store.Span, 0, len(td.Spans))
	for _, key := range keys {
		sd := td.Spans[key]
		if sd == nil {
			return nil, inputErrorf("spans[%q] is null", key)
		}
		sp, err := genkitSpan(traceID, key, sd)
		if err != nil {
			return nil, err
		}
		spans = append(spans, sp)
	}
	return spans, nil
}

func genkitSpan(traceID, key string, sd *SpanData) (store.Span, error) {
	spanID := normalizeID(sd.SpanID)
	if spanID == "" {
		spanID = normalizeID(key)
		if !ValidSpanID(spanID) {
			return store.Span{}, inputErrorf("spans[%q] has no spanId and its key %s", key, badID(spanID, 16, "span"))
		}
	}
	if !ValidSpanID(spanID) {
		return store.Span{}, inputErrorf("spans[%q].spanId %q %s", key, sd.SpanID, badID(spanID, 16, "span"))
	}
	if sd.TraceID != "" && normalizeID(sd.TraceID) != traceID {
		return store.Span{}, inputErrorf("spans[%q].traceId %q differs from the TraceData's traceId %s", key, sd.TraceID, traceID)
	}
	if err := checkGenkitTimes(key, sd.StartTime, sd.EndTime); err != nil {
		return store.Span{}, err
	}
	sp := store.Span{
		TraceID:      traceID,
		SpanID:       spanID,
		Name:         sd.DisplayName,
		Kind:         genkitKinds[strings.ToUpper(sd.SpanKind)],
		StartTime:    int64(sd.StartTime),
		EndTime:      int64(sd.EndTime),
		Scope:        sd.InstrumentationLibrary.Name,
		ScopeVersion: sd.InstrumentationLibrary.Version,
		Source:       store.SpanSourceGenkit,
		Resource:     json.RawMessage("{}"),
	}
	if sd.ParentSpanID != "" {
		parent := normalizeID(sd.ParentSpanID)
		if !ValidSpanID(parent) {
			return store.Span{}, inputErrorf("spans[%q].parentSpanId %q %s", key, sd.ParentSpanID, badID(parent, 16, "span"))
		}
		sp.ParentSpanID = &parent
	}
	attrs := bytes.TrimSpace(sd.Attributes)
	if len(attrs) == 0 || string(attrs) == "null" {
		attrs = []byte("{}")
	} else if attrs[0] != '{' {
		return store.Span{}, inputErrorf("spans[%q].attributes is not a JSON object", key)
	}
	sp.Attributes = store.CleanJSON(attrs)
	// The body has been validated whole, so the attributes are a valid object: two of its members
	// are picked out without decoding the rest, which is most of a span's bytes.
	stateRaw, runRaw := objectMembers(attrs, "genkit:state", AttrRunID)
	state := jsonString(stateRaw)
	if id, err := uuid.Parse(jsonString(runRaw)); err == nil {
		sp.RunID = &id
	}
	if sd.Status != nil {
		if c := sd.Status.Code; c < 0 || c > 2 {
			return store.Span{}, inputErrorf("spans[%q].status.code %d is not 0, 1 or 2 (unset, and ok and error in either SDK's numbering)", key, c)
		}
		sp.StatusMessage = sd.Status.Message
		sp.StatusCode = genkitStatus(sd.Status.Code, sd.Status.Message, state)
	} else {
		sp.StatusCode = genkitStatus(0, "", state)
	}
	if sd.TimeEvents != nil && len(sd.TimeEvents.TimeEvent) > 0 {
		events := make([]storedEvent, len(sd.TimeEvents.TimeEvent))
		for i, te := range sd.TimeEvents.TimeEvent {
			events[i] = storedEvent{TimeUnixNano: int64(te.Time), Name: te.Annotation.Description, Attributes: objectOr(te.Annotation.Attributes)}
		}
		b, err := json.Marshal(events)
		if err != nil {
			return store.Span{}, inputErrorf("spans[%q].timeEvents: %v", key, err)
		}
		sp.Events = store.CleanJSON(b)
	}
	if len(sd.Links) > 0 {
		links := make([]storedLink, 0, len(sd.Links))
		for _, l := range sd.Links {
			if l.Context == nil {
				continue
			}
			links = append(links, storedLink{TraceID: normalizeID(l.Context.TraceID), SpanID: normalizeID(l.Context.SpanID),
				Attributes: objectOr(l.Attributes), Flags: uint32(l.Context.TraceFlags)})
		}
		b, err := json.Marshal(links)
		if err != nil {
			return store.Span{}, inputErrorf("spans[%q].links: %v", key, err)
		}
		sp.Links = store.CleanJSON(b)
	}
	if sp.StatusCode == store.StatusError {
		markInterrupt(&sp)
	}
	cleanSpanText(&sp)
	return sp, nil
}

// badID says why a normalized id that ValidTraceID or ValidSpanID refused is invalid: all zeros
// (what OTel calls an invalid id), or not n hex digits. kind is "trace" or "span".
func badID(id string, n int, kind string) string {
	if len(id) == n && strings.Trim(id, "0") == "" {
		return "is all zeros, an invalid " + kind + " id"
	}
	return fmt.Sprintf("is not %d hex digits", n)
}

// checkGenkitTimes validates a span's times: startTime must be positive, and endTime either 0
// (the span is still running) or no earlier than startTime. Only the trace-level times may be 0.
func checkGenkitTimes(key string, start, end Millis) error {
	switch {
	case start < 0:
		return inputErrorf("spans[%q].startTime %s is negative", key, appendMillis(nil, int64(start)))
	case start == 0:
		return inputErrorf("spans[%q].startTime is 0 or missing", key)
	case end < 0:
		return inputErrorf("spans[%q].endTime %s is negative", key, appendMillis(nil, int64(end)))
	case end != 0 && end < start:
		return inputErrorf("spans[%q].endTime %s is before its startTime %s", key,
			appendMillis(nil, int64(end)), appendMillis(nil, int64(start)))
	}
	return nil
}

// genkitStatus maps a Genkit status to OTLP's numbering. genkit:state is the reliable signal:
// "error" is an error and "success" is ok, whatever the code (both SDKs send 0 for a span that
// succeeded); "interrupted" is unset unless the code says ok. Without a state (a span
// still running, or a non-Genkit span), code 2 is an error (JS, OTLP), and so is code 1 with a
// message (Go's error code, whose message Genkit Go always fills); a bare 1 is JS's ok.
func genkitStatus(code int, message, state string) int16 {
	switch state {
	case "error":
		return store.StatusError
	case "success":
		return store.StatusOK
	case "interrupted":
		if code == 0 {
			return store.StatusUnset
		}
		return store.StatusOK
	}
	switch {
	case code == 2, code == 1 && message != "":
		return store.StatusError
	case code == 1:
		return store.StatusOK
	}
	return store.StatusUnset
}

// objectMembers returns the raw values of members a and b of obj, a valid JSON object, the last
// one when a name repeats (as decoding into a map would), or nil when absent. It skips every
// other value without decoding it.
func objectMembers(obj []byte, a, b string) (va, vb json.RawMessage) {
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		end := skipValue(obj, i)
		name := obj[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var unquoted string
			_ = json.Unmarshal(obj[i:end], &unquoted)
			name = []byte(unquoted)
		}
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // the colon
		end = skipValue(obj, i)
		// Compared as string(name) in place, which does not allocate (a string variable would
		// escape through the Unmarshal above, costing an allocation per member).
		if string(name) == a {
			va = obj[i:end]
		} else if string(name) == b {
			vb = obj[i:end]
		}
		i = skipSpace(obj, end)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return va, vb
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value that starts at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i)
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// stringEnd returns the index of the quote that closes the JSON string opening at b[i], or len(b)
// (see store.ClosingQuote).
func stringEnd(b []byte, i int) int {
	if j := store.ClosingQuote(b, i); j >= 0 {
		return j
	}
	return len(b)
}

func jsonString(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func objectOr(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return json.RawMessage("{}")
	}
	return raw
}

// storedEvent and storedLink are the JSON shapes of spans.events and spans.links.
type storedEvent struct {
	TimeUnixNano int64           `json:"time_unix_nano"`
	Name         string          `json:"name"`
	Attributes   json.RawMessage `json:"attributes"`
}

type storedLink struct {
	TraceID    string          `json:"trace_id"`
	SpanID     string          `json:"span_id"`
	TraceState string          `json:"trace_state,omitempty"`
	Attributes json.RawMessage `json:"attributes"`
	Flags      uint32          `json:"flags,omitempty"`
}

// ToGenkit renders stored spans as Genkit's TraceData. Status codes come out in OTLP's numbering,
// which is also Genkit JS's and what Genkit's Dev UI reads.
func ToGenkit(tr *store.Trace, spans []store.Span) *TraceData {
	td := &TraceData{TraceID: tr.TraceID, Spans: make(map[string]*SpanData, len(spans))}
	name := tr.DisplayName
	start, end := Millis(tr.StartTime), Millis(tr.EndTime)
	td.DisplayName, td.StartTime, td.EndTime = &name, &start, &end
	for i := range spans {
		td.Spans[spans[i].SpanID] = toSpanData(&spans[i], false)
	}
	return td
}

func toSpanData(sp *store.Span, truncate bool) *SpanData {
	sd := &SpanData{
		SpanID:                  sp.SpanID,
		TraceID:                 sp.TraceID,
		StartTime:               Millis(sp.StartTime),
		EndTime:                 Millis(sp.EndTime),
		Attributes:              objectOr(sp.Attributes),
		DisplayName:             sp.Name,
		InstrumentationLibrary:  InstrumentationLibrary{Name: sp.Scope, Version: sp.ScopeVersion},
		SpanKind:                genkitKindNames[sp.Kind],
		SameProcessAsParentSpan: &BoolValue{Value: true},
		Status:                  &SpanStatus{Code: genkitStatusCode(sp.StatusCode), Message: sp.StatusMessage},
		// As Genkit's own telemetry server returns what the SDK sent: links [] and
		// timeEvents {timeEvent: []} when there are none.
		TimeEvents: &TimeEvents{TimeEvent: []TimeEvent{}},
		Links:      []GenkitLink{},
	}
	if sp.ParentSpanID != nil {
		sd.ParentSpanID = *sp.ParentSpanID
	}
	if truncate {
		sd.Attributes = truncateAttributes(sd.Attributes, 1000)
	}
	if len(sp.Events) > 2 {
		var events []storedEvent
		if json.Unmarshal(sp.Events, &events) == nil {
			for _, e := range events {
				te := TimeEvent{Time: Millis(e.TimeUnixNano)}
				te.Annotation.Attributes = objectOr(e.Attributes)
				te.Annotation.Description = e.Name
				sd.TimeEvents.TimeEvent = append(sd.TimeEvents.TimeEvent, te)
			}
		}
	}
	if len(sp.Links) > 2 {
		var links []storedLink
		if json.Unmarshal(sp.Links, &links) == nil {
			for _, l := range links {
				gl := GenkitLink{Attributes: objectOr(l.Attributes)}
				gl.Context = &struct {
					TraceID    string `json:"traceId"`
					SpanID     string `json:"spanId"`
					IsRemote   bool   `json:"isRemote,omitempty"`
					TraceFlags int    `json:"traceFlags"`
				}{TraceID: l.TraceID, SpanID: l.SpanID, TraceFlags: int(l.Flags)}
				sd.Links = append(sd.Links, gl)
			}
		}
	}
	return sd
}

// genkitStatusCode is a stored status code as Genkit's telemetry API returns it: a successful
// span is 0, as Genkit JS sends it (OTel's UNSET) and Genkit's own server keeps it, not OTel's OK
// (1), which the Dev UI and the genkit CLI do not expect; an error is 2.
func genkitStatusCode(c int16) int {
	if c == store.StatusOK {
		return 0
	}
	return int(c)
}

// truncateAttributes cuts string values longer than n characters, with "...", as Genkit's list
// does so that a page of traces stays small.
func truncateAttributes(raw json.RawMessage, n int) json.RawMessage {
	if len(raw) <= n {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	changed := false
	for k, v := range m {
		if len(v) <= n || v[0] != '"' {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			continue
		}
		if cut, ok := store.TruncateRunes(s, n); ok {
			m[k], _ = json.Marshal(cut + "...")
			changed = true
		}
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// GenkitListResponse is GET /api/traces's answer.
type GenkitListResponse struct {
	Traces            []*TraceData `json:"traces"`
	ContinuationToken string       `json:"continuationToken,omitempty"`
}

// ParseGenkitFilter parses GET /api/traces's filter parameter: {"eq":{…},"neq":{…},"gt":{…},
// "gte":{…},"lt":{…},"lte":{…},"contains":{…}}, keyed by id, name, type, status, start, end (in
// milliseconds), source, or any root-span attribute such as genkitx:….
func ParseGenkitFilter(s string) ([]store.TraceFilter, error) {
	if s == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var raw map[string]map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, inputErrorf("filter is not a JSON object of operators: %s", printable(err.Error()))
	}
	if err := store.CheckJSON("filter", json.RawMessage(s)); err != nil {
		// A client's query, unlike a span, is refused: a replaced character would match nothing.
		return nil, inputErrorf("%v", err)
	}
	ops := make([]string, 0, len(raw))
	for op := range raw {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var filters []store.TraceFilter
	for _, op := range ops {
		switch op {
		case store.FilterEq, store.FilterNeq, store.FilterGt, store.FilterGte, store.FilterLt, store.FilterLte, store.FilterContains:
		default:
			return nil, inputErrorf("filter operator %q is not one of eq, neq, gt, gte, lt, lte, contains", op)
		}
		fields := make([]string, 0, len(raw[op]))
		for f := range raw[op] {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, field := range fields {
			v, err := filterValue(field, raw[op][field])
			if err != nil {
				return nil, err
			}
			filters = append(filters, store.TraceFilter{Field: field, Op: op, Value: v})
		}
	}
	return filters, nil
}

// filterValue converts a JSON filter value; start and end are milliseconds, converted to nanos.
func filterValue(field string, v any) (any, error) {
	timeField := field == store.TraceFieldStart || field == store.TraceFieldEnd
	switch x := v.(type) {
	case json.Number:
		if timeField {
			n, err := parseMillis(x.String())
			if err != nil {
				return nil, inputErrorf("filter %s: %v", field, err)
			}
			return n, nil
		}
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, inputErrorf("filter %s: %v", field, err)
		}
		return f, nil
	case string:
		if timeField || field == store.TraceFieldStatus {
			return nil, inputErrorf("filter %s: want a number, not %q", field, x)
		}
		return x, nil
	case bool:
		return x, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := filterValue(field, e)
			if err != nil {
				return nil, err
			}
			if _, nested := c.([]any); nested {
				return nil, inputErrorf("filter %s: nested lists are not allowed", field)
			}
			out[i] = c
		}
		return out, nil
	}
	return nil, inputErrorf("filter %s: unsupported value %v", field, v)
}
