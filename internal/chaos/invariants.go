package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// violation is one broken invariant. kind, run and subject identify it across checks (each
// check looks at every run so far); detail says what the database shows.
type violation struct {
	kind, run, subject, detail string
}

func (v violation) id() string { return v.kind + "|" + v.run + "|" + v.subject }

func (v violation) String() string {
	return fmt.Sprintf("%s: run %s: %s", v.kind, v.run, v.detail)
}

// totals is a finished run's status, token usage and outcome (normalised: normaliseOutcome); a
// clean run's are the reference.
type totals struct {
	run                    string
	status                 string
	inputTokens, outTokens int64
	outcome                string
}

// checker checks the invariants from the database and the effects log.
type checker struct {
	pool      *pgxpool.Pool
	effects   string        // the demo tools' effects log
	tolerance time.Duration // clock tolerance between the processes and the database

	acks *acknowledged // what the API acknowledged; nil checks nothing of it
	// jobBound is how long after its run settled (or after its last attempt, when that is later)
	// a run's River job may still be running: the README's bound for the job of a dead worker,
	// twice the lease TTL and a sweep, with room for one more sweep. Zero checks no job.
	jobBound time.Duration
	// lastOutageEnd is when the latest postmaster outage that ended after a time ended (the
	// cluster's); nil for none. A job's bound then runs from the end of that outage: the sweep
	// that finalizes it could not run while the database was down (CI saw a job finalized 5.42 s
	// after its run settled, with a 2 s outage in between, against a bound of 5.33 s).
	lastOutageEnd func(from time.Time) (time.Time, bool)

	mu       sync.Mutex
	baseline map[string]totals // by runKey
	seen     map[string]bool   // violations reported already
}

func newChecker(pool *pgxpool.Pool, effects string, tolerance time.Duration) *checker {
	return &checker{pool: pool, effects: effects, tolerance: tolerance, baseline: map[string]totals{}, seen: map[string]bool{}}
}

// instrumentSQL keeps the history the ledger overwrites, in the throwaway database only: every
// time a tool call is completed, with the lease epoch of the execution that completed it (a
// completed call re-executed and completed again would otherwise leave only its last finish);
// every intent to run a tool call (a row written as started), with the epoch of the execution
// that wrote it and the time its transaction was committing (a deferred constraint trigger fires
// at COMMIT, so a tool that acted before that time acted on an intent not yet durable); every
// acquisition of a run's lease, when it happened; and every change to a run that had finished.
const instrumentSQL = `
CREATE TABLE chaos_intents (key text NOT NULL, run_id uuid NOT NULL, epoch bigint NOT NULL, at timestamptz NOT NULL);
CREATE FUNCTION chaos_note_intent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO chaos_intents VALUES (NEW.idempotency_key, NEW.run_id,
		(SELECT lease_epoch FROM runs WHERE id = NEW.run_id), clock_timestamp());
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER chaos_intents AFTER INSERT OR UPDATE ON tool_calls DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW WHEN (NEW.status = 'started') EXECUTE FUNCTION chaos_note_intent();

CREATE TABLE chaos_completions (key text NOT NULL, run_id uuid NOT NULL, tool text NOT NULL, source text NOT NULL,
	finished_at timestamptz NOT NULL, epoch bigint NOT NULL);
CREATE FUNCTION chaos_note_completion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO chaos_completions VALUES (NEW.idempotency_key, NEW.run_id, NEW.tool, NEW.source, NEW.finished_at,
		(SELECT lease_epoch FROM runs WHERE id = NEW.run_id));
	RETURN NULL;
END $$;
CREATE TRIGGER chaos_completions AFTER INSERT OR UPDATE ON tool_calls
	FOR EACH ROW WHEN (NEW.status = 'completed') EXECUTE FUNCTION chaos_note_completion();

CREATE TABLE chaos_leases (run_id uuid NOT NULL, epoch bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION chaos_note_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO chaos_leases (run_id, epoch) VALUES (NEW.id, NEW.lease_epoch);
	RETURN NULL;
END $$;
CREATE TRIGGER chaos_leases_acquired AFTER UPDATE ON runs FOR EACH ROW
	WHEN (NEW.lease_epoch IS DISTINCT FROM OLD.lease_epoch) EXECUTE FUNCTION chaos_note_lease();
CREATE TRIGGER chaos_leases_started AFTER INSERT ON runs FOR EACH ROW
	WHEN (NEW.lease_epoch > 0) EXECUTE FUNCTION chaos_note_lease();

CREATE TABLE chaos_reopened (run_id uuid NOT NULL, old_status text NOT NULL, new_status text NOT NULL,
	old_finished_at timestamptz, new_finished_at timestamptz, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION chaos_note_reopen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO chaos_reopened (run_id, old_status, new_status, old_finished_at, new_finished_at)
		VALUES (NEW.id, OLD.status, NEW.status, OLD.finished_at, NEW.finished_at);
	RETURN NULL;
END $$;
CREATE TRIGGER chaos_reopened AFTER UPDATE ON runs FOR EACH ROW
	WHEN (OLD.status IN ('succeeded', 'failed', 'aborted', 'cancelled')
		AND (NEW.status IS DISTINCT FROM OLD.status OR NEW.finished_at IS DISTINCT FROM OLD.finished_at))
	EXECUTE FUNCTION chaos_note_reopen();
`

