package trace

import (
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"
)

// A trace tree is written by hand rather than by encoding/json, which re-validates and compacts
// every json.RawMessage it writes: for a 10,000-span trace that was most of the response's CPU,
// spent on attribute JSON that PostgreSQL stores as text and hands back as it was ingested. Here
// the stored JSON goes out byte for byte, and the rest is written in encoding/json's field order
// and spelling, so the response decodes to the same value as before.

// jsonFlushAt is how much of the response is buffered before it is written out.
const jsonFlushAt = 64 << 10

// WriteJSON writes the tree as GET /api/v1/traces/{id} answers it: the fields and order of
// encoding/json's encoding of Tree, with the spans' attributes, events, links and resource as
// stored. A skeleton tree (Skeleton) leaves those four out and says how large they are.
func (t *Tree) WriteJSON(w io.Writer) error {
	e := jsonWriter{w: w, buf: make([]byte, 0, jsonFlushAt+4096)}
	e.raw(`{"trace":`)
	if t.Trace == nil {
		e.raw("null")
	} else {
		b, err := json.Marshal(t.Trace)
		if err != nil {
			return err
		}
		e.buf = append(e.buf, b...)
	}
	e.raw(`,"roots":`)
	e.nodes(t.Roots, t.Skeleton)
	e.raw(`,"span_count":`)
	e.buf = strconv.AppendInt(e.buf, int64(t.SpanCount), 10)
	if t.Skeleton {
		e.raw(`,"skeleton":true`)
	}
	e.raw("}\n")
	return e.flush()
}

// WriteSpanJSON writes one span as a tree node without its children: what
// GET /api/v1/traces/{id}/spans/{span} answers.
func WriteSpanJSON(w io.Writer, n *Node) error {
	e := jsonWriter{w: w, buf: make([]byte, 0, 4096)}
	e.node(n, false, false)
	e.raw("\n")
	return e.flush()
}

// jsonWriter appends to buf and writes it out past jsonFlushAt, keeping the first write error.
type jsonWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (e *jsonWriter) raw(s string) { e.buf = append(e.buf, s...) }

func (e *jsonWriter) flush() error {
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
	return e.err
}

func (e *jsonWriter) maybeFlush() {
	if len(e.buf) >= jsonFlushAt {
		_ = e.flush()
	}
}

// stored appends JSON as stored; empty stands for a nil json.RawMessage, which encoding/json
// writes as null.
func (e *jsonWriter) stored(b []byte) {
	if len(b) == 0 {
		e.raw("null")
		return
	}
	e.buf = append(e.buf, b...)
}

func (e *jsonWriter) nodes(ns []*Node, skeleton bool) {
	if ns == nil {
		e.raw("null")
		return
	}
	e.buf = append(e.buf, '[')
	for i, n := range ns {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.node(n, skeleton, true)
		e.maybeFlush()
	}
	e.buf = append(e.buf, ']')
}

// node writes n in the field order of encoding/json's encoding of Node: the embedded span's
// fields, then Node's own.
func (e *jsonWriter) node(n *Node, skeleton, children bool) {
	e.raw(`{"trace_id":`)
	e.buf = appendJSONString(e.buf, n.TraceID)
	e.raw(`,"span_id":`)
	e.buf = appendJSONString(e.buf, n.SpanID)
	if n.ParentSpanID != nil {
		e.raw(`,"parent_span_id":`)
		e.buf = appendJSONString(e.buf, *n.ParentSpanID)
	}
	e.raw(`,"name":`)
	e.buf = appendJSONString(e.buf, n.Name)
	e.raw(`,"kind":`)
	e.buf = strconv.AppendInt(e.buf, int64(n.Kind), 10)
	e.raw(`,"start_time_unix_nano":`)
	e.buf = strconv.AppendInt(e.buf, n.StartTime, 10)
	e.raw(`,"end_time_unix_nano":`)
	e.buf = strconv.AppendInt(e.buf, n.EndTime, 10)
	e.raw(`,"status_code":`)
	e.buf = strconv.AppendInt(e.buf, int64(n.StatusCode), 10)
	if n.StatusMessage != "" {
		e.raw(`,"status_message":`)
		e.buf = appendJSONString(e.buf, n.StatusMessage)
	}
	if !skeleton {
		e.raw(`,"attributes":`)
		e.stored(n.Attributes)
		e.raw(`,"events":`)
		e.stored(n.Events)
		e.raw(`,"links":`)
		e.stored(n.Links)
		e.raw(`,"resource":`)
		e.stored(n.Resource)
	}
	if n.Scope != "" {
		e.raw(`,"scope":`)
		e.buf = appendJSONString(e.buf, n.Scope)
	}
	if n.ScopeVersion != "" {
		e.raw(`,"scope_version":`)
		e.buf = appendJSONString(e.buf, n.ScopeVersion)
	}
	e.raw(`,"source":`)
	e.buf = appendJSONString(e.buf, n.Source)
	if n.RunID != nil {
		e.raw(`,"run_id":`)
		e.buf = appendUUID(e.buf, *n.RunID)
	}
	e.raw(`,"duration_ns":`)
	e.buf = strconv.AppendInt(e.buf, n.DurationNS, 10)
	e.raw(`,"running":`)
	e.buf = strconv.AppendBool(e.buf, n.Running)
	if n.Orphan {
		e.raw(`,"orphan":true`)
	}
	e.raw(`,"status":`)
	e.buf = appendJSONString(e.buf, n.Status)
	if n.PayloadBytes != 0 {
		e.raw(`,"payload_bytes":`)
		e.buf = strconv.AppendInt(e.buf, n.PayloadBytes, 10)
	}
	if children {
		e.raw(`,"children":`)
		e.nodes(n.Children, skeleton)
	}
	e.buf = append(e.buf, '}')
}

// appendUUID appends id as a JSON string in its canonical form, as uuid.UUID's MarshalText writes
// it, without allocating.
func appendUUID(dst []byte, id uuid.UUID) []byte {
	dst = append(dst, '"')
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json writes it (HTML characters,
// U+2028 and U+2029 escaped, invalid UTF-8 replaced). Span names and ids are nearly always plain
// ASCII, which is copied as is.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
