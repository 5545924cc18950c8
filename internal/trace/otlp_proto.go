package trace

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/store"
)

// decodeOTLPProto decodes a protobuf ExportTraceServiceRequest straight into the spans to store:
// exactly what fromOTLP gives for the request pdata decodes (FuzzDecodeOTLPProtoMatchesPdata), and
// the same requests refused, without pdata's object graph in between. That graph (a struct and a
// copied string per span, attribute and value) was the larger half of decoding a body, and a
// quarter of the server's CPU under batched ingest.
//
// Fields come in any order and a message's singular fields may repeat, as protobuf allows: a
// resource, scope or status sent twice is merged (attributes appended, the last scalar kept), an
// attribute's value sent twice is the last one set.
func decodeOTLPProto(body []byte) (spans []store.Span, rejected int64, reason string, err error) {
	d := protoDecoder{aw: attrsWriter{buf: make([]byte, 0, len(body)+len(body)/4)}}
	d.spans = make([]store.Span, 0, len(body)/512+1)
	for f, err := range wireFields(body) {
		if err != nil {
			return nil, 0, "", err
		}
		if ok, err := f.is(1, wireLen, "ResourceSpans"); err != nil {
			return nil, 0, "", err
		} else if ok {
			if err := d.resourceSpans(f.data); err != nil {
				return nil, 0, "", err
			}
		}
	}
	return d.spans, d.rejected, rejectReason(d.rejected, d.reasons), nil
}

// protoDecoder holds one request's decoding state.
type protoDecoder struct {
	aw       attrsWriter
	pairs    []wirePair // the members of the maps being written, one level above the other
	order    []int32    // their indexes in d.pairs, sorted by key, one level above the other
	spans    []store.Span
	rejected int64
	reasons  []string

	// Scratch reused from span to span: the encodings of a span's attributes, events and links.
	attrs, events, links [][]byte
}

// wirePair is one attribute: its key and its value, views of the request.
type wirePair struct {
	key string
	val wireValue
}

// wireValue is an AnyValue: which of its fields was set last, and that field's value.
type wireValue struct {
	num   int32  // 0 for none (JSON null)
	v     uint64 // bool, int and double
	data  []byte // string, bytes, and the encoded list or map
	depth int    // the nesting level of a list's or map's members
}

func (d *protoDecoder) reject(format string, args ...any) {
	if len(d.reasons) < maxRejectReasons {
		d.reasons = append(d.reasons, fmt.Sprintf(format, args...))
	}
	d.rejected++
}

// resourceSpans decodes a ResourceSpans: its resource (in whichever position it comes) first, then
// its scopes' spans. The scopes of an OTLP 0.x exporter (instrumentation_library_spans, field
// 1000) count when there are no others, as pdata migrates them.
func (d *protoDecoder) resourceSpans(b []byte) error {
	var resources, scopes, legacy [][]byte
	for f, err := range wireFields(b) {
		if err != nil {
			return err
		}
		switch f.num {
		case 1:
			if _, err := f.is(1, wireLen, "Resource"); err != nil {
				return err
			}
			resources = append(resources, f.data)
		case 2:
			if _, err := f.is(2, wireLen, "ScopeSpans"); err != nil {
				return err
			}
			scopes = append(scopes, f.data)
		case 3:
			if _, err := f.is(3, wireLen, "SchemaUrl"); err != nil {
				return err
			}
		case 1000:
			if _, err := f.is(1000, wireLen, "DeprecatedScopeSpans"); err != nil {
				return err
			}
			legacy = append(legacy, f.data)
		}
	}
	d.attrs = d.attrs[:0]
	for _, r := range resources {
		if err := d.resource(r); err != nil {
			return err
		}
	}
	resource, err := d.object(d.attrs, nil)
	if err != nil {
		return err
	}
	for _, s := range scopes {
		if err := d.scopeSpans(s, resource, true); err != nil {
			return err
		}
	}
	// Legacy scopes are read all the same, as pdata reads them before it drops them.
	for _, s := range legacy {
		if err := d.scopeSpans(s, resource, len(scopes) == 0); err != nil {
			return err
		}
	}
	return nil
}

