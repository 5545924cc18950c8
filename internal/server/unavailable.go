package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// DatabaseMonitor knows of a database outage before a query fails: pgcluster.Cluster, while the
// embedded PostgreSQL is being restarted after a crash.
type DatabaseMonitor interface {
	// Outage describes the outage ("down since …, restarting (attempt 2)") and reports true while
	// the database is known to be down.
	Outage() (string, bool)
}

// codeDatabaseUnavailable is the error code of a request refused because the database is down.
const codeDatabaseUnavailable = "database_unavailable"

// retryAfterSeconds is the Retry-After of a database outage: about what the embedded PostgreSQL
// takes to come back after a crash.
const retryAfterSeconds = 5

// outageGap separates outages: failures seen further apart than this are not the same outage.
const outageGap = 30 * time.Second

// outage remembers since when the database has been seen unreachable, for the reasons that
// /readyz and 503s give when no DatabaseMonitor knows better.
type outage struct {
	mu          sync.Mutex
	since, last time.Time
}

// failed records a failure seen now and returns since when the database has been unreachable.
func (o *outage) failed(now time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() || now.Sub(o.last) > outageGap {
		o.since = now
	}
	o.last = now
	return o.since
}

// recovered records that the database answered.
func (o *outage) recovered() {
	o.mu.Lock()
	o.since = time.Time{}
	o.mu.Unlock()
}

// databaseOutage says why the database is unavailable: the monitor's account while it knows of an
// outage, otherwise since when it has been unreachable, with cause appended when there is one.
func (s *Server) databaseOutage(cause error) string {
	if s.deps.Database != nil {
		if reason, down := s.deps.Database.Outage(); down {
			return reason
		}
	}
	reason := "unreachable since " + s.outage.failed(time.Now()).UTC().Format(time.RFC3339)
	if cause != nil {
		reason += ": " + cause.Error()
	}
	return reason
}

// databaseUnavailable turns an error that says the database cannot be reached into a 503, and
// returns nil for any other error. Errors that only may come from the database (a network error, a
// deadline) count when the database does not answer a ping either, so that a model endpoint's
// timeout is still the 500 it is.
func (s *Server) databaseUnavailable(ctx context.Context, err error) *Error {
	switch {
	case isConnectionError(err):
	case mayBeConnectionError(err) && !s.databaseAnswers(ctx):
	default:
		return nil
	}
	return &Error{
		Status:  http.StatusServiceUnavailable,
		Code:    codeDatabaseUnavailable,
		Message: "the database is unavailable (" + s.databaseOutage(nil) + "); retry in a few seconds",
		Details: map[string]any{"retry_after_seconds": retryAfterSeconds},
	}
}

// databaseAnswers pings the database, briefly: it is asked only on the way to an error response.
func (s *Server) databaseAnswers(ctx context.Context) bool {
	if s.deps.Database != nil {
		if _, down := s.deps.Database.Outage(); down {
			return false
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if s.store.Pool().Ping(ctx) != nil {
		return false
	}
	s.outage.recovered()
	return true
}

// setRetryAfter tells a client when to try again after a 503 for a database outage.
func setRetryAfter(h http.Header) {
	h.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
}

// isConnectionError reports whether err says that the database could not be reached or dropped
// the connection, rather than that a statement failed: a failed connect or pool acquire, a server
// shutting down, crashed or still starting (SQLSTATE class 08, 57P01, 57P02, 57P03), or an I/O
// error on the connection.
func isConnectionError(err error) bool {
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
	// pgconn marks the errors of a connection's I/O with SafeToRetry. A timeout is marked too, and
	// it may be the caller's deadline on a slow statement: mayBeConnectionError's.
	var ioErr interface{ SafeToRetry() bool }
	return errors.As(err, &ioErr) && !pgconn.Timeout(err)
}

// mayBeConnectionError reports errors that a lost database gives but other things do too: network
// errors and deadlines.
func mayBeConnectionError(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
}
