package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
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

// outage remembers since when the database has been seen unavailable for one reason, for the
// reasons that /readyz and 503s give when no DatabaseMonitor knows better: the server keeps one
// for an unreachable database and one for a database short of a resource.
type outage struct {
	mu          sync.Mutex
	reason      string
	since, last time.Time
}

// failed records a failure for reason seen now and returns since when the database has been
// unavailable for it.
func (o *outage) failed(now time.Time, reason string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() || now.Sub(o.last) > outageGap || reason != o.reason {
		o.since, o.reason = now, reason
	}
	o.last = now
	return o.since
}

// current is the outage being recorded: its reason, and when it was first and last seen.
func (o *outage) current() (reason string, since, last time.Time, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reason, o.since, o.last, !o.since.IsZero()
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
	reason := "unreachable since " + s.outage.failed(time.Now(), "unreachable").UTC().Format(time.RFC3339)
	if cause != nil {
		reason += ": " + cause.Error()
	}
	return reason
}

// databaseUnavailable turns an error that says the database cannot serve now (classify) into a
// 503, and returns nil for any other error. Errors that only may come from the database (a network
// error, a deadline) count when the database does not answer a ping either, so that a model
// endpoint's timeout is still the 500 it is.
func (s *Server) databaseUnavailable(ctx context.Context, err error) *Error {
	var reason string
	switch kind, short := classify(err); {
	case kind == shortOf:
		reason = short + " since " + s.shortage.failed(time.Now(), short).UTC().Format(time.RFC3339)
	case kind == unreachable, mayBeConnectionError(err) && !s.databaseAnswers(ctx):
		reason = s.databaseOutage(nil)
	default:
		return nil
	}
	return &Error{
		Status:  http.StatusServiceUnavailable,
		Code:    codeDatabaseUnavailable,
		Message: "the database is unavailable (" + reason + "); retry in a few seconds",
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

// outageKind is what an error says about the database, as opposed to the statement that failed.
type outageKind uint8

const (
	// notAnOutage: the statement's own failure, or no database error at all.
	notAnOutage outageKind = iota
	// unreachable: the database could not be reached or dropped the connection: a failed connect
	// or pool acquire, a connection exception (SQLSTATE class 08), an operator's intervention
	// (class 57: shut down, crashed, still starting, the database dropped), or an I/O error on
	// the connection. It is over when the database answers a ping.
	unreachable
	// shortOf: the database answered, but lacks a resource (class 53: disk space, memory,
	// connections, a configured limit), so that what needs it fails until it is freed. A ping
	// still succeeds: it is over when a write succeeds again (Store.WriteProbe).
	shortOf
)

// classify tells the errors that say the database cannot serve now from the statement's own: the
// one place that decides which errors are a 503 database_unavailable. For shortOf it also says
// what the database is short of. 57014 (query_canceled), in class 57, is what a statement timeout
// and a cancelled request raise: the statement's, not an outage.
func classify(err error) (kind outageKind, short string) {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return unreachable, ""
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch class := pgErr.Code[:min(2, len(pgErr.Code))]; {
		case class == "08", class == "57" && pgErr.Code != "57014":
			return unreachable, ""
		case class == "53":
			return shortOf, shortOfResource(pgErr.Code)
		}
		return notAnOutage, ""
	}
	if errors.Is(err, pgconn.ErrConnClosed) {
		return unreachable, ""
	}
	// pgconn marks the errors of a connection's I/O with SafeToRetry. A timeout is marked too, and
	// it may be the caller's deadline on a slow statement: mayBeConnectionError's.
	var ioErr interface{ SafeToRetry() bool }
	if errors.As(err, &ioErr) && !pgconn.Timeout(err) {
		return unreachable, ""
	}
	return notAnOutage, ""
}

// shortOfResource names what an SQLSTATE of class 53 says the database lacks.
func shortOfResource(code string) string {
	switch code {
	case "53100":
		return "no space left on device"
	case "53200":
		return "out of memory"
	case "53300":
		return "too many connections"
	case "53400":
		return "a configuration limit reached"
	}
	return "insufficient resources"
}

// mayBeConnectionError reports errors that a lost database gives but other things do too: network
// errors and deadlines.
func mayBeConnectionError(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
}
