package runs_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// startWorkerProcess runs this test binary as a worker process (see TestMain) that blocks at the
// given point, and waits until it gets there. The caller then SIGKILLs it.
func (b *bundle) startWorkerProcess(t *testing.T, block string) *exec.Cmd {
	t.Helper()
	cmd, reached := b.spawnWorkerProcess(t, block)
	reached()
	return cmd
}

// spawnWorkerProcess starts the worker process and returns a function that waits until it
// reaches its blocking point.
func (b *bundle) spawnWorkerProcess(t *testing.T, block string) (*exec.Cmd, func()) {
	t.Helper()
	cmd, markers := b.workerProcess(t, block)
	return cmd, func() {
		t.Helper()
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(markers, block))
			return err == nil
		}, 60*time.Second, 10*time.Millisecond, "the worker process never reached %s", block)
	}
}

// workerProcess starts the worker process, which writes a marker file named after its blocking
// point in the returned directory when it gets there.
func (b *bundle) workerProcess(t *testing.T, block string) (*exec.Cmd, string) {
	t.Helper()
	markers := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOUPE_RUNS_WORKER_DB="+b.dsn, "LOUPE_RUNS_BLOCK="+block, "LOUPE_RUNS_MARKERS="+markers)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, markers
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
}

// TestRecoveryAfterSIGKILLDuringModelCall kills a worker process in the middle of a model call.
// A new worker takes the run over once the dead one's lease expires, and finishes it.
func TestRecoveryAfterSIGKILLDuringModelCall(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	run := b.start(t, "slow")
	proc := b.startWorkerProcess(t, "model")
	r, err := b.store.RunGet(context.Background(), run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, r.Status)
	kill(t, proc)

	b.newService(t, 1)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), "did s")
	require.Equal(t, map[string]int{"s": 1}, b.effects(t, run.ID))
}

// TestRecoveryAfterSIGKILLInASecondGenerate kills a worker process during the model call of its
// flow's second generate. The new worker runs the flow again: the first generate replays from the
// ledgers (its tool is not run again) and the second continues from its own history.
func TestRecoveryAfterSIGKILLInASecondGenerate(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	run, err := b.svc.StartRun(ctx, runs.StartParams{Action: "twoStepAgent", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	proc := b.startWorkerProcess(t, "model2")
	require.Equal(t, map[string]int{"e1": 1}, b.effects(t, run.ID))
	kill(t, proc)

	b.newService(t, 1)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), `e1=\"did e1\"`)
	require.Contains(t, string(done.Output), `e2=\"did e2\"`)
	require.Equal(t, map[string]int{"e1": 1, "e2": 1}, b.effects(t, run.ID), "no completed tool ran twice")
	msgs, err := b.store.MessageList(ctx, run.ID)
	require.NoError(t, err)
	var gens []int
	for i, m := range msgs {
		require.Equal(t, i, m.Seq)
		gens = append(gens, m.Generation)
	}
	require.Equal(t, []int{0, 0, 0, 0, 1, 1, 1, 1}, gens)
}

// TestRecoveryAfterSIGKILLBetweenTools kills a worker process after one of two parallel tools
// completed while the other was still running. After recovery the completed tool is reused, not
// run again, and the in-flight one is re-executed and marked so in the ledger.
func TestRecoveryAfterSIGKILLBetweenTools(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	run := b.start(t, "pair")
	proc := b.startWorkerProcess(t, "tool")
	ctx := context.Background()
	require.Eventually(t, func() bool {
		c, err := b.store.ToolCallGet(ctx, run.ID, 0, "a")
		return err == nil && c.Status == store.ToolCallCompleted
	}, 30*time.Second, 10*time.Millisecond)
	kill(t, proc)
	require.Equal(t, map[string]int{"a": 1}, b.effects(t, run.ID))

	b.newService(t, 1)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), "did a")
	require.Contains(t, string(done.Output), "did b")
	require.Equal(t, map[string]int{"a": 1, "b": 1}, b.effects(t, run.ID), "no completed tool ran twice")

	a, err := b.store.ToolCallGet(ctx, run.ID, 0, "a")
	require.NoError(t, err)
	require.Equal(t, 1, a.Attempt)
	require.Equal(t, store.ToolSourceExecuted, a.Source)
	bc, err := b.store.ToolCallGet(ctx, run.ID, 0, "b")
	require.NoError(t, err)
	require.Equal(t, 2, bc.Attempt)
	require.Equal(t, store.ToolSourceReexecuted, bc.Source)
	require.Equal(t, run.ID.String()+":b", bc.IdempotencyKey, "the re-execution kept the idempotency key")
	calls, err := b.store.ModelCallList(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, calls, 2, "the recorded model response of turn 0 was replayed, not asked again")

	// A clean run of the same scenario reports the same tokens: two model calls of 10 in, 5 out.
	clean := b.start(t, "pair") // executed by the worker that took over
	cleanDone := b.wait(t, clean.ID, store.RunSucceeded)
	require.EqualValues(t, 20, cleanDone.InputTokens)
	require.Equal(t, cleanDone.InputTokens, done.InputTokens, "a recovered run counts each model call once")
	require.Equal(t, cleanDone.OutputTokens, done.OutputTokens)
}

