package runs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// deskCase is a support-desk flow (desk_test.go) run durably to its end, and what must hold.
type deskCase struct {
	flow   string
	decide string // what the reviewer does with every interrupt: approve or deny
	// waiting are the effects, exactly, each time the run waits for its reviewers, and the
	// number of interrupts it waits on then.
	waiting []deskRound
	effects map[string]int // at the end
	output  string         // in the final output
}

type deskRound struct {
	pending int
	effects map[string]int
}

var deskCases = map[string]deskCase{
	"two steps": {flow: "deskTwoStep", decide: runs.ActionApprove,
		waiting: []deskRound{{1, map[string]int{}}},
		effects: map[string]int{"refund:7": 1, "notify": 1}, output: `notify: refund => "refunded 7" => "sent"`},
	"deny on the first step": {flow: "deskTwoStep", decide: runs.ActionDeny,
		waiting: []deskRound{{1, map[string]int{}}},
		effects: map[string]int{"notify": 1}, output: `"denied":true`},
	"three steps, two interrupting": {flow: "deskThreeStep", decide: runs.ActionApprove,
		waiting: []deskRound{{1, map[string]int{"lookup": 1}}, {1, map[string]int{"lookup": 1, "refund:7": 1}}},
		effects: map[string]int{"lookup": 1, "refund:7": 1, "email": 1}, output: `=> "emailed"`},
	"parallel interrupts in one turn": {flow: "deskParallel", decide: runs.ActionApprove,
		waiting: []deskRound{{2, map[string]int{}}},
		effects: map[string]int{"refund:1": 1, "refund:2": 1, "notify": 1}, output: `"refunded 1","refunded 2" => "sent"`},
	"a flow that swallows the interrupt": {flow: "deskSwallow", decide: runs.ActionApprove,
		waiting: []deskRound{{1, map[string]int{}}},
		effects: map[string]int{"refund:7": 1, "notify": 1}, output: `swallowed: notify: refund => "refunded 7" => "sent"`},
	"structured output": {flow: "deskTyped", decide: runs.ActionApprove,
		waiting: []deskRound{{1, map[string]int{}}},
		effects: map[string]int{"refund:7": 1}, output: `{"refunded":true,"order":7}`},
	"steps around an approval": {flow: "deskSteps", decide: runs.ActionApprove,
		waiting: []deskRound{{1, map[string]int{"nonce": 1}}},
		effects: map[string]int{"nonce": 1, "refund:7": 1, "after": 1}, output: ` after refund => "refunded 7"`},
}

func (b *bundle) startFlow(t *testing.T, flow string) *store.Run {
	t.Helper()
	run, err := b.svc.StartRun(context.Background(), runs.StartParams{Action: flow, Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	return run
}

// settled waits until the run waits for reviewers or has ended, and returns it.
func (b *bundle) settled(t *testing.T, id uuid.UUID, until func() bool) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = b.store.RunGet(context.Background(), id)
		require.NoError(t, err)
		switch run.Status {
		case store.RunInterrupted, store.RunSucceeded, store.RunFailed, store.RunAborted, store.RunCancelled:
			return true
		}
		return until != nil && until()
	}, 60*time.Second, 20*time.Millisecond, "run %s never settled", id)
	return run
}

// checkRound checks a run waiting for its reviewers in round i, and decides its interrupts.
func (b *bundle) checkRound(t *testing.T, c deskCase, run *store.Run, round int) {
	t.Helper()
	require.Less(t, round, len(c.waiting), "the run waited for reviewers more often than its flow asks them")
	want := c.waiting[round]
	require.Equal(t, want.effects, b.effects(t, run.ID), "round %d: what had happened when the run waited", round)
	pending := b.pending(t, run.ID)
	require.Len(t, pending, want.pending, "round %d", round)
	for _, i := range pending {
		b.resolve(t, i, c.decide, "")
	}
}

// checkEnd checks a run that has finished its flow.
func (b *bundle) checkEnd(t *testing.T, c deskCase, run *store.Run, rounds int) {
	t.Helper()
	require.Equal(t, store.RunSucceeded, run.Status, "run error: %s", run.Error)
	require.Equal(t, len(c.waiting), rounds, "rounds of review")
	require.Equal(t, c.effects, b.effects(t, run.ID), "every effect once, and only those approved")
	var text string
	if strings.HasPrefix(c.output, "{") {
		require.JSONEq(t, c.output, string(run.Output), "the typed output")
	} else {
		require.NoError(t, json.Unmarshal(run.Output, &text))
		require.Contains(t, text, c.output)
	}
	all, err := b.store.InterruptListByRun(context.Background(), run.ID)
	require.NoError(t, err)
	total := 0
	for _, r := range c.waiting {
		total += r.pending
	}
	require.Len(t, all, total, "each tool call asked its reviewers once")
	if c.flow == "deskSteps" {
		steps, err := b.store.StepList(context.Background(), run.ID)
		require.NoError(t, err)
		require.Equal(t, "nonce", steps[0].Name)
		nonce, err := strconv.ParseInt(string(steps[0].Output), 10, 64)
		require.NoError(t, err)
		require.Equal(t, strconv.FormatInt(nonce, 10)+" after", strings.SplitN(text, " after", 2)[0]+" after",
			"the flow's re-executions read the journaled clock, not the clock again")
	}
}

// TestAnInterruptStopsTheFlowUntilItsReviewersDecide runs each desk flow durably: nothing the
// flow does after an interrupted generate call happens before the reviewers decide (no later
// generate, tool or step, even in a flow that ignores the error), each approved tool acts once,
// a denied one never, and the run ends with the flow's output (typed, for structured output).
func TestAnInterruptStopsTheFlowUntilItsReviewersDecide(t *testing.T) {
	t.Parallel()
	for name, c := range deskCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 2)
			run := b.startFlow(t, c.flow)
			rounds := 0
			for {
				r := b.settled(t, run.ID, nil)
				if r.Status != store.RunInterrupted {
					b.checkEnd(t, c, r, rounds)
					return
				}
				b.checkRound(t, c, r, rounds)
				rounds++
			}
		})
	}
}

// TestDurableFlowsSurviveKillsBetweenTheirSteps runs each desk flow in worker processes that are
// SIGKILLed between two of its steps, one after another, each time the run goes on: the next
// process takes the run over, and the effects are still each exactly once, in order.
func TestDurableFlowsSurviveKillsBetweenTheirSteps(t *testing.T) {
	t.Parallel()
	for name, c := range deskCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 0)
			run := b.startFlow(t, c.flow)
			rounds, kills := 0, 0
			for attempt := 0; ; attempt++ {
				require.Less(t, attempt, 12, "the run never finished")
				cmd, markers := b.workerProcess(t, "desk-between")
				blocked := func() bool {
					_, err := os.Stat(filepath.Join(markers, "desk-between"))
					return err == nil
				}
				r := b.settled(t, run.ID, blocked)
				kill(t, cmd)
				if blocked() {
					kills++
					continue
				}
				if r.Status != store.RunInterrupted {
					b.checkEnd(t, c, r, rounds)
					require.NotZero(t, kills, "no process was killed between two steps")
					return
				}
				b.checkRound(t, c, r, rounds)
				rounds++
			}
		})
	}
}
