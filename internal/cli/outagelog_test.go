package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// loudLines are the lines of a devui log at warn level or above.
func loudLines(log string) []string {
	var loud []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, " level=WARN ") || strings.Contains(line, " level=ERROR ") {
			loud = append(loud, line)
		}
	}
	return loud
}

// TestFivePostmasterOutagesLogAFewLinesEach runs the real devui binary on its embedded cluster
// under a little load (a run in flight, and a client that starts runs and lists them throughout),
// SIGKILLs the postmaster five times, each time waiting until devui is ready again and a new run
// succeeds, and counts the log lines at warn level or above: an outage is told in two lines, one
// for the outage (the supervisor's "exited unexpectedly", the only ERROR) and one for the recovery
// ("restarted"), not in the hundreds of errors that River, the live hub, the recorder and the
// request log each made of it (1,376 ERROR lines for five outages); the rest is at debug level.
func TestFivePostmasterOutagesLogAFewLinesEach(t *testing.T) {
	t.Parallel()
	const (
		outages      = 5
		perOutage    = 2 // the outage and the recovery
		baselineMost = 2
	)
	p := serveDevui(t, buildDevui(t), newDataDir(t))
	p.waitReady(t, 2*time.Minute)
	baseline := len(loudLines(p.log.String()))
	require.LessOrEqual(t, baseline, baselineMost, "a clean start is quiet:\n%s", strings.Join(loudLines(p.log.String()), "\n"))

	// The load: a client that starts a short run and lists runs every 100 ms, outage or not.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := &http.Client{Timeout: 5 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if resp, err := client.Post(p.url+"/api/v1/runs", "application/json", strings.NewReader(`{"action":"/flow/countdown","input":{"from":2}}`)); err == nil {
				resp.Body.Close()
			}
			if resp, err := client.Get(p.url + "/api/v1/runs"); err == nil {
				resp.Body.Close()
			}
		}
	}()
	var once sync.Once
	stopLoad := func() { once.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(stopLoad)

	for i := 1; i <= outages; i++ {
		before := len(loudLines(p.log.String()))
		inFlight := p.startRun(t, 10)
		crashed := p.postmasterPID(t)
		require.NoError(t, syscall.Kill(crashed, syscall.SIGKILL))
		eventually(t, time.Minute, fmt.Sprintf("outage %d: a new postmaster", i), func() (bool, string) {
			pid := p.postmasterPIDIfAny()
			return pid != 0 && pid != crashed, fmt.Sprintf("postmaster %d", pid)
		})
		p.waitReady(t, 2*time.Minute)
		p.waitRunSucceeded(t, inFlight, 2*time.Minute)
		p.waitRunSucceeded(t, p.startRun(t, 2), time.Minute)
		loud := loudLines(p.log.String())[before:]
		t.Logf("outage %d: %d lines at warn or above", i, len(loud))
		require.LessOrEqual(t, len(loud), perOutage, "outage %d is told in a line for the outage and one for the recovery:\n%s", i, strings.Join(loud, "\n"))
	}

	stopLoad()
	p.interrupt(t)
	log := p.log.String()
	loud := loudLines(log)
	require.LessOrEqual(t, len(loud), baseline+perOutage*outages, "five outages:\n%s", strings.Join(loud, "\n"))
	require.Len(t, regexp.MustCompile(`level=ERROR msg="embedded PostgreSQL exited unexpectedly; restarting it"`).FindAllString(log, -1), outages)
	require.Equal(t, outages, strings.Count(log, " level=ERROR "), "the outages' own lines are the only errors:\n%s", strings.Join(loud, "\n"))
	require.Len(t, regexp.MustCompile(`msg="embedded PostgreSQL restarted"`).FindAllString(log, -1), outages)
}

// outageLogSetup is an outageLog at debug level over a text handler that writes to a buffer.
type outageLogSetup struct {
	out     *syncBuffer
	state   *outageState
	log     *slog.Logger
	monitor *fakeMonitor
}

func newOutageLogSetup(t *testing.T) *outageLogSetup {
	t.Helper()
	s := &outageLogSetup{out: &syncBuffer{}, state: &outageState{}, monitor: &fakeMonitor{}}
	base := slog.NewTextHandler(s.out, &slog.HandlerOptions{Level: slog.LevelDebug})
	s.state.init(base)
	s.log = slog.New(&outageLog{next: base, state: s.state})
	t.Cleanup(func() { s.state.answered() }) // stops the announce timer
	return s
}

// fakeMonitor is a supervisor that reports an outage while down is set.
type fakeMonitor struct{ down atomic.Bool }

func (m *fakeMonitor) Outage() (string, bool) { return "down since just now", m.down.Load() }

