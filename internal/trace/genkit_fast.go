package trace

import (
	"bytes"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// decodeTraceDataFast decodes a TraceData body as jsonv2.Unmarshal(body, td, decodeOptions) does,
// without reflection, for the bodies Genkit sends: it reads the tokens itself and fills the
// fields DecodeGenkit uses. It declines (false, td then to be thrown away) whatever it leaves to
// Unmarshal: a member repeated, a null where a value is expected, a string with an escape or
// invalid UTF-8, links or events, a number that is not a plain integer where one is expected, and
// every error, whose message Unmarshal words. FuzzDecodeGenkitFastPath checks that it never
// accepts a body Unmarshal would read otherwise. Under realtime ingest (two POSTs of one span
// each) Unmarshal's reflection cost a sixth of the server's CPU.
func decodeTraceDataFast(body []byte, td *TraceData) bool {
	f := fastDecoder{d: jsontext.NewDecoder(bytes.NewBuffer(body), decodeOptions), seen: new(recentStrings)}
	var (
		seen       uint8
		name       string
		at         Millis
		readName   = func() bool { return f.str(&name) }
		readMillis = func() bool { return f.millis(&at) }
	)
	ok := f.object(func(member []byte) bool {
		switch string(member) {
		case "traceId":
			return f.first(&seen, 1) && f.str(&td.TraceID)
		case "displayName":
			return f.first(&seen, 2) && f.unused(readName)
		case "startTime":
			return f.first(&seen, 4) && f.unused(readMillis)
		case "endTime":
			return f.first(&seen, 8) && f.unused(readMillis)
		case "spans":
			return f.first(&seen, 16) && f.spans(td)
		}
		return f.d.SkipValue() == nil
	})
	if !ok {
		return false
	}
	_, err := f.d.ReadToken()
	return err == io.EOF // nothing after the object
}

type fastDecoder struct {
	d    *jsontext.Decoder
	seen *recentStrings
}

// recentStrings are the last strings a fastDecoder made: a body's spans repeat their trace id,
// kind, scope and often their name, and each span's id is its key.
type recentStrings struct {
	s    [8]string
	next int
}

// of returns raw as a string, one of the recent ones when it is equal to one.
func (r *recentStrings) of(raw []byte) string {
	for _, s := range r.s {
		if s == string(raw) {
			return s
		}
	}
	s := string(raw)
	r.s[r.next] = s
	r.next = (r.next + 1) % len(r.s)
	return s
}

// open reads the start of an object or array ('{' or '[').
func (f fastDecoder) open(kind jsontext.Kind) bool {
	if f.d.PeekKind() != kind {
		return false
	}
	tok, err := f.d.ReadToken()
	return err == nil && tok.Kind() == kind
}

// close reads the end of an object or array ('}' or ']').
func (f fastDecoder) close(kind jsontext.Kind) bool {
	tok, err := f.d.ReadToken()
	return err == nil && tok.Kind() == kind
}

// object reads an object, handing each member's name to member, which reads its value; it
// declines when member does, and on a name with an escape.
func (f fastDecoder) object(member func(name []byte) bool) bool {
	if !f.open('{') {
		return false
	}
	for f.d.PeekKind() == '"' {
		name, ok := f.name()
		if !ok || !member(name) {
			return false
		}
	}
	return f.close('}')
}

// name reads a member's name, declining one with an escape (which may spell a field's name). It
// is valid until the next read; callers compare it without making a string of it.
func (f fastDecoder) name() ([]byte, bool) {
	v, err := f.d.ReadValue()
	if err != nil || len(v) < 2 || bytes.IndexByte(v, '\\') >= 0 {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// first marks bit in seen, declining a member seen before.
func (fastDecoder) first(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// value reads a value of kind ('"', '0', 't', 'f'), valid until the next read.
func (f fastDecoder) value(kind jsontext.Kind) (jsontext.Value, bool) {
	if f.d.PeekKind() != kind {
		return nil, false
	}
	v, err := f.d.ReadValue()
	return v, err == nil
}

// str reads a string without escapes or invalid UTF-8 into dst.
func (f fastDecoder) str(dst *string) bool {
	v, ok := f.value('"')
	if !ok {
		return false
	}
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return false
	}
	*dst = f.seen.of(raw)
	return true
}

// unused reads a value DecodeGenkit does not use: null, or what read takes.
func (f fastDecoder) unused(read func() bool) bool {
	if f.d.PeekKind() == 'n' {
		return f.d.SkipValue() == nil
	}
	return read()
}

// millis reads a number of milliseconds into dst.
func (f fastDecoder) millis(dst *Millis) bool {
	v, ok := f.value('0')
	if !ok {
		return false
	}
	n, err := parseMillis(bytesView(v)) // not kept
	*dst = Millis(n)
	return err == nil
}

// integer reads a JSON integer without fraction or exponent into dst.
func (f fastDecoder) integer(dst *int) bool {
	v, ok := f.value('0')
	if !ok || bytes.ContainsAny(v, ".eE") {
		return false
	}
	n, err := strconv.Atoi(bytesView(v))
	*dst = n
	return err == nil
}

// boolean reads true or false into dst.
func (f fastDecoder) boolean(dst *bool) bool {
	switch f.d.PeekKind() {
	case 't', 'f':
		v, err := f.d.ReadValue()
		*dst = err == nil && v[0] == 't'
		return err == nil
	}
	return false
}

// emptyArray reads [].
func (f fastDecoder) emptyArray() bool {
	return f.open('[') && f.d.PeekKind() == ']' && f.close(']')
}

// spans reads the spans object into td.Spans.
func (f fastDecoder) spans(td *TraceData) bool {
	if !f.open('{') {
		return false
	}
	td.Spans = map[string]*SpanData{}
	for f.d.PeekKind() == '"' {
		v, err := f.d.ReadValue()
		if err != nil {
			return false
		}
		raw := v[1 : len(v)-1]
		if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
			return false
		}
		if _, dup := td.Spans[string(raw)]; dup {
			return false
		}
		key := f.seen.of(raw)
		sd := new(SpanData)
		if !f.span(sd) {
			return false
		}
		td.Spans[key] = sd
	}
	return f.close('}')
}

// span reads one SpanData object.
func (f fastDecoder) span(sd *SpanData) bool {
	var seen uint16
	first := func(bit uint16) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	return f.object(func(name []byte) bool {
		switch string(name) {
		case "spanId":
			return first(1) && f.str(&sd.SpanID)
		case "traceId":
			return first(2) && f.str(&sd.TraceID)
		case "parentSpanId":
			return first(4) && f.str(&sd.ParentSpanID)
		case "startTime":
			return first(8) && f.millis(&sd.StartTime)
		case "endTime":
			return first(16) && f.millis(&sd.EndTime)
		case "attributes":
			return first(32) && f.attributes(sd)
		case "displayName":
			return first(64) && f.str(&sd.DisplayName)
		case "links":
			return first(128) && f.emptyArray()
		case "instrumentationLibrary":
			return first(256) && f.library(&sd.InstrumentationLibrary)
		case "spanKind":
			return first(512) && f.str(&sd.SpanKind)
		case "sameProcessAsParentSpan":
			sd.SameProcessAsParentSpan = new(BoolValue)
			return first(1024) && f.boolValue(sd.SameProcessAsParentSpan)
		case "status":
			sd.Status = new(SpanStatus)
			return first(2048) && f.status(sd.Status)
		case "timeEvents":
			return first(4096) && f.noTimeEvents()
		case "truncated":
			return first(8192) && f.boolean(&sd.Truncated)
		}
		return f.d.SkipValue() == nil
	})
}

// attributes keeps the attributes' value as it is (an object, as genkitSpan requires, or whatever
// else it then refuses), as json.RawMessage's UnmarshalJSON does.
func (f fastDecoder) attributes(sd *SpanData) bool {
	if f.d.PeekKind() == 'n' {
		return false
	}
	v, err := f.d.ReadValue()
	if err != nil {
		return false
	}
	sd.Attributes = append([]byte(nil), v...)
	return true
}

// library reads an instrumentationLibrary object.
func (f fastDecoder) library(lib *InstrumentationLibrary) bool {
	var seen uint8
	return f.object(func(name []byte) bool {
		switch string(name) {
		case "name":
			return f.first(&seen, 1) && f.str(&lib.Name)
		case "version":
			return f.first(&seen, 2) && f.str(&lib.Version)
		case "schemaUrl":
			return f.first(&seen, 4) && f.str(&lib.SchemaURL)
		}
		return f.d.SkipValue() == nil
	})
}

// boolValue reads a {"value": bool} object.
func (f fastDecoder) boolValue(b *BoolValue) bool {
	var seen uint8
	return f.object(func(name []byte) bool {
		if string(name) == "value" {
			return f.first(&seen, 1) && f.boolean(&b.Value)
		}
		return f.d.SkipValue() == nil
	})
}

// status reads a status object.
func (f fastDecoder) status(st *SpanStatus) bool {
	var seen uint8
	return f.object(func(name []byte) bool {
		switch string(name) {
		case "code":
			return f.first(&seen, 1) && f.integer(&st.Code)
		case "message":
			return f.first(&seen, 2) && f.str(&st.Message)
		}
		return f.d.SkipValue() == nil
	})
}

// noTimeEvents reads a timeEvents object that holds no event.
func (f fastDecoder) noTimeEvents() bool {
	var seen uint8
	return f.object(func(name []byte) bool {
		if string(name) == "timeEvent" {
			return f.first(&seen, 1) && f.emptyArray()
		}
		return f.d.SkipValue() == nil
	})
}
