package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestCheckEffectsTellsALateActFromADispatchAgain runs the harness's effects check over a run
// whose lease changed hands while a call was in flight, with one effects-log start of each kind:
// in flight at the takeover, re-executed by the new execution, a late act of the old one (admitted
// before it lost the run, acting after the new one completed the call: counted, not a violation),
// a completed call started again by the execution that completed it (twice by one execution, too), a tool admitted by the old
// execution after it lost the run, and a start with no admission at all.
func TestCheckEffectsTellsALateActFromADispatchAgain(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	effects := filepath.Join(t.TempDir(), "effects.log")
	c := newChecker(pool, effects, 5*time.Millisecond)
	require.NoError(t, c.instrument(ctx))

	run := uuid.New()
	key := func(ref string) string { return run.String() + ":" + ref }
	exec := func(sql string, args ...any) time.Time {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
		at := time.Now()
		time.Sleep(30 * time.Millisecond) // well past the checker's clock tolerance
		return at
	}
	exec(`INSERT INTO runs (id, action) VALUES ($1, 'researchAgent')`, run)
	exec(`UPDATE runs SET status = 'running', lease_epoch = 1 WHERE id = $1`, run)
	admitted1 := time.Now()
	for _, ref := range []string{"a", "b", "c", "d", "e"} {
		exec(`INSERT INTO tool_calls (run_id, turn, ref, tool, idempotency_key) VALUES ($1, 0, $2, 'search', $3)`, run, ref, key(ref))
	}
	inFlight := time.Now()
	time.Sleep(30 * time.Millisecond)
	takeover := exec(`UPDATE runs SET lease_epoch = 2 WHERE id = $1`, run)
	exec(`UPDATE tool_calls SET status = 'started' WHERE run_id = $1 AND ref IN ('a', 'b', 'e')`, run) // epoch 2's intents
	admitted2 := time.Now()
	time.Sleep(30 * time.Millisecond)
	exec(`UPDATE tool_calls SET status = 'completed', source = 'reexecuted', finished_at = clock_timestamp()
		WHERE run_id = $1 AND ref IN ('a', 'b', 'e')`, run)
	after := time.Now()

	lines := []effectLine{
		{Key: key("a"), At: inFlight.UnixNano(), Epoch: 1, Admitted: admitted1.UnixNano()},                        // in flight at the takeover
		{Key: key("a"), At: admitted2.UnixNano(), Epoch: 2, Admitted: admitted2.UnixNano()},                       // re-executed by epoch 2
		{Key: key("e"), At: admitted2.UnixNano(), Epoch: 2, Admitted: admitted2.UnixNano()},                       // e's execution
		{Key: key("e"), At: after.UnixNano(), Epoch: 1, Admitted: admitted1.UnixNano()},                           // late act of epoch 1
		{Key: key("b"), At: admitted2.UnixNano(), Epoch: 2, Admitted: admitted2.UnixNano()},                       // b's execution
		{Key: key("b"), At: after.UnixNano(), Epoch: 2, Admitted: after.UnixNano()},                               // b dispatched again
		{Key: key("c"), At: after.UnixNano(), Epoch: 1, Admitted: takeover.Add(20 * time.Millisecond).UnixNano()}, // admitted after the takeover
		{Key: key("d"), At: after.UnixNano()},                                                                     // no admission
	}
	var data []byte
	for _, l := range lines {
		l.Tool, l.Event, l.PID = "search", "start", 42
		b, err := json.Marshal(l)
		require.NoError(t, err)
		data = append(append(data, b...), '\n')
	}
	require.NoError(t, os.WriteFile(effects, data, 0o644))

	r := &report{byStatus: map[string]int{}}
	require.NoError(t, c.checkEffects(ctx, r))
	var kinds []string
	for _, v := range r.violations {
		kinds = append(kinds, v.kind+" "+v.subject[len(run.String())+1:len(run.String())+2])
	}
	sort.Strings(kinds)
	require.Equal(t, []string{
		"acted without admission d",
		"admitted after losing the run c",
		"completed tool call executed again b",
		"executed twice by one execution b",
	}, kinds, "%v", r.violations)
	require.Equal(t, 1, r.lateActs, "e's start by epoch 1 after epoch 2 completed it")
	require.Equal(t, 8, r.executions)
	require.Equal(t, 3, r.reexecutions)
}