// TestOutageLogMovesLostConnectionErrorsToDebugOnly logs, at error level, a lost connection
// (SQLSTATE 57P01, a failed connect as River words it) and errors that are not one (a unique
// violation, a plain error, River's text of a failed statement): only the lost connections go to
// debug level. A 503 request line, and River's completer giving up, stay at error level unless the
// database is down (and so does its elector stepping down for want of a reelection); River's other errors without an error attribute stay there regardless.
func TestOutageLogMovesLostConnectionErrorsToDebugOnly(t *testing.T) {
	t.Parallel()
	s := newOutageLogSetup(t)
	river := s.log.With("component", "river")

	s.log.Error("request", "status", 503)
	s.log.Error("insert run", "err", fmt.Errorf("insert run: %w", &pgconn.PgError{Code: "23505", Message: "duplicate key"}))
	s.log.Warn("announce actions", "err", errors.New("no such program"))
	river.Error("producer: Error fetching jobs", "err", `ERROR: relation "river_job" does not exist (SQLSTATE 42P01)`)
	s.log.Error("recovery sweep", "err", fmt.Errorf("list orphaned runs: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}))
	river.Error("producer: Error fetching jobs", "err", "failed to connect to `user=loupe database=loupe`: dial error: connect: connection refused")
	s.log.Error("request", "status", 503, "path", "/readyz")
	river.Error("jobcompleter.BatchCompleter: Too many errors; giving up")
	river.Warn("leadership.Elector: Current leader stepping down because the reelection deadline elapsed")
	river.Error("maintenance.JobRescuer: Attempted to rescue unhandled job kind, discarding", "job_kind", "gone")

	lines := strings.Split(strings.TrimSpace(s.out.String()), "\n")
	require.Len(t, lines, 10, s.out.String())
	for i, want := range []string{
		`level=ERROR msg=request status=503`,
		`level=ERROR msg="insert run"`,
		`level=WARN msg="announce actions"`,
		`level=ERROR msg="producer: Error fetching jobs" component=river err="ERROR: relation`,
		`level=DEBUG msg="recovery sweep"`,
		`level=DEBUG msg="producer: Error fetching jobs" component=river err="failed to connect`,
		`level=DEBUG msg=request status=503 path=/readyz`, // the database is down now
		`level=DEBUG msg="jobcompleter.BatchCompleter: Too many errors; giving up"`,
		`level=DEBUG msg="leadership.Elector: Current leader stepping down because the reelection deadline elapsed"`,
		`level=ERROR msg="maintenance.JobRescuer: Attempted to rescue unhandled job kind`,
	} {
		require.Contains(t, lines[i], want)
	}
}

// TestOutageLogAnnouncesAnOutageNoSupervisorReports loses the connection with no supervisor
// watching: once announceAfter has passed, one warning says so, and the first query that succeeds
// ends it with a second. With the supervisor reporting the outage, there is neither (its own lines
// tell it), unless connections still fail after it reported its postgres back.
func TestOutageLogAnnouncesAnOutageNoSupervisorReports(t *testing.T) {
	t.Parallel()
	lostErr := &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}

	t.Run("unsupervised", func(t *testing.T) {
		t.Parallel()
		s := newOutageLogSetup(t)
		s.log.Error("live: NOTIFY failed", "err", lostErr)
		s.log.Error("recovery sweep", "err", lostErr)
		eventually(t, announceAfter+5*time.Second, "the outage is announced", func() (bool, string) {
			return strings.Contains(s.out.String(), `level=WARN msg="lost the connection to the database`), s.out.String()
		})
		s.state.TraceQueryEnd(context.Background(), nil, pgx.TraceQueryEndData{})
		require.Contains(t, s.out.String(), `level=WARN msg="the database answers again"`)
		require.Contains(t, s.out.String(), `errors_at_debug=2`)
		require.Len(t, loudLines(s.out.String()), 2, s.out.String())
	})

	t.Run("supervised", func(t *testing.T) {
		t.Parallel()
		s := newOutageLogSetup(t)
		s.state.watch(s.monitor)
		s.monitor.down.Store(true)
		s.log.Error("live: NOTIFY failed", "err", lostErr)
		s.state.announce() // as its timer does
		s.monitor.down.Store(false)
		s.state.TraceQueryEnd(context.Background(), nil, pgx.TraceQueryEndData{})
		require.Empty(t, loudLines(s.out.String()), s.out.String())
	})

	// Connections that still fail once the supervisor's postgres is back are not its outage.
	t.Run("failing after the supervisor's restart", func(t *testing.T) {
		t.Parallel()
		s := newOutageLogSetup(t)
		s.state.watch(s.monitor)
		s.monitor.down.Store(true)
		s.log.Error("live: NOTIFY failed", "err", lostErr)
		s.monitor.down.Store(false)
		s.log.Error("recovery sweep", "err", lostErr)
		s.state.announce()
		require.Contains(t, s.out.String(), `level=WARN msg="lost the connection to the database`)
	})
}

// TestOutageLogMovesABareEOFToDebugOnlyInAnOutage: a backend ended without a word leaves its
// client a bare socket error ("unexpected EOF"), which says nothing of the database by its type.
// While the supervisor reports the database down it is the outage's, and goes to debug level;
// otherwise it is an error like any other.
func TestOutageLogMovesABareEOFToDebugOnlyInAnOutage(t *testing.T) {
	t.Parallel()
	s := newOutageLogSetup(t)
	s.state.watch(s.monitor)
	s.log.Warn("span export failed; will retry", "err", fmt.Errorf("ingest 38 spans: %w", io.ErrUnexpectedEOF))
	s.monitor.down.Store(true)
	s.log.Warn("span export failed; will retry", "err", fmt.Errorf("ingest 38 spans: %w", io.ErrUnexpectedEOF))
	s.log.Error("request failed", "err", errors.New("list runs: unexpected EOF"))
	lines := strings.Split(strings.TrimSpace(s.out.String()), "\n")
	require.Len(t, lines, 3, s.out.String())
	require.Contains(t, lines[0], `level=WARN msg="span export failed; will retry"`)
	require.Contains(t, lines[1], `level=DEBUG msg="span export failed; will retry"`)
	require.Contains(t, lines[2], `level=DEBUG msg="request failed"`)
}
