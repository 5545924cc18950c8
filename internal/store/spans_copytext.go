package store

import (
	"bytes"
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// copySpans COPYs spans into table, in COPY's text format written straight from the spans: no
// row of interfaces, no per-value encode plan. Profiled under OTLP ingest, pgx's CopyFrom spent
// a seventh of the server's CPU boxing and encoding rows; every value here is text or an integer,
// which PostgreSQL parses from text as cheaply as from binary (json is text either way). It runs
// in conn's open transaction. flags are the spans' flags (spanFlags), worked out here when nil.
func copySpans(ctx context.Context, conn *pgconn.PgConn, table string, spans []Span, flags []int16) (int64, error) {
	if flags == nil {
		flags = spanFlagsOf(spans)
	}
	size := 0
	for i := range spans {
		sp := &spans[i]
		size += 128 + len(sp.Name) + len(sp.StatusMessage) + len(sp.Attributes) + len(sp.Events) + len(sp.Links) +
			len(sp.Resource) + len(sp.Scope) + len(sp.ScopeVersion)
	}
	buf := make([]byte, 0, size+size/16)
	for i := range spans {
		buf = appendSpanCopyRow(buf, &spans[i], flags[i])
	}
	tag, err := conn.CopyFrom(ctx, bytes.NewReader(buf),
		"COPY "+pgx.Identifier{table}.Sanitize()+" ("+spanColumns+") FROM STDIN")
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// appendSpanCopyRow appends sp as one line of COPY's text format, in spanColumns' order.
func appendSpanCopyRow(b []byte, sp *Span, flags int16) []byte {
	b = appendCopyText(b, sp.TraceID)
	b = append(b, '\t')
	b = appendCopyText(b, sp.SpanID)
	b = append(b, '\t')
	if sp.ParentSpanID == nil {
		b = append(b, `\N`...)
	} else {
		b = appendCopyText(b, *sp.ParentSpanID)
	}
	b = append(b, '\t')
	b = appendCopyText(b, sp.Name)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(sp.Kind), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, sp.StartTime, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, sp.EndTime, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(sp.StatusCode), 10)
	b = append(b, '\t')
	b = appendCopyText(b, sp.StatusMessage)
	b = append(b, '\t')
	b = appendCopyText(b, jsonOr(sp.Attributes, "{}"))
	b = append(b, '\t')
	b = appendCopyText(b, jsonOr(sp.Events, "[]"))
	b = append(b, '\t')
	b = appendCopyText(b, jsonOr(sp.Links, "[]"))
	b = append(b, '\t')
	b = appendCopyText(b, jsonOr(sp.Resource, "{}"))
	b = append(b, '\t')
	b = appendCopyText(b, sp.Scope)
	b = append(b, '\t')
	b = appendCopyText(b, sp.ScopeVersion)
	b = append(b, '\t')
	b = appendCopyText(b, sourceOr(sp.Source))
	b = append(b, '\t')
	if sp.RunID == nil {
		b = append(b, `\N`...)
	} else {
		b = append(b, sp.RunID.String()...)
	}
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(flags), 10)
	return append(b, '\n')
}

// appendCopyText appends s as a COPY text-format value: a backslash, newline, carriage return or
// tab escaped, everything else as it is (a lone `\N` thus stays text, never NULL).
func appendCopyText(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		var esc byte
		switch s[i] {
		case '\\':
			esc = '\\'
		case '\n':
			esc = 'n'
		case '\r':
			esc = 'r'
		case '\t':
			esc = 't'
		default:
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, '\\', esc)
		start = i + 1
	}
	return append(b, s[start:]...)
}