// TestWaitToolStartSeesAStartOfThePidAsTheDemoToolsWriteIt: the pause lands just after a tool of
// the paused worker starts, recognised from the effects log's lines whatever fields they carry.
func TestWaitToolStartSeesAStartOfThePidAsTheDemoToolsWriteIt(t *testing.T) {
	effects := filepath.Join(t.TempDir(), "effects.log")
	f, err := os.OpenFile(effects, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	c := &chaos{effects: effects}
	write := func(l effectLine) {
		b, err := json.Marshal(l)
		require.NoError(t, err)
		_, err = f.Write(append(b, '\n'))
		require.NoError(t, err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		write(effectLine{Key: "r:a", Tool: "search", Event: "start", PID: 7, Epoch: 1, Admitted: 1}) // another worker
		write(effectLine{Key: "r:a", Tool: "search", Event: "end", PID: 42, Epoch: 1, Admitted: 1})  // an end
		write(effectLine{Key: "r:b", Tool: "search", Event: "start", PID: 42, Epoch: 3, Admitted: 1})
	}()
	require.True(t, c.waitToolStart(context.Background(), 42, 5*time.Second))
	require.False(t, c.waitToolStart(context.Background(), 42, 100*time.Millisecond), "no new start")
}

// checkerBundle is a checker on a fresh instrumented database, with its effects log.
type checkerBundle struct {
	ctx     context.Context
	pool    *pgxpool.Pool
	c       *checker
	effects string
}

func setup(t *testing.T) *checkerBundle {
	t.Helper()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	effects := filepath.Join(t.TempDir(), "effects.log")
	c := newChecker(pool, effects, 5*time.Millisecond)
	require.NoError(t, c.instrument(ctx))
	return &checkerBundle{ctx: ctx, pool: pool, c: c, effects: effects}
}

// exec runs one statement in its own transaction and returns when it had committed, a little
// past the checker's clock tolerance.
func (b *checkerBundle) exec(t *testing.T, sql string, args ...any) time.Time {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(t, err)
	at := time.Now()
	time.Sleep(20 * time.Millisecond)
	return at
}

// writeEffects writes lines as the demo tools do, one JSON line each, starts of "search" by pid 42.
func (b *checkerBundle) writeEffects(t *testing.T, lines ...effectLine) {
	t.Helper()
	var data []byte
	for _, l := range lines {
		l.Tool, l.PID = "search", 42
		if l.Event == "" {
			l.Event = "start"
		}
		line, err := json.Marshal(l)
		require.NoError(t, err)
		data = append(append(data, line...), '\n')
	}
	require.NoError(t, os.WriteFile(b.effects, data, 0o644))
}

// effectViolations runs checkEffects and returns its report and the kinds of its violations.
func (b *checkerBundle) effectViolations(t *testing.T) (*report, []string) {
	t.Helper()
	r := &report{byStatus: map[string]int{}}
	require.NoError(t, b.c.checkEffects(b.ctx, r))
	var kinds []string
	for _, v := range r.violations {
		kinds = append(kinds, v.kind)
	}
	sort.Strings(kinds)
	return r, kinds
}

// runWithIntent inserts a running run held by epoch 1 and the intent of its tool call ref, and
// returns the run and the call's idempotency key.
func (b *checkerBundle) runWithIntent(t *testing.T, ref string) (uuid.UUID, string) {
	t.Helper()
	run := uuid.New()
	key := run.String() + ":" + ref
	b.exec(t, `INSERT INTO runs (id, action) VALUES ($1, 'researchAgent')`, run)
	b.exec(t, `UPDATE runs SET status = 'running', lease_epoch = 1 WHERE id = $1`, run)
	b.exec(t, `INSERT INTO tool_calls (run_id, turn, ref, tool, idempotency_key) VALUES ($1, 0, $2, 'search', $3)`, run, ref, key)
	return run, key
}

// TestCheckEffectsAllowsAReexecutionOnlyToAnotherExecution: a call started twice by one execution
// (one lease epoch) is a violation even though both starts precede its completion; started by the
// execution that lost the run and again by the one that took it over, it is a re-execution. A
// start under an epoch the run's lease never had is a violation too.
func TestCheckEffectsAllowsAReexecutionOnlyToAnotherExecution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run, key := b.runWithIntent(t, "a")
	first := time.Now()
	time.Sleep(20 * time.Millisecond)

	b.writeEffects(t, effectLine{Key: key, At: first.UnixNano(), Epoch: 1, Admitted: first.UnixNano()})
	r, kinds := b.effectViolations(t)
	require.Empty(t, kinds, "one start: %v", r.violations)

	// The same execution starts it again, before anything completed it.
	again := time.Now()
	b.writeEffects(t,
		effectLine{Key: key, At: first.UnixNano(), Epoch: 1, Admitted: first.UnixNano()},
		effectLine{Key: key, At: again.UnixNano(), Epoch: 1, Admitted: again.UnixNano()})
	r, kinds = b.effectViolations(t)
	require.Equal(t, []string{"executed twice by one execution"}, kinds, "%v", r.violations)
	require.Equal(t, 1, r.reexecutions)

	// Taken over by epoch 2, which writes its intent and runs the call again: a re-execution.
	b.exec(t, `UPDATE runs SET lease_epoch = 2 WHERE id = $1`, run)
	b.exec(t, `UPDATE tool_calls SET status = 'started', source = 'reexecuted' WHERE run_id = $1`, run)
	second := time.Now()
	b.writeEffects(t,
		effectLine{Key: key, At: first.UnixNano(), Epoch: 1, Admitted: first.UnixNano()},
		effectLine{Key: key, At: second.UnixNano(), Epoch: 2, Admitted: second.UnixNano()})
	r, kinds = b.effectViolations(t)
	require.Empty(t, kinds, "a re-execution by the next execution: %v", r.violations)
	require.Equal(t, 1, r.reexecutions)

	// A start under an epoch the run never had.
	b.writeEffects(t, effectLine{Key: key, At: second.UnixNano(), Epoch: 7, Admitted: second.UnixNano()})
	r, kinds = b.effectViolations(t)
	require.Contains(t, kinds, "acted under a lease epoch the run never had", "%v", r.violations)
}

// TestCheckEffectsWantsTheIntentCommittedBeforeTheAct: a tool that started before its execution's
// intent was committed is a violation, though the intent exists by the time the check looks; so is
// one whose execution wrote no intent at all (the intent an earlier execution wrote does not count).
func TestCheckEffectsWantsTheIntentCommittedBeforeTheAct(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := uuid.New()
	key := run.String() + ":a"
	b.exec(t, `INSERT INTO runs (id, action) VALUES ($1, 'researchAgent')`, run)
	b.exec(t, `UPDATE runs SET status = 'running', lease_epoch = 1 WHERE id = $1`, run)

	// The intent is written, the tool acts, and only then does the intent's transaction commit.
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, `INSERT INTO tool_calls (run_id, turn, ref, tool, idempotency_key) VALUES ($1, 0, 'a', 'search', $2)`, run, key)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	early := time.Now()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, tx.Commit(b.ctx))
	time.Sleep(20 * time.Millisecond)
	late := time.Now()

	b.writeEffects(t, effectLine{Key: key, At: late.UnixNano(), Epoch: 1, Admitted: late.UnixNano()})
	r, kinds := b.effectViolations(t)
	require.Empty(t, kinds, "acted after the intent was committed: %v", r.violations)

	b.writeEffects(t, effectLine{Key: key, At: early.UnixNano(), Epoch: 1, Admitted: early.UnixNano()})
	r, kinds = b.effectViolations(t)
	require.Equal(t, []string{"acted before its intent was durable"}, kinds, "%v", r.violations)

	// Epoch 2 takes the run over and acts on epoch 1's intent, writing none of its own.
	b.exec(t, `UPDATE runs SET lease_epoch = 2 WHERE id = $1`, run)
	now := time.Now()
	b.writeEffects(t,
		effectLine{Key: key, At: late.UnixNano(), Epoch: 1, Admitted: late.UnixNano()},
		effectLine{Key: key, At: now.UnixNano(), Epoch: 2, Admitted: now.UnixNano()})
	r, kinds = b.effectViolations(t)
	require.Equal(t, []string{"acted without an intent of its execution"}, kinds, "%v", r.violations)
}

