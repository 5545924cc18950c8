package cli

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loupe-dev/loupe/internal/server"
	"github.com/loupe-dev/loupe/internal/store"
)

// While the database is out of reach, everything that uses it reports its own failure, again and
// again: River's producers (every poll of every queue), completer, elector, notifier and
// maintenance services, the live hub's LISTEN and NOTIFY, the run recorder, the trace exporter,
// the catalogue and the recovery sweep. Five restarts of the embedded PostgreSQL made over a
// thousand ERROR lines. outageLog keeps an outage to one line when it begins and one when it ends,
// at warn level or above, and moves the rest to debug level, where they still are for whoever
// looks for them.
//
// The embedded cluster's supervisor (pgcluster, exempt) gives the outages of the PostgreSQL it runs
// their two lines: "exited unexpectedly; restarting it" and "restarted". Any other outage (an
// external DATABASE_URL, the PostgreSQL of the devui whose cluster this process uses) gets them
// from outageState.

// outageLog is a slog.Handler that moves a warning or error caused by a lost database connection to
// debug level, and tells outageState about it.
type outageLog struct {
	next  slog.Handler
	state *outageState
	// exempt is set for pgcluster's records: the supervisor's account of an outage is the one kept.
	exempt bool
	// river is set for River's records, which carry the text of their errors, not the errors.
	river bool
}

// riverGaveUp ends the message River's completer logs, with no error, when it has retried a batch
// of completions three times. Its retries through an outage are lost connections; the jobs stay
// running until River rescues them.
const riverGaveUp = ": Too many errors; giving up"

// riverSteppedDown is in the warning River's elector logs when its leader could not renew its
// leadership in time: through an outage, because the database was out of reach.
const riverSteppedDown = "reelection deadline elapsed"

// riverGaveUpAfter is how long after an outage River's completer may still give up on a batch it
// retried through it: three attempts of up to 10 s each, 7 s of sleep between them.
const riverGaveUpAfter = time.Minute

func (h *outageLog) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *outageLog) Handle(ctx context.Context, r slog.Record) error {
	if h.exempt || r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	cause, lost := lostConnection(r, h.river)
	switch {
	case lost:
		h.state.lost(cause)
	case answeredUnavailable(r) && h.state.inOutage(0):
	// A bare socket error (a backend ended without a word: pgx says "unexpected EOF") while the
	// database is known to be down is the outage's too.
	case cause != "" && lostConnectionText(cause) && h.state.inOutage(0):
	case h.river && strings.HasSuffix(r.Message, riverGaveUp) && h.state.inOutage(riverGaveUpAfter):
	case h.river && strings.Contains(r.Message, riverSteppedDown) && h.state.inOutage(riverGaveUpAfter):
	default:
		return h.next.Handle(ctx, r)
	}
	if !h.next.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	r.Level = slog.LevelDebug
	return h.next.Handle(ctx, r)
}

func (h *outageLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(attrs)
	for _, a := range attrs {
		if a.Key == "component" {
			switch a.Value.String() {
			case "pgcluster":
				c.exempt = true
			case "river":
				c.river = true
			}
		}
	}
	return &c
}

func (h *outageLog) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}

// lostConnection finds the error of a record ("err" or "error") and reports whether it says the
// database connection was lost. Loupe logs errors as values. River logs their text, which, when
// byText is set (River talks to nothing but the database), is matched against what pgx and
// PostgreSQL say when a connection is lost.
func lostConnection(r slog.Record, byText bool) (cause string, lost bool) {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" && a.Key != "error" {
			return true
		}
		v := a.Value.Resolve()
		if err, ok := v.Any().(error); ok && v.Kind() == slog.KindAny {
			cause, lost = err.Error(), store.IsConnectionLost(err)
		} else {
			cause = v.String()
			lost = byText && lostConnectionText(cause)
		}
		return false
	})
	return cause, lost
}

// answeredUnavailable reports a request log line of a 503: during an outage, every request that
// needs the database gets one, and says so to its client.
func answeredUnavailable(r slog.Record) bool {
	unavailable := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "status" {
			unavailable = a.Value.Kind() == slog.KindInt64 && a.Value.Int64() == 503
			return false
		}
		return true
	})
	return unavailable
}