// resource gathers a Resource's attributes into d.attrs.
func (d *protoDecoder) resource(b []byte) error {
	for f, err := range wireFields(b) {
		if err != nil {
			return err
		}
		switch f.num {
		case 1:
			if _, err := f.is(1, wireLen, "Attributes"); err != nil {
				return err
			}
			d.attrs = append(d.attrs, f.data)
		case 2:
			_, err = f.is(2, wireVarint, "DroppedAttributesCount")
		case 3:
			if _, err = f.is(3, wireLen, "EntityRefs"); err == nil {
				err = wireStrings(f.data, "EntityRef", 4)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// wireStrings checks a message whose fields 1 to n are all strings (an EntityRef).
func wireStrings(b []byte, name string, n int32) error {
	for f, err := range wireFields(b) {
		if err != nil {
			return err
		}
		if f.num <= n {
			if _, err := f.is(f.num, wireLen, name+" field "+strconv.Itoa(int(f.num))); err != nil {
				return err
			}
		}
	}
	return nil
}

// scopeSpans decodes a ScopeSpans's spans, under their scope's name and version. keep is false
// for legacy scopes that newer ones replace: those are checked, not kept.
func (d *protoDecoder) scopeSpans(b []byte, resource json.RawMessage, keep bool) error {
	var name, version []byte
	var spans [][]byte
	for f, err := range wireFields(b) {
		if err != nil {
			return err
		}
		switch f.num {
		case 1:
			if _, err := f.is(1, wireLen, "Scope"); err != nil {
				return err
			}
			if name, version, err = d.scope(f.data, name, version); err != nil {
				return err
			}
		case 2:
			if _, err := f.is(2, wireLen, "Spans"); err != nil {
				return err
			}
			spans = append(spans, f.data)
		case 3:
			if _, err := f.is(3, wireLen, "SchemaUrl"); err != nil {
				return err
			}
		}
	}
	scope, scopeVersion := string(name), string(version)
	for _, s := range spans {
		if err := d.span(s, resource, scope, scopeVersion, keep); err != nil {
			return err
		}
	}
	return nil
}

// scope reads an InstrumentationScope's name and version over those of the scope's earlier
// copies, and checks its attributes (which Loupe does not store).
func (d *protoDecoder) scope(b, name, version []byte) ([]byte, []byte, error) {
	for f, err := range wireFields(b) {
		if err != nil {
			return nil, nil, err
		}
		switch f.num {
		case 1:
			if _, err = f.is(1, wireLen, "Name"); err == nil {
				name = f.data
			}
		case 2:
			if _, err = f.is(2, wireLen, "Version"); err == nil {
				version = f.data
			}
		case 3:
			if _, err = f.is(3, wireLen, "Attributes"); err == nil {
				_, _, err = wireKeyValue(f.data, 0, true)
			}
		case 4:
			_, err = f.is(4, wireVarint, "DroppedAttributesCount")
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return name, version, nil
}

// span decodes one Span and appends it to d.spans, or counts it rejected as fromOTLP does; unless
// keep is false, when it only checks it.
func (d *protoDecoder) span(b []byte, resource json.RawMessage, scope, scopeVersion string, keep bool) error {
	var (
		tid, sid, parent     []byte
		name, statusMessage  []byte
		kind, statusCode     int32
		start, end           uint64
		runID                *uuid.UUID
		attrs, events, links = d.attrs[:0], d.events[:0], d.links[:0]
	)
	for f, err := range wireFields(b) {
		if err != nil {
			return err
		}
		switch f.num {
		case 1:
			if _, err = f.is(1, wireLen, "TraceId"); err == nil {
				tid, err = wireID(f.data, 16, tid, "TraceID")
			}
		case 2:
			if _, err = f.is(2, wireLen, "SpanId"); err == nil {
				sid, err = wireID(f.data, 8, sid, "SpanID")
			}
		case 3:
			_, err = f.is(3, wireLen, "TraceState")
		case 4:
			if _, err = f.is(4, wireLen, "ParentSpanId"); err == nil {
				parent, err = wireID(f.data, 8, parent, "SpanID")
			}
		case 5:
			if _, err = f.is(5, wireLen, "Name"); err == nil {
				name = f.data
			}
		case 6:
			if _, err = f.is(6, wireVarint, "Kind"); err == nil {
				kind = int32(f.v)
			}
		case 7:
			if _, err = f.is(7, wireI64, "StartTimeUnixNano"); err == nil {
				start = f.v
			}
		case 8:
			if _, err = f.is(8, wireI64, "EndTimeUnixNano"); err == nil {
				end = f.v
			}
		case 9:
			if _, err = f.is(9, wireLen, "Attributes"); err == nil {
				attrs = append(attrs, f.data)
			}
		case 10, 12, 14:
			_, err = f.is(f.num, wireVarint, "Dropped count")
		case 11:
			if _, err = f.is(11, wireLen, "Events"); err == nil {
				events = append(events, f.data)
			}
		case 13:
			if _, err = f.is(13, wireLen, "Links"); err == nil {
				links = append(links, f.data)
			}
		case 15:
			if _, err = f.is(15, wireLen, "Status"); err == nil {
				statusMessage, statusCode, err = wireStatus(f.data, statusMessage, statusCode)
			}
		case 16:
			_, err = f.is(16, wireI32, "Flags")
		}
		if err != nil {
			return err
		}
	}
	d.attrs, d.events, d.links = attrs, events, links // keep the scratch's growth

	// The attributes are written (and so checked) whether or not the span is kept: a malformed
	// value anywhere refuses the request, as it does in pdata.
	mark := len(d.aw.buf)
	var run wireValue
	attributes, err := d.object(attrs, &run)
	if err != nil {
		return err
	}
	if id, err := uuid.Parse(run.asString()); err == nil {
		runID = &id
	}
	storedEvents, err := d.spanEvents(events)
	if err != nil {
		return err
	}
	storedLinks, err := d.spanLinks(links)
	if err != nil {
		return err
	}

	if !keep {
		d.aw.buf = d.aw.buf[:mark]
		return nil
	}
	spanName := string(name)
	var zeroTrace [16]byte
	var zeroSpan [8]byte
	spanIDHex := func() string { return hexID(sid) } // once checked present
	switch {
	case len(tid) == 0 || string(tid) == string(zeroTrace[:]):
		d.reject("span %q: trace id is all zeros or missing", spanName)
	case len(sid) == 0 || string(sid) == string(zeroSpan[:]):
		d.reject("span %q: span id is all zeros or missing", spanName)
	case start > math.MaxInt64 || end > math.MaxInt64:
		d.reject("span %q (%s): time out of range", spanName, spanIDHex())
	case start == 0:
		d.reject("span %q (%s): start_time_unix_nano is 0 or missing", spanName, spanIDHex())
	case end != 0 && end < start:
		d.reject("span %q (%s): end_time_unix_nano %d is before its start_time_unix_nano %d", spanName, spanIDHex(), end, start)
	default:
		sp := store.Span{
			TraceID:       hexID(tid),
			SpanID:        hexID(sid),
			Name:          spanName,
			Kind:          int16(kind),
			StartTime:     int64(start),
			EndTime:       int64(end),
			StatusCode:    int16(statusCode),
			StatusMessage: string(statusMessage),
			Attributes:    attributes,
			Resource:      resource,
			Scope:         scope,
			ScopeVersion:  scopeVersion,
			Source:        store.SpanSourceOTLP,
			RunID:         runID,
			Events:        storedEvents,
			Links:         storedLinks,
		}
		if len(parent) > 0 && string(parent) != string(zeroSpan[:]) {
			p := hexID(parent)
			sp.ParentSpanID = &p
		}
		if sp.StatusCode == store.StatusError {
			markInterrupt(&sp) // a Genkit app exporting OTLP
		}
		cleanSpanText(&sp)
		d.spans = append(d.spans, sp)
		return nil
	}
	d.aw.buf = d.aw.buf[:mark] // a rejected span's attributes are dropped
	return nil
}

// padID is an id of size bytes: itself, or zeros for an absent one.
func padID(id []byte, size int) []byte {
	if len(id) == size {
		return id
	}
	return make([]byte, size)
}

// wireID checks an id's length: size bytes, or none (all zeros); prev is returned on error.
func wireID(b []byte, size int, prev []byte, name string) ([]byte, error) {
	if len(b) != 0 && len(b) != size {
		return prev, errors.New("invalid length for " + name)
	}
	return b, nil
}

// wireStatus reads a Status over its earlier copies' message and code.
func wireStatus(b, message []byte, code int32) ([]byte, int32, error) {
	for f, err := range wireFields(b) {
		if err != nil {
			return nil, 0, err
		}
		switch f.num {
		case 2:
			if _, err = f.is(2, wireLen, "Message"); err == nil {
				message = f.data
			}
		case 3:
			if _, err = f.is(3, wireVarint, "Code"); err == nil {
				code = int32(f.v)
			}
		}
		if err != nil {
			return nil, 0, err
		}
	}
	return message, code, nil
}

// spanEvents encodes a span's events as spans.events holds them, nil for none.
func (d *protoDecoder) spanEvents(events [][]byte) (json.RawMessage, error) {
	if len(events) == 0 {
		return nil, nil
	}
	out := make([]storedEvent, len(events))
	var attrs [][]byte
	for i, b := range events {
		var ts uint64
		var name []byte
		attrs = attrs[:0]
		for f, err := range wireFields(b) {
			if err != nil {
				return nil, err
			}
			switch f.num {
			case 1:
				if _, err = f.is(1, wireI64, "TimeUnixNano"); err == nil {
					ts = f.v
				}
			case 2:
				if _, err = f.is(2, wireLen, "Name"); err == nil {
					name = f.data
				}
			case 3:
				if _, err = f.is(3, wireLen, "Attributes"); err == nil {
					attrs = append(attrs, f.data)
				}
			case 4:
				_, err = f.is(4, wireVarint, "DroppedAttributesCount")
			}
			if err != nil {
				return nil, err
			}
		}
		a, err := d.object(attrs, nil)
		if err != nil {
			return nil, err
		}
		out[i] = storedEvent{TimeUnixNano: int64(min(ts, math.MaxInt64)), Name: string(name), Attributes: a}
	}
	return mustJSON(out), nil
}

// spanLinks encodes a span's links as spans.links holds them, nil for none.
func (d *protoDecoder) spanLinks(links [][]byte) (json.RawMessage, error) {
	if len(links) == 0 {
		return nil, nil
	}
	out := make([]storedLink, len(links))
	var attrs [][]byte
	for i, b := range links {
		var tid, sid, state []byte
		var flags uint32
		attrs = attrs[:0]
		for f, err := range wireFields(b) {
			if err != nil {
				return nil, err
			}
			switch f.num {
			case 1:
				if _, err = f.is(1, wireLen, "TraceId"); err == nil {
					tid, err = wireID(f.data, 16, tid, "TraceID")
				}
			case 2:
				if _, err = f.is(2, wireLen, "SpanId"); err == nil {
					sid, err = wireID(f.data, 8, sid, "SpanID")
				}
			case 3:
				if _, err = f.is(3, wireLen, "TraceState"); err == nil {
					state = f.data
				}
			case 4:
				if _, err = f.is(4, wireLen, "Attributes"); err == nil {
					attrs = append(attrs, f.data)
				}
			case 5:
				_, err = f.is(5, wireVarint, "DroppedAttributesCount")
			case 6:
				if _, err = f.is(6, wireI32, "Flags"); err == nil {
					flags = uint32(f.v)
				}
			}
			if err != nil {
				return nil, err
			}
		}
		a, err := d.object(attrs, nil)
		if err != nil {
			return nil, err
		}
		out[i] = storedLink{TraceID: hexID(padID(tid, 16)), SpanID: hexID(padID(sid, 8)), TraceState: string(state), Attributes: a, Flags: flags}
	}
	return mustJSON(out), nil
}

// wireKeyValue reads a KeyValue entered at depth; check also checks what its value nests.
func wireKeyValue(b []byte, depth int, check bool) (string, wireValue, error) {
	if depth+2 < wireRecursionLimit {
		if key, val, ok := wireScalarKeyValue(b); ok {
			return key, val, nil
		}
	}
	if depth >= wireRecursionLimit {
		return "", wireValue{}, errWireDepth
	}
	depth++
	var key string
	var val wireValue
	for f, err := range wireFields(b) {
		if err != nil {
			return "", wireValue{}, err
		}
		switch f.num {
		case 1:
			if _, err = f.is(1, wireLen, "Key"); err == nil {
				key = bytesView(f.data)
			}
		case 2:
			if _, err = f.is(2, wireLen, "Value"); err == nil {
				val, err = wireAnyValue(f.data, depth, val, check)
			}
		case 3:
			_, err = f.is(3, wireVarint, "KeyStrindex")
		}
		if err != nil {
			return "", wireValue{}, err
		}
	}
	return key, val, nil
}

// wireScalarKeyValue reads the KeyValue nearly every attribute is: its key and its value (in
// either order: pdata's encoder writes the value first), the value holding one string, bool, int
// or double and nothing else. It reports false for anything else, which wireKeyValue's
// field-by-field reading then takes.
func wireScalarKeyValue(b []byte) (string, wireValue, bool) {
	var key, v []byte
	p := 0
	for range 2 {
		if p+1 >= len(b) {
			return "", wireValue{}, false
		}
		tag := b[p]
		n, next, err := wireVarintAt(b, p+1)
		if err != nil || n > uint64(len(b)-next) {
			return "", wireValue{}, false
		}
		field := b[next : next+int(n)]
		switch {
		case tag == 1<<3|byte(wireLen) && key == nil:
			key = field
		case tag == 2<<3|byte(wireLen) && v == nil && n > 0:
			v = field
		default:
			return "", wireValue{}, false
		}
		p = next + int(n)
	}
	if p != len(b) {
		return "", wireValue{}, false
	}
	switch v[0] {
	case 1<<3 | byte(wireLen): // string
		if n, p, err := wireVarintAt(v, 1); err == nil && n == uint64(len(v)-p) {
			return bytesView(key), wireValue{num: 1, data: v[p:len(v):len(v)]}, true
		}
	case 2<<3 | byte(wireVarint), 3<<3 | byte(wireVarint): // bool, int
		if x, p, err := wireVarintAt(v, 1); err == nil && p == len(v) {
			return bytesView(key), wireValue{num: int32(v[0] >> 3), v: x}, true
		}
	case 4<<3 | byte(wireI64): // double
		if len(v) == 9 {
			return bytesView(key), wireValue{num: 4, v: binary.LittleEndian.Uint64(v[1:])}, true
		}
	}
	return "", wireValue{}, false
}

// wireAnyValue reads an AnyValue entered at depth over prev, an earlier copy's: the last field
// set wins. check also checks the lists and maps it holds, every one of them, as pdata decodes
// each (those a later field replaces too).
func wireAnyValue(b []byte, depth int, prev wireValue, check bool) (wireValue, error) {
	if depth >= wireRecursionLimit {
		return wireValue{}, errWireDepth
	}
	depth++
	val := prev
	for f, err := range wireFields(b) {
		if err != nil {
			return wireValue{}, err
		}
		want, name := wireLen, ""
		switch f.num {
		case 1:
			name = "StringValue"
		case 2:
			want, name = wireVarint, "BoolValue"
		case 3:
			want, name = wireVarint, "IntValue"
		case 4:
			want, name = wireI64, "DoubleValue"
		case 5:
			name = "ArrayValue"
		case 6:
			name = "KvlistValue"
		case 7:
			name = "BytesValue"
		case 8:
			want, name = wireVarint, "StringValueStrindex"
		default:
			continue
		}
		if f.typ != want {
			return wireValue{}, fmt.Errorf("wrong wire type %d for field %s", f.typ, name)
		}
		val = wireValue{num: f.num, v: f.v, data: f.data, depth: depth}
		if check && (f.num == 5 || f.num == 6) {
			if err := wireListCheck(f.data, depth, f.num == 6); err != nil {
				return wireValue{}, err
			}
		}
	}
	return val, nil
}

// wireListCheck checks an ArrayValue, or with members a KeyValueList, entered at depth, and
// everything it nests: both are field 1 repeated, of AnyValues or of KeyValues.
func wireListCheck(b []byte, depth int, members bool) error {
	if depth >= wireRecursionLimit {
		return errWireDepth
	}
	depth++
	for f, err := range wireFields(b) {
		if err != nil {
			return err
		}
		if f.num != 1 {
			continue
		}
		if f.typ != wireLen {
			return fmt.Errorf("wrong wire type %d for field Values", f.typ)
		}
		if members {
			_, _, err = wireKeyValue(f.data, depth, true)
		} else {
			_, err = wireAnyValue(f.data, depth, wireValue{}, true)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// bytesView is b as a string without copying it: for keys and values on their way into the
// attribute JSON, which copies them. It must not outlive the request body.
func bytesView(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// asString is the value as pdata's AsString gives it for a run id: a string as itself, bytes as
// base64; other types cannot hold a UUID and give "".
func (v wireValue) asString() string {
	switch v.num {
	case 1:
		return bytesView(v.data)
	case 7:
		if len(v.data) == 0 {
			return ""
		}
		return base64.StdEncoding.EncodeToString(v.data)
	}
	return ""
}

// object writes the attributes encoded in kvs (KeyValue messages) as one JSON object, as
// attrsWriter.object writes a pdata map: keys sorted, the last of a repeated key kept, and an
// object naming the encoding error for one holding a NaN or an infinity. runID, when not nil, is
// set to the first loupe.run_id's value (pdata's Map.Get takes the first of a repeated key).
func (d *protoDecoder) object(kvs [][]byte, runID *wireValue) (json.RawMessage, error) {
	if len(kvs) == 0 {
		return json.RawMessage("{}"), nil
	}
	base := len(d.pairs)
	defer func() { d.pairs = d.pairs[:base] }()
	for _, kv := range kvs {
		key, val, err := wireKeyValue(kv, 0, true)
		if err != nil {
			return nil, err
		}
		if runID != nil && key == AttrRunID {
			*runID = val
			runID = nil // the first one
		}
		d.pairs = append(d.pairs, wirePair{key, val})
	}
	start := len(d.aw.buf)
	out, bad := d.appendPairs(d.aw.buf, base)
	if bad != 0 {
		d.aw.buf = d.aw.buf[:start]
		_, err := json.Marshal(bad)
		return mustJSON(map[string]string{"loupe.encoding_error": err.Error()}), nil
	}
	d.aw.buf = out
	return json.RawMessage(out[start:len(out):len(out)]), nil
}

// appendPairs writes d.pairs[base:] as a JSON object. It returns the first NaN or infinity met in
// key order, which JSON cannot hold (0 when none).
func (d *protoDecoder) appendPairs(b []byte, base int) ([]byte, float64) {
	// The pairs are sorted through an index (d.order, a stack as d.pairs is): moving an int32
	// rather than a pair. Nested maps push their indexes above this level's and pop them.
	n, obase := len(d.pairs)-base, len(d.order)
	for i := range n {
		d.order = append(d.order, int32(base+i))
	}
	defer func() { d.order = d.order[:obase] }()
	order := d.order[obase:]
	if n <= 32 {
		for i := 1; i < n; i++ { // insertion sort, stable
			for j := i; j > 0 && d.pairs[order[j]].key < d.pairs[order[j-1]].key; j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
	} else {
		slices.SortStableFunc(order, func(x, y int32) int { return strings.Compare(d.pairs[x].key, d.pairs[y].key) })
	}
	b = append(b, '{')
	first := true
	for i := range n {
		p := d.pairs[d.order[obase+i]] // reread: nested maps may move both stacks
		if i+1 < n && d.pairs[d.order[obase+i+1]].key == p.key {
			continue // a later copy of the key wins, as in a Go map
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendStoredJSONString(b, p.key)
		b = append(b, ':')
		var bad float64
		if b, bad = d.appendValue(b, p.val); bad != 0 {
			return b, bad
		}
	}
	return append(b, '}'), 0
}

// appendValue writes one value as attrsWriter.appendValue writes pdata's.
func (d *protoDecoder) appendValue(b []byte, v wireValue) ([]byte, float64) {
	switch v.num {
	case 1:
		return appendStoredJSONString(b, bytesView(v.data)), 0
	case 2:
		return strconv.AppendBool(b, v.v != 0), 0
	case 3:
		return strconv.AppendInt(b, int64(v.v), 10), 0
	case 4:
		f := math.Float64frombits(v.v)
		out, ok := appendJSONFloat(b, f)
		if !ok {
			return b, f
		}
		return out, 0
	case 5:
		b = append(b, '[')
		n := 0
		for f, err := range wireFields(v.data) {
			if err != nil {
				break // checked when it was read
			}
			if f.num != 1 {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			elem, _ := wireAnyValue(f.data, v.depth+1, wireValue{}, false)
			var bad float64
			if b, bad = d.appendValue(b, elem); bad != 0 {
				return b, bad
			}
		}
		return append(b, ']'), 0
	case 6:
		base := len(d.pairs)
		for f, err := range wireFields(v.data) {
			if err != nil {
				break
			}
			if f.num != 1 {
				continue
			}
			key, val, _ := wireKeyValue(f.data, v.depth+1, false)
			d.pairs = append(d.pairs, wirePair{key, val})
		}
		out, bad := d.appendPairs(b, base)
		d.pairs = d.pairs[:base]
		return out, bad
	case 7:
		if len(v.data) == 0 {
			return append(b, "null"...), 0 // pdata keeps empty bytes as nil, which encoding/json writes so
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v.data)
		return append(b, '"'), 0
	default: // none set, or a string table index (profiles only)
		return append(b, "null"...), 0
	}
}