// instrument installs instrumentSQL, once the serve has migrated the database.
func (c *checker) instrument(ctx context.Context) error {
	if _, err := c.pool.Exec(ctx, instrumentSQL); err != nil {
		return fmt.Errorf("instrument the database: %w", err)
	}
	return nil
}

// finalStatuses are the statuses a run ends in.
const finalStatuses = `('succeeded', 'failed', 'aborted', 'cancelled')`

// runKeySQL is a run's action, input and reviewers' decisions (in interrupt order): runs with the
// same key must end as the same clean run did.
const runKeySQL = `r.action || ' ' || r.input::text || ' [' || coalesce((SELECT string_agg(i.status, ',' ORDER BY i.turn, i.round, i.ref)
	FROM interrupts i WHERE i.run_id = r.id), '') || ']'`

type finishedRun struct {
	ID      string
	Key     string
	Status  string
	In      int64
	Out     int64
	Outcome string
}

func (c *checker) finishedRuns(ctx context.Context, ids []string) ([]finishedRun, error) {
	q := `SELECT r.id::text, ` + runKeySQL + `, r.status, r.input_tokens, r.output_tokens, ` + outcomeSQL + ` FROM runs r
		WHERE r.status IN ` + finalStatuses
	args := []any{}
	if ids != nil {
		q += ` AND r.id::text = ANY($1)`
		args = append(args, ids)
	}
	rows, err := c.pool.Query(ctx, q+` ORDER BY r.created_at`, args...)
	if err != nil {
		return nil, fmt.Errorf("finished runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[finishedRun])
	if err != nil {
		return nil, fmt.Errorf("finished runs: %w", err)
	}
	for i := range runs {
		runs[i].Outcome = normaliseOutcome(runs[i].Outcome)
	}
	return runs, nil
}

// recordBaseline keeps the outcomes of the clean runs ids as the reference. Two clean runs of
// one key that disagree are a violation already.
func (c *checker) recordBaseline(ctx context.Context, ids []string) ([]violation, error) {
	runs, err := c.finishedRuns(ctx, ids)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []violation
	for _, r := range runs {
		t := totals{run: r.ID, status: r.Status, inputTokens: r.In, outTokens: r.Out, outcome: r.Outcome}
		b, ok := c.baseline[r.Key]
		switch {
		case !ok:
			c.baseline[r.Key] = t
		case b.status != t.status || b.inputTokens != t.inputTokens || b.outTokens != t.outTokens:
			out = append(out, violation{"clean runs disagree", r.ID, "", fmt.Sprintf("%s: %s with %d/%d tokens, clean run %s %s with %d/%d",
				r.Key, t.status, t.inputTokens, t.outTokens, b.run, b.status, b.inputTokens, b.outTokens)})
		case b.outcome != t.outcome:
			out = append(out, violation{"clean runs disagree", r.ID, "", fmt.Sprintf("%s: %s; clean run %s",
				r.Key, outcomeDiff(t.outcome, b.outcome), b.run)})
		}
	}
	if len(runs) != len(ids) {
		out = append(out, violation{"clean runs unfinished", "-", "", fmt.Sprintf("%d of %d clean runs finished", len(runs), len(ids))})
	}
	return out, nil
}

// report is what one check found.
type report struct {
	runs           int
	byStatus       map[string]int
	executions     int         // tool starts in the effects log
	reexecutions   int         // starts of a call beyond its first: in flight at a crash
	lateActs       int         // starts after the call was completed, by an execution admitted before it lost the run
	superseded     int         // results refused because their execution had lost the run
	supersededLate int         // of which arrived after the run had finished
	tornLines      int         // effects-log lines that are not whole: each a violation
	tornTail       int         // 1 when the effects log ended in a line still being written
	ackedRuns      int         // runs the API answered 201 for
	ackedDecisions int         // decisions the API answered 200 for
	violations     []violation // every violation found
	fresh          []violation // those not reported by an earlier check
}

// check checks every run in the database.
func (c *checker) check(ctx context.Context) (*report, error) {
	r := &report{byStatus: map[string]int{}}
	steps := []func(context.Context, *report) error{
		c.countRuns, c.checkSettled, c.checkFailed, c.checkTotals, c.checkEffects,
		c.checkReopened, c.checkWritesAfterFinish, c.checkInterruptRows, c.checkAcknowledged, c.checkJobs,
	}
	for _, step := range steps {
		if err := step(ctx, r); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range r.violations {
		if !c.seen[v.id()] {
			c.seen[v.id()] = true
			r.fresh = append(r.fresh, v)
		}
	}
	return r, nil
}

func (c *checker) countRuns(ctx context.Context, r *report) error {
	rows, err := c.pool.Query(ctx, `SELECT status, count(*)::int FROM runs GROUP BY status`)
	if err != nil {
		return fmt.Errorf("count runs: %w", err)
	}
	type count struct {
		Status string
		N      int
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
	if err != nil {
		return fmt.Errorf("count runs: %w", err)
	}
	for _, s := range list {
		r.byStatus[s.Status] = s.N
		r.runs += s.N
	}
	return c.pool.QueryRow(ctx, `SELECT count(*)::int, count(*) FILTER (WHERE s.finished_at > r.finished_at)::int
		FROM superseded_tool_calls s JOIN runs r ON r.id = s.run_id`).Scan(&r.superseded, &r.supersededLate)
}

// checkSettled: every run is final, or interrupted with a pending interrupt; none is stuck
// queued or running.
func (c *checker) checkSettled(ctx context.Context, r *report) error {
	rows, err := c.pool.Query(ctx, `SELECT r.id::text, r.action, r.status,
			(SELECT count(*)::int FROM interrupts i WHERE i.run_id = r.id AND i.status = 'pending'),
			r.lease_epoch, coalesce(r.lease_owner, ''), coalesce(to_char(r.lease_expires_at, 'HH24:MI:SS.MS'), ''),
			to_char(r.updated_at, 'HH24:MI:SS.MS'),
			coalesce((SELECT string_agg(j.state::text || ' attempt ' || j.attempt || ' at ' || to_char(j.scheduled_at, 'HH24:MI:SS'), ', ')
				FROM river_job j WHERE j.kind = 'loupe.run' AND j.args->>'run_id' = r.id::text), '')
		FROM runs r WHERE r.status IN ('queued', 'running', 'interrupted')`)
	if err != nil {
		return fmt.Errorf("unfinished runs: %w", err)
	}
	type unfinished struct {
		ID, Action, Status string
		Pending            int
		Epoch              int64
		Owner, Expires     string
		Updated, Jobs      string
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[unfinished])
	if err != nil {
		return fmt.Errorf("unfinished runs: %w", err)
	}
	for _, u := range list {
		switch {
		case u.Status == "interrupted" && u.Pending == 0:
			r.violations = append(r.violations, violation{"interrupted without a pending interrupt", u.ID, "",
				fmt.Sprintf("%s is interrupted, but none of its interrupts is pending: nothing will resume it", u.Action)})
		case u.Status != "interrupted":
			r.violations = append(r.violations, violation{"stuck", u.ID, "", fmt.Sprintf(
				"%s still %s after the settle bound (lease epoch %d, owner %q, expires %s, updated %s; jobs: %s)",
				u.Action, u.Status, u.Epoch, u.Owner, u.Expires, u.Updated, u.Jobs)})
		}
	}
	return nil
}

// checkFailed: no run fails; the demo inputs cannot fail in a clean run.
func (c *checker) checkFailed(ctx context.Context, r *report) error {
	rows, err := c.pool.Query(ctx, `SELECT id::text, action, coalesce(error::text, '') FROM runs WHERE status = 'failed'`)
	if err != nil {
		return fmt.Errorf("failed runs: %w", err)
	}
	type failed struct{ ID, Action, Error string }
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[failed])
	if err != nil {
		return fmt.Errorf("failed runs: %w", err)
	}
	for _, f := range list {
		r.violations = append(r.violations, violation{"failed", f.ID, "", f.Action + " failed: " + f.Error})
	}
	return nil
}

// checkTotals: every finished run ends as the clean run of its action, input and decisions did,
// with the same token totals, and the same output, tool calls (status, output, error) and history
// but for its own ids, timestamps and confirmations (normaliseOutcome).
func (c *checker) checkTotals(ctx context.Context, r *report) error {
	runs, err := c.finishedRuns(ctx, nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, run := range runs {
		if run.Status == "failed" {
			continue // checkFailed reports it
		}
		b, ok := c.baseline[run.Key]
		switch {
		case !ok:
			r.violations = append(r.violations, violation{"no clean run to compare with", run.ID, "", fmt.Sprintf(
				"%s %s: no clean run has this action, input and these decisions (a decision repeated or missing?)", run.Key, run.Status)})
		case b.status != run.Status:
			r.violations = append(r.violations, violation{"outcome differs from the clean run", run.ID, "", fmt.Sprintf(
				"%s ended %s; clean run %s ended %s", run.Key, run.Status, b.run, b.status)})
		case b.inputTokens != run.In || b.outTokens != run.Out:
			r.violations = append(r.violations, violation{"token totals differ from the clean run", run.ID, "", fmt.Sprintf(
				"%s: %d input / %d output tokens; clean run %s: %d / %d", run.Key, run.In, run.Out, b.run, b.inputTokens, b.outTokens)})
		case b.outcome != run.Outcome:
			r.violations = append(r.violations, violation{"outcome differs from the clean run", run.ID, "outcome", fmt.Sprintf(
				"%s: %s (clean run %s)", run.Key, outcomeDiff(run.Outcome, b.outcome), b.run)})
		}
	}
	return nil
}

// effectLine is one line of the demo tools' effects log (internal/demo/effects.go).
type effectLine struct {
	Key      string `json:"key"`
	Tool     string `json:"tool"`
	Event    string `json:"event"`
	At       int64  `json:"at"`
	PID      int    `json:"pid"`
	Epoch    int64  `json:"epoch"`    // the lease epoch of the execution that dispatched the call
	Admitted int64  `json:"admitted"` // when that execution last knew it held the run
}

// effectsLog is the effects log as read: its lines, the lines that could not be read, and
// whether it ends in a line still being written.
type effectsLog struct {
	lines []effectLine
	torn  []tornLine
	tail  bool // the last bytes have no newline yet
}

// tornLine is a line of the effects log that is not one whole JSON line, at its byte offset.
type tornLine struct {
	offset int64
	text   string
}

// readEffects reads the effects log. Each line is one write(2) of an O_APPEND file, so whole lines
// never interleave. The last bytes, when they have no newline yet, are a write under way as the
// log is read, or the last write of a process killed in the middle of it: they are counted (tail)
// and read again by the next check. A line with its newline that does not parse is torn: a
// process killed mid-write left a fragment and another appended after it. That fragment is a tool
// start or end the checks cannot see (a re-execution could hide in it), so checkEffects reports
// it as a violation. A whole line glued after the fragment is recovered.
func (c *checker) readEffects() (*effectsLog, error) {
	data, err := os.ReadFile(c.effects)
	if errors.Is(err, os.ErrNotExist) {
		return &effectsLog{}, nil
	}
	if err != nil {
		return nil, err
	}
	log := &effectsLog{}
	var offset int64
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			log.tail = true
			break
		}
		line := data[:i]
		data = data[i+1:]
		at := offset
		offset += int64(i) + 1
		var l effectLine
		if json.Unmarshal(line, &l) == nil {
			log.lines = append(log.lines, l)
			continue
		}
		if j := bytes.LastIndex(line, []byte(`{"key":`)); j > 0 && json.Unmarshal(line[j:], &l) == nil {
			log.lines = append(log.lines, l)
			line = line[:j]
		}
		log.torn = append(log.torn, tornLine{offset: at, text: string(line)})
	}
	return log, nil
}

// leaseHistory is every acquisition of each run's lease, by run and epoch.
type leaseHistory map[string]map[int64]time.Time

func (c *checker) leaseHistory(ctx context.Context) (leaseHistory, error) {
	rows, err := c.pool.Query(ctx, `SELECT run_id::text, epoch, min(at) FROM chaos_leases GROUP BY run_id, epoch`)
	if err != nil {
		return nil, fmt.Errorf("lease acquisitions: %w", err)
	}
	type acquisition struct {
		Run   string
		Epoch int64
		At    time.Time
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[acquisition])
	if err != nil {
		return nil, fmt.Errorf("lease acquisitions: %w", err)
	}
	h := leaseHistory{}
	for _, a := range list {
		if h[a.Run] == nil {
			h[a.Run] = map[int64]time.Time{}
		}
		h[a.Run][a.Epoch] = a.At
	}
	return h, nil
}

// lostAt is when an execution of run with epoch lost it: the first acquisition of a later epoch.
func (h leaseHistory) lostAt(run string, epoch int64) (time.Time, int64, bool) {
	var at time.Time
	var by int64
	for e, t := range h[run] {
		if e > epoch && (by == 0 || e < by) {
			at, by = t, e
		}
	}
	return at, by, by != 0
}

// intentHistory is, for each tool call (by idempotency key) and each execution (by lease epoch)
// that wrote its intent, when the first such intent was committing.
type intentHistory map[string]map[int64]time.Time

func (c *checker) intentHistory(ctx context.Context) (intentHistory, error) {
	rows, err := c.pool.Query(ctx, `SELECT key, epoch, min(at) FROM chaos_intents GROUP BY key, epoch`)
	if err != nil {
		return nil, fmt.Errorf("tool call intents: %w", err)
	}
	type intent struct {
		Key   string
		Epoch int64
		At    time.Time
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[intent])
	if err != nil {
		return nil, fmt.Errorf("tool call intents: %w", err)
	}
	h := intentHistory{}
	for _, i := range list {
		if h[i.Key] == nil {
			h[i.Key] = map[int64]time.Time{}
		}
		h[i.Key][i.Epoch] = i.At
	}
	return h, nil
}

// checkEffects, from the effects log and the ledger:
//   - the effects log has no torn line (see readEffects);
//   - every tool that acted was dispatched by a durable execution's lease check (its admission),
//     made before any other execution took the run over, under a lease epoch the run had;
//   - one execution (one lease epoch) starts a tool call at most once: a re-execution is a later
//     execution's, after the one before lost the run;
//   - a tool call the ledger completed (by running it, or by a reviewer's answer) was never
//     dispatched again: no start after the first completion by the execution that completed it or
//     by a later one. A start after it by an earlier execution is a late act: admitted while that
//     execution held the run, the process paused before the tool acted (SIGSTOP just after the
//     check); it carries the same idempotency key, and its result is superseded. They are counted;
//   - every tool that acted had its intent in the ledger, written by the execution that acted and
//     committed before it acted; every call the ledger holds as completed by running acted.
func (c *checker) checkEffects(ctx context.Context, r *report) error {
	log, err := c.readEffects()
	if err != nil {
		return fmt.Errorf("effects log: %w", err)
	}
	r.tornLines = len(log.torn)
	if log.tail {
		r.tornTail = 1
	}
	for _, t := range log.torn {
		r.violations = append(r.violations, violation{"torn effects-log line", "-", fmt.Sprint(t.offset), fmt.Sprintf(
			"the effects log has an unreadable line at byte %d, %q: a tool start or end the checks cannot see", t.offset, clip(t.text, 160))})
	}
	leases, err := c.leaseHistory(ctx)
	if err != nil {
		return err
	}
	intents, err := c.intentHistory(ctx)
	if err != nil {
		return err
	}
	rows, err := c.pool.Query(ctx, `SELECT idempotency_key, run_id::text, tool, status, source, finished_at FROM tool_calls`)
	if err != nil {
		return fmt.Errorf("tool calls: %w", err)
	}
	type call struct {
		Key, Run, Tool, Status, Source string
		FinishedAt                     *time.Time
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[call])
	if err != nil {
		return fmt.Errorf("tool calls: %w", err)
	}
	ledger := map[string]bool{}
	for _, tc := range calls {
		ledger[tc.Key] = true
	}
	starts := map[string][]effectLine{}
	for _, l := range log.lines {
		if l.Event != "start" {
			continue
		}
		earlier := starts[l.Key]
		starts[l.Key] = append(earlier, l)
		r.executions++
		run, at := runOf(l.Key), time.Unix(0, l.At)
		subject := l.Key + fmt.Sprint(l.At)
		if l.Epoch == 0 {
			r.violations = append(r.violations, violation{"acted without admission", run, subject, fmt.Sprintf(
				"%s (%s) started at %s in pid %d with no lease check of a durable execution before it", l.Tool, l.Key, stamp(at), l.PID)})
			continue
		}
		if _, ok := leases[run][l.Epoch]; !ok {
			r.violations = append(r.violations, violation{"acted under a lease epoch the run never had", run, subject, fmt.Sprintf(
				"%s (%s) started at %s in pid %d under lease epoch %d, which the run's lease never had", l.Tool, l.Key, stamp(at), l.PID, l.Epoch)})
		}
		for _, e := range earlier {
			if e.Epoch == l.Epoch {
				r.violations = append(r.violations, violation{"executed twice by one execution", run, subject, fmt.Sprintf(
					"%s (%s) started at %s in pid %d and again at %s in pid %d, both by the execution of lease epoch %d",
					l.Tool, l.Key, stamp(time.Unix(0, e.At)), e.PID, stamp(at), l.PID, l.Epoch)})
				break
			}
		}
		if lost, by, ok := leases.lostAt(run, l.Epoch); ok && time.Unix(0, l.Admitted).After(lost.Add(c.tolerance)) {
			r.violations = append(r.violations, violation{"admitted after losing the run", run, subject, fmt.Sprintf(
				"%s (%s) was admitted at %s by the execution of lease epoch %d in pid %d, after epoch %d took the run over at %s",
				l.Tool, l.Key, stamp(time.Unix(0, l.Admitted)), l.Epoch, l.PID, by, stamp(lost))})
		}
		switch intent, ok := intents[l.Key][l.Epoch]; {
		case !ok && ledger[l.Key]:
			r.violations = append(r.violations, violation{"acted without an intent of its execution", run, subject, fmt.Sprintf(
				"%s (%s) started at %s in pid %d, but the execution of lease epoch %d never wrote its intent", l.Tool, l.Key, stamp(at), l.PID, l.Epoch)})
		case ok && intent.After(at.Add(c.tolerance)):
			r.violations = append(r.violations, violation{"acted before its intent was durable", run, subject, fmt.Sprintf(
				"%s (%s) started at %s in pid %d, %s before the intent of its execution (lease epoch %d) was committed at %s",
				l.Tool, l.Key, stamp(at), l.PID, intent.Sub(at).Round(time.Microsecond), l.Epoch, stamp(intent))})
		}
	}
	for _, ls := range starts {
		r.reexecutions += len(ls) - 1
	}
	// The first completion of each call, from the history the ledger overwrites, and the epoch
	// of the execution that completed it.
	rows, err = c.pool.Query(ctx, `SELECT DISTINCT ON (key) key, run_id::text, tool, finished_at, epoch
		FROM chaos_completions ORDER BY key, finished_at`)
	if err != nil {
		return fmt.Errorf("tool call completions: %w", err)
	}
	type completion struct {
		Key, Run, Tool string
		First          time.Time
		Epoch          int64
	}
	completions, err := pgx.CollectRows(rows, pgx.RowToStructByPos[completion])
	if err != nil {
		return fmt.Errorf("tool call completions: %w", err)
	}
	for _, tc := range completions {
		for _, l := range starts[tc.Key] {
			at := time.Unix(0, l.At)
			if !at.After(tc.First.Add(c.tolerance)) {
				continue
			}
			if l.Epoch != 0 && l.Epoch < tc.Epoch {
				r.lateActs++
				continue
			}
			r.violations = append(r.violations, violation{"completed tool call executed again", tc.Run, tc.Key + fmt.Sprint(l.At), fmt.Sprintf(
				"%s (%s) started at %s in pid %d (lease epoch %d), %s after the execution of epoch %d completed it at %s",
				tc.Tool, tc.Key, stamp(at), l.PID, l.Epoch, at.Sub(tc.First).Round(time.Microsecond), tc.Epoch, stamp(tc.First))})
		}
	}
	for _, tc := range calls {
		if tc.Status == "completed" && tc.Source != "reviewer" && len(starts[tc.Key]) == 0 {
			r.violations = append(r.violations, violation{"completed without acting", tc.Run, tc.Key, fmt.Sprintf(
				"the ledger holds %s (%s) as completed, but the tool never started", tc.Tool, tc.Key)})
		}
	}
	for key, ls := range starts {
		if !ledger[key] {
			r.violations = append(r.violations, violation{"acted without a ledger intent", runOf(key), key, fmt.Sprintf(
				"%s (%s) started %d times (first at %s in pid %d) but the ledger has no such call", ls[0].Tool, key, len(ls), stamp(time.Unix(0, ls[0].At)), ls[0].PID)})
		}
	}
	return nil
}

// clip shortens s to at most n bytes for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// checkReopened: a run that finished never changes its status or its finish again.
func (c *checker) checkReopened(ctx context.Context, r *report) error {
	rows, err := c.pool.Query(ctx, `SELECT run_id::text, old_status, new_status, coalesce(to_char(old_finished_at, 'HH24:MI:SS.US'), ''),
		coalesce(to_char(new_finished_at, 'HH24:MI:SS.US'), ''), at FROM chaos_reopened ORDER BY at`)
	if err != nil {
		return fmt.Errorf("reopened runs: %w", err)
	}
	type change struct {
		Run, Old, New, OldAt, NewAt string
		At                          time.Time
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[change])
	if err != nil {
		return fmt.Errorf("reopened runs: %w", err)
	}
	for _, ch := range list {
		r.violations = append(r.violations, violation{"finished run changed", ch.Run, fmt.Sprint(ch.At.UnixNano()), fmt.Sprintf(
			"at %s it went from %s (finished %s) to %s (finished %s)", stamp(ch.At), ch.Old, ch.OldAt, ch.New, ch.NewAt)})
	}
	return nil
}

// runOf is the run of an idempotency key, "<run id>:<ref>".
func runOf(key string) string {
	run, _, _ := strings.Cut(key, ":")
	return run
}

// checkWritesAfterFinish: nothing is written into a run after it finished, beyond the clock
// tolerance: no model call, tool call start or result, message, chunk or interrupt.
func (c *checker) checkWritesAfterFinish(ctx context.Context, r *report) error {
	rows, err := c.pool.Query(ctx, `SELECT r.id::text, w.what, w.at, r.finished_at FROM runs r
		JOIN LATERAL (
			SELECT 'model call of turn ' || m.turn AS what, m.created_at AS at FROM model_calls m WHERE m.run_id = r.id
			UNION ALL SELECT 'start of tool call ' || t.ref || ' (turn ' || t.turn || ')', t.started_at FROM tool_calls t WHERE t.run_id = r.id
			UNION ALL SELECT 'result of tool call ' || t.ref || ' (turn ' || t.turn || ')', t.finished_at FROM tool_calls t
				WHERE t.run_id = r.id AND t.finished_at IS NOT NULL
			UNION ALL SELECT 'message ' || m.seq, m.created_at FROM run_messages m WHERE m.run_id = r.id
			UNION ALL SELECT 'chunk ' || ch.seq, ch.created_at FROM run_chunks ch WHERE ch.run_id = r.id
			UNION ALL SELECT 'interrupt ' || i.ref || ' (turn ' || i.turn || ')', i.created_at FROM interrupts i WHERE i.run_id = r.id
		) w ON w.at > r.finished_at + $1::interval
		WHERE r.status IN `+finalStatuses, c.tolerance)
	if err != nil {
		return fmt.Errorf("writes after finish: %w", err)
	}
	type write struct {
		Run, What    string
		At, Finished time.Time
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[write])
	if err != nil {
		return fmt.Errorf("writes after finish: %w", err)
	}
	for _, w := range list {
		r.violations = append(r.violations, violation{"write into a finished run", w.Run, w.What, fmt.Sprintf(
			"%s written at %s, %s after the run finished at %s", w.What, stamp(w.At), w.At.Sub(w.Finished).Round(time.Microsecond), stamp(w.Finished))})
	}
	return nil
}

// checkJobs: no run's River job stays running once its run has settled: a job whose worker was
// killed, and which River itself never rescues, leaves running within jobBound of the later of its
// last attempt and its run's settling (issue 24 found 13 to 47 after a kill storm, minutes after
// every run had settled). A job is looked at only once that much time has passed; the harness
// waits for it before its last check.
func (c *checker) checkJobs(ctx context.Context, r *report) error {
	if c.jobBound <= 0 {
		return nil
	}
	rows, err := c.pool.Query(ctx, `SELECT r.id::text, j.id, r.status,
			coalesce(j.attempted_by[array_length(j.attempted_by, 1)], ''),
			to_char(j.attempted_at, 'HH24:MI:SS.MS'), to_char(r.updated_at, 'HH24:MI:SS.MS'),
			greatest(j.attempted_at, r.updated_at)
		FROM river_job j JOIN runs r ON r.id::text = j.args->>'run_id'
		WHERE j.kind = 'loupe.run' AND j.state = 'running' AND r.status <> 'running'
			AND greatest(j.attempted_at, r.updated_at) < now() - $1::interval
		ORDER BY j.id`, c.jobBound)
	if err != nil {
		return fmt.Errorf("jobs left running: %w", err)
	}
	type left struct {
		Run                string
		Job                int64
		Status, By         string
		Attempted, Settled string
		Since              time.Time
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[left])
	if err != nil {
		return fmt.Errorf("jobs left running: %w", err)
	}
	for _, j := range list {
		if c.lastOutageEnd != nil {
			if end, ok := c.lastOutageEnd(j.Since); ok && time.Since(end) < c.jobBound {
				continue // looked at again by a later check
			}
		}
		r.violations = append(r.violations, violation{"job left running", j.Run, fmt.Sprint(j.Job), fmt.Sprintf(
			"River job %d is still running, attempted by %q at %s, though its run is %s since %s, more than %s ago",
			j.Job, j.By, j.Attempted, j.Status, j.Settled, c.jobBound)})
	}
	return nil
}

// checkInterruptRows: every tool call of an interrupted run's last turn that the ledger holds as
// interrupted has its interrupt row.
func (c *checker) checkInterruptRows(ctx context.Context, r *report) error {
	rows, err := c.pool.Query(ctx, `SELECT t.run_id::text, t.turn, t.ref, t.tool FROM runs r JOIN tool_calls t ON t.run_id = r.id
		WHERE r.status = 'interrupted' AND t.status = 'interrupted'
			AND t.turn = (SELECT max(t2.turn) FROM tool_calls t2 WHERE t2.run_id = r.id)
			AND NOT EXISTS (SELECT 1 FROM interrupts i WHERE i.run_id = t.run_id AND i.turn = t.turn AND i.ref = t.ref)`)
	if err != nil {
		return fmt.Errorf("interrupt rows: %w", err)
	}
	type missing struct {
		Run       string
		Turn      int
		Ref, Tool string
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[missing])
	if err != nil {
		return fmt.Errorf("interrupt rows: %w", err)
	}
	for _, m := range list {
		r.violations = append(r.violations, violation{"interrupted tool call without an interrupt", m.Run, m.Ref, fmt.Sprintf(
			"%s (ref %s, turn %d) is interrupted in the ledger, but the run has no interrupt for it", m.Tool, m.Ref, m.Turn)})
	}
	return nil
}

func stamp(t time.Time) string { return t.Local().Format("15:04:05.000000") }

// sortViolations orders violations by kind, then run.
func sortViolations(vs []violation) {
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].kind != vs[j].kind {
			return vs[i].kind < vs[j].kind
		}
		return vs[i].run < vs[j].run
	})
}