// lostConnectionTexts are what pgx and PostgreSQL say when the connection is lost or cannot be
// made, as store.IsConnectionLost tells them from errors (lower case).
var lostConnectionTexts = []string{
	"failed to connect to",     // pgconn.ConnectError
	"(sqlstate 08",             // connection exception
	"(sqlstate 57p01)",         // admin_shutdown: a server shutting down ended the connection
	"(sqlstate 57p02)",         // crash_shutdown
	"(sqlstate 57p03)",         // cannot_connect_now: starting up or shutting down
	"conn closed",              // pgconn.ErrConnClosed
	"unexpected eof",           // the server went away mid-message
	"connection reset by peer", // and at the socket
	"broken pipe",
	"connection refused",
}

func lostConnectionText(s string) bool {
	s = strings.ToLower(s)
	for _, t := range lostConnectionTexts {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

// announceAfter is how long a lost connection lasts before it is logged as an outage. A supervisor
// that knows of it says so well within it (it sees its postmaster exit at once, another devui's end
// within 200 ms); a single connection the server ended, replaced at once, is no outage; nor is an
// error of the outage that is logged just after the supervisor's postgres is back, which River's
// next poll (every second) shows answering.
const announceAfter = 2 * time.Second

// outageState follows the database's reachability from what the logs and the queries say: a
// record of a lost connection marks it down; a query that succeeds (a pgx.QueryTracer on the
// pool) marks it up. An outage that lasts past announceAfter, and that no supervisor reports, is
// logged once when it begins and once when it ends. Its zero value is ready once init has run.
type outageState struct {
	initOnce sync.Once
	base     slog.Handler // where its own lines go, past outageLog
	downFlag atomic.Bool  // read by every query

	mu         sync.Mutex
	down       bool
	since      time.Time
	endedAt    time.Time
	cause      string
	quieted    int  // records moved to debug level in this outage
	supervised bool // the supervisor reported this outage, and tells it
	announced  bool
	timer      *time.Timer
	monitor    server.DatabaseMonitor
}

func (s *outageState) init(base slog.Handler) { s.initOnce.Do(func() { s.base = base }) }

// watch makes s leave to the embedded cluster's supervisor the outages it reports.
func (s *outageState) watch(monitor server.DatabaseMonitor) {
	s.mu.Lock()
	s.monitor = monitor
	s.mu.Unlock()
}

// supervisorDown reports whether the supervisor says the database is down. s.mu is held.
func (s *outageState) supervisorDown() bool {
	if s.monitor == nil {
		return false
	}
	_, down := s.monitor.Outage()
	return down
}

// inOutage reports whether the database is down, as the logs or the supervisor say, or came back
// less than aftermath ago.
func (s *outageState) inOutage(aftermath time.Duration) bool {
	if s.downFlag.Load() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.supervisorDown() || (!s.endedAt.IsZero() && time.Since(s.endedAt) < aftermath)
}

// lost counts a record of a lost connection; the first of an outage starts it. Connections that
// still fail after the supervisor reported its postgres up again are an outage of their own.
func (s *outageState) lost(cause string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	supervised := s.supervisorDown()
	supervisorBack := s.supervised && !supervised
	if s.down && !supervisorBack {
		s.quieted++
		s.supervised = s.supervised || supervised
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.down, s.since, s.cause, s.quieted, s.supervised, s.announced = true, time.Now(), cause, 1, supervised, false
	s.downFlag.Store(true)
	s.timer = time.AfterFunc(announceAfter, s.announce)
}

// announce logs the outage, unless it is over or the supervisor reports it.
func (s *outageState) announce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down || s.announced || s.supervised {
		return
	}
	if s.supervisorDown() {
		s.supervised = true
		return
	}
	s.announced = true
	s.emit(slog.LevelWarn, "lost the connection to the database; until it answers again, the errors this causes are logged at debug level",
		slog.Time("since", s.since), slog.String("err", s.cause))
}

// answered marks the database up after a query succeeded, and logs the end of an outage that was
// logged.
func (s *outageState) answered() {
	if !s.downFlag.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down {
		return
	}
	s.down, s.endedAt = false, time.Now()
	s.downFlag.Store(false)
	s.timer.Stop()
	if s.announced {
		s.emit(slog.LevelWarn, "the database answers again", slog.Duration("down_for", time.Since(s.since).Round(time.Millisecond)),
			slog.Int("errors_at_debug", s.quieted))
	}
}

func (s *outageState) emit(level slog.Level, msg string, attrs ...slog.Attr) {
	if s.base == nil || !s.base.Enabled(context.Background(), level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = s.base.Handle(context.Background(), r)
}

// TraceQueryStart implements pgx.QueryTracer.
func (s *outageState) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer: a query that succeeded shows the database answers.
func (s *outageState) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err == nil {
		s.answered()
	}
}