// TestCheckEffectsReportsTornLines: a line of the effects log that is not whole (a process killed
// mid-write, another appending after it) is a violation, and the whole line glued after the
// fragment is still read; a last line without its newline yet is a write under way, counted and
// not a violation. A log of whole lines has neither.
func TestCheckEffectsReportsTornLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, key := b.runWithIntent(t, "a")
	at := time.Now()
	line := func(event string) []byte {
		l, err := json.Marshal(effectLine{Key: key, Tool: "search", Event: event, At: at.UnixNano(), PID: 42, Epoch: 1, Admitted: at.UnixNano()})
		require.NoError(t, err)
		return l
	}
	start, end := line("start"), line("end")

	whole := append(append(append(slices.Clone(start), '\n'), end...), '\n')
	require.NoError(t, os.WriteFile(b.effects, whole, 0o644))
	r, kinds := b.effectViolations(t)
	require.Empty(t, kinds, "%v", r.violations)
	require.Zero(t, r.tornLines)
	require.Zero(t, r.tornTail)

	// A start, a fragment of a line with another process's whole end glued after it, and a start
	// being written.
	var torn []byte
	torn = append(append(torn, start...), '\n')
	torn = append(append(append(torn, start[:25]...), end...), '\n')
	torn = append(torn, start[:30]...)
	require.NoError(t, os.WriteFile(b.effects, torn, 0o644))
	log, err := b.c.readEffects()
	require.NoError(t, err)
	require.Len(t, log.lines, 2, "the start, and the end glued after the fragment")
	require.Equal(t, "end", log.lines[1].Event)
	r, kinds = b.effectViolations(t)
	require.Equal(t, []string{"torn effects-log line"}, kinds, "%v", r.violations)
	require.Equal(t, 1, r.tornLines)
	require.Equal(t, 1, r.tornTail)
	require.Equal(t, fmt.Sprint(len(start)+1), r.violations[0].subject, "the fragment's byte offset")
}