// TestRecoveryAfterSIGKILLDuringResume kills a worker process while it runs a resumed (approved)
// tool. The run still completes, with the approval applied once.
func TestRecoveryAfterSIGKILLDuringResume(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	run := b.start(t, "approve1")
	b.wait(t, run.ID, store.RunInterrupted)
	b.svc.Stop() // only the process below may pick the resume up

	proc, reached := b.spawnWorkerProcess(t, "resume")
	b.resolve(t, b.pending(t, run.ID)[0], "approve", "")
	reached()
	kill(t, proc)
	require.Empty(t, b.effects(t, run.ID))

	b.newService(t, 1)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), `c1={\"ok\":true,\"amount\":5}`)
	require.Equal(t, map[string]int{"c1": 1}, b.effects(t, run.ID))
}

// TestPausedWorkerWritesNothingAfterTakeover freezes a real worker process (SIGSTOP) in the middle
// of a model call, past its lease. Another worker takes the run over and finishes it. When the
// frozen worker wakes up (SIGCONT), its model call returns, and nothing of its execution is
// stored: no model call, no tool run, no progress, no outcome. The run stays as the second worker
// finished it.
func TestPausedWorkerWritesNothingAfterTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	run := b.start(t, "pause")
	proc := b.startWorkerProcess(t, "pause-model")
	require.NoError(t, proc.Process.Signal(syscall.SIGSTOP))
	b.newService(t, 1) // takes the run over once the frozen worker's lease lapses
	done := b.wait(t, run.ID, store.RunSucceeded)

	require.NoError(t, proc.Process.Signal(syscall.SIGCONT))
	// A stopping worker waits for its executions to end: once it has exited, the woken execution
	// has done all it will ever do.
	require.NoError(t, proc.Process.Signal(syscall.SIGTERM))
	_ = proc.Wait()

	after, err := b.store.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, done.Version, after.Version, "the woken worker changed the finished run")
	require.Equal(t, done.UpdatedAt, after.UpdatedAt)
	require.Equal(t, done.InputTokens, after.InputTokens)
	var effects, late int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM test_effects WHERE run_id = $1`, run.ID.String()).Scan(&effects))
	require.Equal(t, 1, effects, "the tool ran once, in the execution that took over")
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM model_calls WHERE run_id = $1 AND created_at > $2) +
			(SELECT count(*) FROM tool_calls WHERE run_id = $1 AND (started_at > $2 OR finished_at > $2))`,
		run.ID, *done.FinishedAt).Scan(&late))
	require.Zero(t, late, "rows written into the run after it finished")
}

// TestPausedWorkersAdmittedToolActsLateAndIsSuperseded freezes a real worker process (SIGSTOP)
// after its lease check admitted a tool and before the tool acts: the limit the README states
// under "A lost execution writes nothing". Another worker takes the run over, runs the tool and
// finishes the run. Woken, the frozen worker's tool acts once more, late, under the same
// idempotency key (no check inside the process can stop it; the system the tool acts on can, by
// that key), and its result is kept as superseded: the run and its ledger stay as the second
// worker finished them.
func TestPausedWorkersAdmittedToolActsLateAndIsSuperseded(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	run := b.start(t, "late")
	proc := b.startWorkerProcess(t, "late-tool")
	require.NoError(t, proc.Process.Signal(syscall.SIGSTOP))
	b.newService(t, 1)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, map[string]int{"l": 1}, b.effects(t, run.ID), "the execution that took over ran the tool")
	first, err := b.store.ToolCallGet(ctx, run.ID, 0, "l")
	require.NoError(t, err)

	require.NoError(t, proc.Process.Signal(syscall.SIGCONT))
	require.NoError(t, proc.Process.Signal(syscall.SIGTERM))
	_ = proc.Wait()

	require.Equal(t, map[string]int{"l": 2}, b.effects(t, run.ID), "the admitted tool acted late, once")
	superseded, err := b.store.ToolCallListSuperseded(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, superseded, 1, "the late act's result is kept apart")
	require.Equal(t, "l", superseded[0].Ref)
	require.Less(t, superseded[0].LeaseEpoch, done.LeaseEpoch, "from the execution that lost the run")
	after, err := b.store.ToolCallGet(ctx, run.ID, 0, "l")
	require.NoError(t, err)
	require.Equal(t, first, after, "the ledger keeps the result of the execution that took over")
	require.Equal(t, store.ToolSourceReexecuted, after.Source)
	cur, err := b.store.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, done.Version, cur.Version, "the woken worker changed the finished run")
}

