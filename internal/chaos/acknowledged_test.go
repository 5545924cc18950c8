package main

import (
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestCheckAcknowledgedFindsWhatTheAPIAnsweredAndTheDatabaseLost: every run answered 201 and every
// decision answered 200 must be in the database afterwards, with its effect. A run that is missing
// or holds another input, a decision answered twice (lost, then made again), one whose interrupt
// is pending again or was resolved otherwise, and one whose finished run's ledger does not hold
// the call as decided, are each reported; what the database kept is not.
func TestCheckAcknowledgedFindsWhatTheAPIAnsweredAndTheDatabaseLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.c.acks = &acknowledged{}
	newRun := func(status string) uuid.UUID {
		id := uuid.New()
		b.exec(t, `INSERT INTO runs (id, action, input, status) VALUES ($1, '/flow/transferMoney', '{"to": "alice", "amount": 120}', $2)`, id, status)
		return id
	}
	// decided adds a run's interrupt as resolved, its ledger entry as source says, and returns what
	// the API would have answered.
	decided := func(run uuid.UUID, status, source string) ackedDecision {
		id := uuid.New()
		var at time.Time
		require.NoError(t, b.pool.QueryRow(b.ctx, `INSERT INTO interrupts (id, run_id, turn, tool, ref, status, resolved_at, version)
			VALUES ($1, $2, 0, 'transfer', 'transfer-1', $3, now(), 2) RETURNING resolved_at`, id, run, status).Scan(&at))
		b.exec(t, `INSERT INTO tool_calls (run_id, turn, ref, tool, status, source, idempotency_key, finished_at)
			VALUES ($1, 0, 'transfer-1', 'transfer', 'completed', $2, $3, now())`, run, source, run.String()+":transfer-1")
		return ackedDecision{Interrupt: id.String(), Run: run.String(), Turn: 0, Ref: "transfer-1", Status: status, Version: 2, ResolvedAt: at}
	}
	input := []byte(`{"amount":120,"to":"alice"}`)
	kinds := func() []string {
		t.Helper()
		r := &report{byStatus: map[string]int{}}
		require.NoError(t, b.c.checkAcknowledged(b.ctx, r))
		var out []string
		for _, v := range r.violations {
			out = append(out, v.kind)
		}
		sort.Strings(out)
		return out
	}

	approvedRun, deniedRun := newRun("succeeded"), newRun("succeeded")
	b.c.acks.addRun(ackedRun{ID: approvedRun.String(), Action: "/flow/transferMoney", Input: input})
	b.c.acks.addRun(ackedRun{ID: deniedRun.String(), Action: "/flow/transferMoney", Input: input})
	approved := decided(approvedRun, "approved", "executed")
	b.c.acks.addDecision(approved)
	b.c.acks.addDecision(decided(deniedRun, "denied", "reviewer"))
	require.Empty(t, kinds(), "all that was acknowledged is there")

	b.c.acks.addRun(ackedRun{ID: uuid.NewString(), Action: "/flow/transferMoney", Input: input})
	require.Equal(t, []string{"acknowledged run lost"}, kinds())

	b.c.acks = &acknowledged{}
	b.c.acks.addRun(ackedRun{ID: approvedRun.String(), Action: "/flow/transferMoney", Input: []byte(`{"amount":500,"to":"alice"}`)})
	require.Equal(t, []string{"acknowledged run changed"}, kinds())

	b.c.acks = &acknowledged{}
	b.c.acks.addDecision(approved)
	again := approved
	again.ResolvedAt = approved.ResolvedAt.Add(time.Second)
	b.c.acks.addDecision(again) // lost, resolved again, answered 200 again
	require.Equal(t, []string{"acknowledged decision lost", "decision acknowledged twice"}, kinds())

	// The interrupt is pending again: the decision answered 200 did not stay.
	b.c.acks = &acknowledged{}
	lostRun := newRun("interrupted")
	lost := uuid.New()
	b.exec(t, `INSERT INTO interrupts (id, run_id, turn, tool, ref) VALUES ($1, $2, 0, 'transfer', 'transfer-1')`, lost, lostRun)
	b.c.acks.addDecision(ackedDecision{Interrupt: lost.String(), Run: lostRun.String(), Ref: "transfer-1", Status: "approved", Version: 2, ResolvedAt: time.Now()})
	require.Equal(t, []string{"acknowledged decision lost"}, kinds())

	// Approved, the run finished, but the ledger holds the reviewer's answer, not the tool's.
	b.c.acks = &acknowledged{}
	b.c.acks.addDecision(decided(newRun("succeeded"), "approved", "reviewer"))
	require.Equal(t, []string{"acknowledged decision without its effect"}, kinds())
}