// TestCheckJobsFindsAJobLeftRunningAfterItsRunSettled: a run's River job still running once the
// job bound has passed since its run settled (succeeded, or waiting for a reviewer) is a
// violation, as after issue 24's kill storm; a job whose run settled within the bound, and a job
// that River completed or the sweep cancelled, are not.
func TestCheckJobsFindsAJobLeftRunningAfterItsRunSettled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.c.jobBound = 5 * time.Second
	settledRun := func(status string, ago time.Duration) uuid.UUID {
		id := uuid.New()
		b.exec(t, `INSERT INTO runs (id, action, status, updated_at) VALUES ($1, 'researchAgent', $2, now() - $3::interval)`, id, status, ago)
		return id
	}
	job := func(run uuid.UUID, state string, attempted time.Duration) int64 {
		var id int64
		require.NoError(t, b.pool.QueryRow(b.ctx, `INSERT INTO river_job (state, attempt, max_attempts, attempted_at, attempted_by, kind, args, finalized_at)
			VALUES ($1::river_job_state, 1, 25, now() - $2::interval, '{dead-worker}', 'loupe.run', jsonb_build_object('run_id', $3::text),
				CASE WHEN $1::text IN ('completed', 'cancelled') THEN now() END) RETURNING id`, state, attempted, run.String()).Scan(&id))
		return id
	}
	kinds := func() []violation {
		t.Helper()
		r := &report{byStatus: map[string]int{}}
		require.NoError(t, b.c.checkJobs(b.ctx, r))
		return r.violations
	}

	job(settledRun("succeeded", time.Minute), "completed", time.Minute)
	job(settledRun("succeeded", time.Minute), "cancelled", 2*time.Minute)
	job(settledRun("succeeded", time.Second), "running", time.Minute) // settled a second ago
	job(settledRun("succeeded", time.Minute), "running", time.Second) // attempted a second ago
	require.Empty(t, kinds(), "completed, cancelled, or within the bound")

	succeeded := settledRun("succeeded", time.Minute)
	left := job(succeeded, "running", 2*time.Minute)
	waiting := settledRun("interrupted", 30*time.Second)
	job(waiting, "running", time.Minute)
	got := kinds()
	require.Len(t, got, 2, "%v", got)
	byRun := map[string]violation{}
	for _, v := range got {
		require.Equal(t, "job left running", v.kind)
		byRun[v.run] = v
	}
	require.Contains(t, byRun, succeeded.String())
	require.Contains(t, byRun, waiting.String())
	require.Equal(t, fmt.Sprint(left), byRun[succeeded.String()].subject)
	require.Contains(t, byRun[succeeded.String()].detail, `attempted by "dead-worker"`)
	require.Contains(t, byRun[succeeded.String()].detail, "its run is succeeded since")

	// A postmaster outage that ended within the bound held the sweep back: the jobs whose
	// window it fell in are looked at again at a later check, not reported now. An outage that
	// ended longer ago than the bound excuses nothing.
	outageEnd := time.Now().Add(-2 * time.Second)
	b.c.lastOutageEnd = func(from time.Time) (time.Time, bool) { return outageEnd, outageEnd.After(from) }
	require.Empty(t, kinds(), "both windows held an outage that ended 2 s ago")
	outageEnd = time.Now().Add(-45 * time.Second)
	got = kinds()
	require.Len(t, got, 2, "the outage ended 45 s ago, longer than the bound: %v", got)
}
