package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// copySpans COPYs spans into table, in COPY's binary format written straight from the spans: no
// row of interfaces, no per-value encode plan, no escaping. Profiled under OTLP ingest, pgx's
// CopyFrom spent a seventh of the server's CPU boxing and encoding rows; then, with the text
// format written by hand, PostgreSQL spent an eighth of its time splitting and unescaping the
// lines, and the server a twentieth escaping them. Every value here is text, json (sent as its
// text in either format), an integer or a uuid. It runs in conn's open transaction, or in the one
// that before (statements sent ahead of the COPY in the same query, "" for none) begins. flags
// are the spans' flags (spanFlags), worked out here when nil.
func copySpans(ctx context.Context, conn *pgconn.PgConn, before, table string, spans []Span, flags []int16) (int64, error) {
	pooled, buf := copyRows(spans, flags)
	tag, err := conn.CopyFrom(ctx, bytes.NewReader(buf), before+copySpansSQL(table))
	if err != nil {
		// Not pooled: on some errors pgconn returns before its goroutine stops reading buf.
		return 0, markConnectionLost(err, conn)
	}
	putCopyRows(pooled, buf)
	return tag.RowsAffected(), nil
}

// copySpansSQL is the COPY statement that reads spans' rows into table.
func copySpansSQL(table string) string {
	return "COPY " + pgx.Identifier{table}.Sanitize() + " (" + spanColumns + ") FROM STDIN (FORMAT binary)"
}

// copyRows writes spans as a binary COPY stream (flags as copySpans takes them) into a pooled
// buffer; putCopyRows gives it back once nothing reads it any more.
func copyRows(spans []Span, flags []int16) (*[]byte, []byte) {
	pooled, buf := pooledCopyBuffer(copyRowsSize(spans))
	return pooled, appendCopyRows(buf, spans, flags)
}

// copyRowsSize bounds the bytes of spans' binary COPY stream.
func copyRowsSize(spans []Span) int {
	size := len(copyBinaryHeader) + 2
	for i := range spans {
		sp := &spans[i]
		size += copyRowFixed + len(sp.Name) + len(sp.StatusMessage) + len(sp.Attributes) + len(sp.Events) + len(sp.Links) +
			len(sp.Resource) + len(sp.Scope) + len(sp.ScopeVersion) + len(sp.Source)
	}
	return size
}

// pooledCopyBuffer is an empty buffer of at least size bytes from copyBuffers.
func pooledCopyBuffer(size int) (*[]byte, []byte) {
	pooled, _ := copyBuffers.Get().(*[]byte)
	if pooled == nil || cap(*pooled) < size {
		b := make([]byte, 0, size)
		pooled = &b
	}
	return pooled, (*pooled)[:0]
}

// appendCopyRows appends spans' binary COPY stream (flags as copySpans takes them) to buf.
func appendCopyRows(buf []byte, spans []Span, flags []int16) []byte {
	if flags == nil {
		flags = spanFlagsOf(spans)
	}
	buf = append(buf, copyBinaryHeader...)
	for i := range spans {
		buf = appendSpanCopyRow(buf, &spans[i], flags[i])
	}
	return binary.BigEndian.AppendUint16(buf, 0xffff) // the trailer: a field count of -1
}

func putCopyRows(pooled *[]byte, buf []byte) {
	if cap(buf) <= maxPooledCopyBuffer {
		*pooled = buf
		copyBuffers.Put(pooled)
	}
}

// copyRowFixed bounds what a COPY row takes besides its variable text: the field count, eighteen
// field lengths, the ids, the integers, the run id, and the defaults of empty JSON and source
// (a buffer that runs short is copied whole into one twice its size).
const copyRowFixed = 2 + spanCopyFields*4 + 32 + 16 + 16 + 2 + 8 + 8 + 2 + 16 + 2 + 16

// copyBuffers keeps COPY buffers from group to group (a group of 80 one-kilobyte spans writes
// about 100 KB); maxPooledCopyBuffer is the largest kept, so that one burst does not pin megabytes.
var copyBuffers sync.Pool

const maxPooledCopyBuffer = 1 << 20

// copyBinaryHeader opens a binary COPY stream: the signature, no flags, no header extension.
const copyBinaryHeader = "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// spanCopyFields is the number of spanColumns.
const spanCopyFields = 18

// appendSpanCopyRow appends sp as one tuple of COPY's binary format, in spanColumns' order.
func appendSpanCopyRow(b []byte, sp *Span, flags int16) []byte {
	b = binary.BigEndian.AppendUint16(b, spanCopyFields)
	b = appendCopyText(b, sp.TraceID)
	b = appendCopyText(b, sp.SpanID)
	if sp.ParentSpanID == nil {
		b = appendCopyNull(b)
	} else {
		b = appendCopyText(b, *sp.ParentSpanID)
	}
	b = appendCopyText(b, sp.Name)
	b = appendCopyInt16(b, sp.Kind)
	b = appendCopyInt64(b, sp.StartTime)
	b = appendCopyInt64(b, sp.EndTime)
	b = appendCopyInt16(b, sp.StatusCode)
	b = appendCopyText(b, sp.StatusMessage)
	b = appendCopyJSON(b, sp.Attributes, "{}")
	b = appendCopyJSON(b, sp.Events, "[]")
	b = appendCopyJSON(b, sp.Links, "[]")
	b = appendCopyJSON(b, sp.Resource, "{}")
	b = appendCopyText(b, sp.Scope)
	b = appendCopyText(b, sp.ScopeVersion)
	b = appendCopyText(b, sourceOr(sp.Source))
	if sp.RunID == nil {
		b = appendCopyNull(b)
	} else {
		b = binary.BigEndian.AppendUint32(b, 16)
		b = append(b, sp.RunID[:]...)
	}
	return appendCopyInt16(b, flags)
}

// appendCopyText appends s as a binary COPY field of type text or json: its length, then its
// bytes as they are. PostgreSQL checks the encoding as it would a text-format value.
func appendCopyText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s))) //nolint:gosec // a span's text is far below 2 GB (the body limit)
	return append(b, s...)
}

// appendCopyJSON appends raw as a binary COPY field of type json, or empty when raw is.
func appendCopyJSON(b []byte, raw json.RawMessage, empty string) []byte {
	if len(raw) == 0 {
		return appendCopyText(b, empty)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(raw))) //nolint:gosec // as appendCopyText
	return append(b, raw...)
}

func appendCopyNull(b []byte) []byte { return binary.BigEndian.AppendUint32(b, 0xffffffff) }

func appendCopyInt16(b []byte, v int16) []byte {
	b = binary.BigEndian.AppendUint32(b, 2)
	return binary.BigEndian.AppendUint16(b, uint16(v)) //nolint:gosec // the bits as they are, as int2's binary form
}

func appendCopyInt64(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v)) //nolint:gosec // the bits as they are, as int8's binary form
}