// TestQueuedRunWhoseWorkerDiedAfterFetchIsPickedUp kills a real worker process right after River
// handed it a run's job and before it took the run's lease (fault point after-fetch). River does
// not rescue that job; the run must not stay queued: the recovery sweep of another worker takes it
// over and finishes it.
func TestQueuedRunWhoseWorkerDiedAfterFetchIsPickedUp(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	run := b.start(t, "first-effect")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOUPE_RUNS_WORKER_DB="+b.dsn, "LOUPE_RUNS_FAULTS=after-fetch=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	err := cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the worker kills itself at the fault point")
	var jobState string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state FROM river_job WHERE args->>'run_id' = $1`, run.ID.String()).Scan(&jobState))
	require.Equal(t, "running", jobState, "the dead worker's job stays running: River will not rescue it")
	queued, err := b.store.RunGet(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunQueued, queued.Status)

	b.newService(t, 1)
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, map[string]int{"e1": 1}, b.effects(t, run.ID))
}

// TestJobsOfAKilledWorkerLeaveRunning: River never rescues a run job (they have no timeout), so
// the job a SIGKILLed worker held stayed `running` forever, its attempted_by a dead client. The
// recovery sweep finalizes it, as cancelled with an error that says why, within the README's
// bound: twice the lease TTL and a sweep of the latest of its last attempt and its run's settling
// (here the worker died before either); the run itself was taken over and succeeded.
func TestJobsOfAKilledWorkerLeaveRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	run := b.start(t, "pair")
	proc := b.startWorkerProcess(t, "tool")
	kill(t, proc)

	b.newService(t, 1)
	b.wait(t, run.ID, store.RunSucceeded)
	type job struct {
		State, AttemptedBy string
		Errors             []string
	}
	jobs := func() []job {
		rows, err := b.pool.Query(ctx, `SELECT state::text, coalesce(attempted_by[array_length(attempted_by, 1)], ''),
			coalesce(errors::text[], '{}') FROM river_job WHERE kind = 'loupe.run' AND args->>'run_id' = $1 ORDER BY id`, run.ID.String())
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[job])
		require.NoError(t, err)
		return out
	}
	require.Eventually(t, func() bool {
		for _, j := range jobs() {
			if j.State == "running" {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "a job of the run is left running")
	// The dead worker's jobs, and only they, are cancelled. It may have held more than one: on a
	// loaded machine its own lease can lapse before the kill, and its sweep then queues the run
	// again, which it takes too (fenced: the older job can no longer write).
	all := jobs()
	dead := map[string]bool{}
	for _, j := range all {
		if j.State == "cancelled" {
			require.Contains(t, j.Errors[len(j.Errors)-1], "abandoned: the worker that ran this job stopped")
			dead[j.AttemptedBy] = true
		}
	}
	require.Len(t, dead, 1, "the cancelled jobs are the dead worker's: %v", all)
	for _, j := range all {
		if j.State != "cancelled" {
			require.Equal(t, "completed", j.State, "%v", all)
			require.False(t, dead[j.AttemptedBy], "a job of a live worker was cancelled or left: %v", all)
		}
	}

	// The bound, measured on the database's clock, with two seconds of room for a loaded machine
	// (setup's lease TTL is 1 s, its sweep a third of it).
	const ttl = time.Second
	bound := 2*ttl + ttl/3
	var took time.Duration
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT j.finalized_at - greatest(j.attempted_at, r.updated_at)
		FROM river_job j JOIN runs r ON r.id::text = j.args->>'run_id'
		WHERE j.kind = 'loupe.run' AND j.args->>'run_id' = $1 AND j.state = 'cancelled'`, run.ID.String()).Scan(&took))
	t.Logf("the dead worker's job was finalized %s after the later of its attempt and its run's settling (bound %s)", took.Round(time.Millisecond), bound)
	require.Less(t, took, bound+2*time.Second, "finalized within twice the lease TTL and a sweep")
}
