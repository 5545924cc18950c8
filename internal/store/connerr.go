package store

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsConnectionLost reports whether err says that the database could not be reached or dropped the
// connection, rather than that a statement failed: a failed connect, a server shutting down,
// crashed or still starting (SQLSTATE class 08, 57P01, 57P02, 57P03), or an I/O error on the
// connection. Such an error passes once the database is back; a failed statement would fail again.
// A timeout is not counted: it may be the caller's deadline on a slow statement.
func IsConnectionLost(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	if errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	var lost *connectionLostError
	if errors.As(err, &lost) {
		return true
	}
	// pgconn marks the errors of a connection's I/O with SafeToRetry, and a timeout too.
	var ioErr interface{ SafeToRetry() bool }
	return errors.As(err, &ioErr) && !pgconn.Timeout(err)
}

// connectionLostError is an error after which its connection was closed: pgconn's CopyFrom answers
// a connection cut mid-COPY with the socket's own error (an unexpected EOF, a reset, a closed
// connection), none of pgconn's types, which IsConnectionLost could not tell from any other
// program's I/O error (a browser gone, a request body cut short).
type connectionLostError struct{ err error }

func (e *connectionLostError) Error() string { return e.err.Error() }
func (e *connectionLostError) Unwrap() error { return e.err }

// markConnectionLost wraps err as a lost connection when conn was closed by it.
func markConnectionLost(err error, conn *pgconn.PgConn) error {
	var pgErr *pgconn.PgError
	if err == nil || errors.As(err, &pgErr) || !conn.IsClosed() {
		return err
	}
	return &connectionLostError{err}
}
