package runs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// confirmPolicy approves every confirm call.
const confirmPolicy = `rules:
  - name: confirm-small
    tool: confirm
    when: input.amount < 100
    decide: approve
    reason: small amounts need no review
`

// TestAPolicyDecisionSurvivesAKillBeforeAndAfterItCommits SIGKILLs a real worker process on both
// sides of a policy's decision. Before the commit (the interrupted turn's history written in the
// transaction that will hold the interrupt and the decision): nothing was decided, and the worker
// that takes over raises the interrupt again, which the policy decides then. After the commit (the
// resumed tool about to act, or the run queued and not yet taken again): the decision stands, the
// resume runs on the next worker (the sweep finds the queued run whose job died). Either way
// the run succeeds, the tool acts once, and the interrupt is decided once: one interrupt, approved
// by the rule, with one audit entry.
func TestAPolicyDecisionSurvivesAKillBeforeAndAfterItCommits(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		env string
		// dies: the fault kills the worker by itself, leaving the run in status; otherwise the
		// test kills it once it resumed the approved tool.
		dies    bool
		status  string
		decided bool // the decision committed before the kill
	}{
		"before the commit":                 {env: "LOUPE_RUNS_FAULTS=" + runs.FaultInterruptedCheckpoint + "=1", dies: true, status: store.RunRunning},
		"after the commit":                  {env: "LOUPE_RUNS_BLOCK=resume", decided: true},
		"between the commit and the resume": {env: "LOUPE_RUNS_FAULTS=" + runs.FaultDecidedAtOnce + "=1", dies: true, status: store.RunQueued, decided: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 0)
			v := b.savePolicy(t, confirmPolicy)
			run := b.start(t, "approve1")

			markers := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), c.env, "LOUPE_RUNS_WORKER_DB="+b.dsn, "LOUPE_RUNS_MARKERS="+markers)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			if c.dies {
				require.Error(t, cmd.Wait(), "the worker died at the fault point")
				r, err := b.store.RunGet(context.Background(), run.ID)
				require.NoError(t, err)
				require.Equal(t, c.status, r.Status)
			} else {
				require.Eventually(t, func() bool {
					_, err := os.Stat(filepath.Join(markers, "resume"))
					return err == nil
				}, time.Minute, 10*time.Millisecond, "the worker never resumed the tool the policy approved")
				kill(t, cmd)
			}
			list, err := b.store.InterruptListByRun(context.Background(), run.ID)
			require.NoError(t, err)
			if c.decided {
				require.Len(t, list, 1)
				require.Equal(t, store.InterruptApproved, list[0].Status, "the decision committed before the kill stands")
			} else {
				require.Empty(t, list, "no interrupt, so no decision, was committed")
			}
			require.Empty(t, b.effects(t, run.ID), "the tool has not acted yet")

			b.newService(t, 1)
			done := b.wait(t, run.ID, store.RunSucceeded)
			require.Equal(t, map[string]int{"c1": 1}, b.effects(t, run.ID), "the approved tool acted once")
			list, err = b.store.InterruptListByRun(context.Background(), run.ID)
			require.NoError(t, err)
			require.Len(t, list, 1, "the interrupt was raised and decided once")
			require.Equal(t, store.InterruptApproved, list[0].Status)
			require.Equal(t, fmt.Sprintf("policy confirm-small v%d", v.Version), *list[0].ResolvedBy)
			audit, err := b.store.AuditList(context.Background(), "interrupt", list[0].ID.String())
			require.NoError(t, err)
			require.Len(t, audit, 1)
			require.Equal(t, "interrupt.approve", audit[0].Action)
			require.Contains(t, string(done.Output), "c1=")
		})
	}
}
