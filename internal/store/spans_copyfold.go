package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Statements copyFoldCommit prepares on a connection: the trace fold and the ingest settings once,
// the COPY again whenever the table it copies into changes (spanCopyStatement).
const (
	traceFoldStatement      = "loupe_trace_fold"
	ingestSettingsStatement = "loupe_ingest_settings"
	spanCopyStatement       = "loupe_span_copy"
)

// prepareSpanCopy prepares the COPY into table on conn, replacing the one prepared there for
// another table (yesterday's partition, or the last hour's), so that a connection that lives for
// weeks holds one COPY statement, not one per partition it ever wrote. The connection's custom
// data remembers which table that is.
func prepareSpanCopy(ctx context.Context, conn *pgx.Conn, table string) (*pgconn.StatementDescription, error) {
	sql := copySpansSQL(table)
	data := conn.PgConn().CustomData()
	if prev, ok := data[spanCopyStatement].(string); ok && prev != sql {
		if err := conn.Deallocate(ctx, spanCopyStatement); err != nil {
			return nil, err
		}
		delete(data, spanCopyStatement)
	}
	sd, err := conn.Prepare(ctx, spanCopyStatement, sql)
	if err != nil {
		return nil, err
	}
	data[spanCopyStatement] = sql
	return sd, nil
}

// encodeMessages appends msgs to buf in the protocol's wire form.
func encodeMessages(buf []byte, msgs ...pgproto3.FrontendMessage) ([]byte, error) {
	for _, m := range msgs {
		var err error
		if buf, err = m.Encode(buf); err != nil {
			return buf, fmt.Errorf("encode %T: %w", m, err)
		}
	}
	return buf, nil
}

// copyFoldCommit COPYs spans (flags as copySpans takes them) into table in a transaction it begins
// with ingestSettings (or the one open on conn, when begin is false), folds their traces'
// summaries with traceFoldArraysSQL and foldArgs, and commits: in one round trip, where copySpans
// and then a batch of the fold and COMMIT take two. pgx cannot send anything after a COPY before
// reading its result, so the messages are written here, in the protocol's own terms, all in the
// extended protocol against statements prepared on conn (the settings, the COPY, the fold),
// so that PostgreSQL parses and plans nothing per group but BEGIN and COMMIT: BEGIN, the settings,
// the COPY with its data and end, the fold, COMMIT, and one Sync. PostgreSQL runs them in order;
// when one fails, it skips everything up to the Sync (the COPY's data included), so the COMMIT
// never commits a half, and the first error is returned (a unique violation of the COPY, for
// one, which the caller answers by looking the batch up). It returns the rows copied.
//
// A group writer waits on every round trip, and under batched OTLP ingest the fold's took a
// quarter of its cycle (0.48 of 2.1 ms per 82-span group, with one writer). Sent as one simple query, the BEGIN,
// settings and COPY were parsed and the settings planned for every group: a tenth of
// PostgreSQL's time under realtime ingest, whose groups hold three or four spans.
func copyFoldCommit(ctx context.Context, conn *pgx.Conn, begin bool, table string, spans []Span, flags []int16, foldArgs []any) (int64, error) {
	fold, err := conn.Prepare(ctx, traceFoldStatement, traceFoldArraysSQL)
	if err != nil {
		return 0, fmt.Errorf("prepare the trace fold: %w", err)
	}
	copyStmt, err := prepareSpanCopy(ctx, conn, table)
	if err != nil {
		return 0, fmt.Errorf("prepare the COPY: %w", err)
	}
	var settings *pgconn.StatementDescription
	if begin {
		if settings, err = conn.Prepare(ctx, ingestSettingsStatement, ingestSettings); err != nil {
			return 0, fmt.Errorf("prepare the ingest settings: %w", err)
		}
	}
	var foldQuery pgx.ExtendedQueryBuilder
	if err := foldQuery.Build(conn.TypeMap(), fold, foldArgs); err != nil {
		return 0, fmt.Errorf("encode the trace fold: %w", err)
	}
	// Every message goes into one pooled buffer, the rows written straight into their CopyData,
	// and out in one write: pgproto3's Frontend would copy the rows into a buffer of its own,
	// which it drops after each write longer than a kilobyte (a new one of 40 KB or more a group).
	size := copyRowsSize(spans) + 512
	for _, v := range foldQuery.ParamValues {
		size += 4 + len(v)
	}
	pooled, buf := pooledCopyBuffer(size)
	msgs := []pgproto3.FrontendMessage{}
	if begin {
		msgs = append(msgs, &pgproto3.Parse{Query: "BEGIN"}, &pgproto3.Bind{}, &pgproto3.Execute{},
			&pgproto3.Bind{PreparedStatement: settings.Name}, &pgproto3.Execute{})
	}
	msgs = append(msgs, &pgproto3.Bind{PreparedStatement: copyStmt.Name}, &pgproto3.Execute{})
	if buf, err = encodeMessages(buf, msgs...); err != nil {
		return 0, err
	}
	at := len(buf)
	buf = append(buf, 'd', 0, 0, 0, 0) // CopyData, its length set below
	buf = appendCopyRows(buf, spans, flags)
	binary.BigEndian.PutUint32(buf[at+1:], uint32(len(buf)-at-1)) //nolint:gosec // a group's rows are far below 2 GB (maxGroupSpans)
	buf, err = encodeMessages(buf, &pgproto3.CopyDone{},
		&pgproto3.Bind{PreparedStatement: fold.Name, ParameterFormatCodes: foldQuery.ParamFormats,
			Parameters: foldQuery.ParamValues, ResultFormatCodes: foldQuery.ResultFormats},
		&pgproto3.Execute{}, &pgproto3.Parse{Query: "COMMIT"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if err != nil {
		return 0, err
	}
	pg := conn.PgConn()
	_, err = pg.Conn().Write(buf)
	putCopyRows(pooled, buf) // written, or never to be
	if err != nil {
		_ = pg.Close(context.WithoutCancel(ctx)) // already failed: the pool drops a closed connection
		return 0, markConnectionLost(err, pg)
	}
	// The Sync's ReadyForQuery ends it.
	var copied int64
	var first error
	for {
		msg, err := pg.ReceiveMessage(ctx)
		if err != nil {
			return 0, markConnectionLost(err, pg)
		}
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			if first != nil {
				return 0, first
			}
			return copied, nil
		case *pgproto3.ErrorResponse:
			if first == nil {
				first = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.CommandComplete:
			if n, ok := bytes.CutPrefix(m.CommandTag, []byte("COPY ")); ok {
				if copied, err = strconv.ParseInt(string(n), 10, 64); err != nil {
					first = fmt.Errorf("COPY's tag %q: %w", m.CommandTag, err)
				}
			}
		}
	}
}
