package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// acknowledged is what the API acknowledged: the runs it answered 201 for and the decisions it
// answered 200 for, as it answered them. Whatever was acknowledged must be in the database
// afterwards with its effect (checkAcknowledged): a run answered 201 and then lost, or a decision
// answered 200 and then lost (the reviewer would resolve it again and see 200 again), is a
// violation that the database alone cannot show.
type acknowledged struct {
	mu        sync.Mutex
	runs      []ackedRun
	decisions []ackedDecision
}

// ackedRun is a run the API answered 201 for.
type ackedRun struct {
	ID, Action string
	Input      []byte // as sent
}

// ackedDecision is a resolve the API answered 200 for, with the interrupt it answered.
type ackedDecision struct {
	Interrupt, Run string
	Turn           int
	Ref            string
	Status         string // approved or denied
	Version        int64
	ResolvedAt     time.Time
}

func (a *acknowledged) addRun(r ackedRun) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.runs = append(a.runs, r)
}

func (a *acknowledged) addDecision(d ackedDecision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.decisions = append(a.decisions, d)
}

func (a *acknowledged) snapshot() ([]ackedRun, []ackedDecision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.runs), slices.Clone(a.decisions)
}

// workloadCounts are the workload's requests, and how they went.
type workloadCounts struct {
	started, startRetries    int
	approved, denied         int
	conflicts, resolveErrors int
}

// checkAcknowledged: what the API acknowledged is in the database, with its effect. Every run it
// answered 201 for exists, with the action and input it was started with. Every decision it
// answered 200 for was answered 200 once (resolution is exactly-once: a decision lost and made
// again is answered twice), its interrupt is resolved as answered (status, version, resolution
// time), and once the run is final the ledger holds the call as decided: completed by the tool
// when approved, answered by the reviewer when denied.
func (c *checker) checkAcknowledged(ctx context.Context, r *report) error {
	if c.acks == nil {
		return nil
	}
	runs, decisions := c.acks.snapshot()
	r.ackedRuns, r.ackedDecisions = len(runs), len(decisions)
	ids := make([]string, 0, len(runs))
	for _, a := range runs {
		ids = append(ids, a.ID)
	}
	rows, err := c.pool.Query(ctx, `SELECT id::text, action, input::text FROM runs WHERE id::text = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("acknowledged runs: %w", err)
	}
	type stored struct{ ID, Action, Input string }
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stored])
	if err != nil {
		return fmt.Errorf("acknowledged runs: %w", err)
	}
	byID := map[string]stored{}
	for _, s := range list {
		byID[s.ID] = s
	}
	for _, a := range runs {
		s, ok := byID[a.ID]
		switch {
		case !ok:
			r.violations = append(r.violations, violation{"acknowledged run lost", a.ID, "", fmt.Sprintf(
				"the API answered 201 for %s %s, but the database has no such run", a.Action, a.Input)})
		case s.Action != a.Action || !sameJSON(s.Input, string(a.Input)):
			r.violations = append(r.violations, violation{"acknowledged run changed", a.ID, "", fmt.Sprintf(
				"the API answered 201 for %s %s, but the database holds %s %s", a.Action, a.Input, s.Action, s.Input)})
		}
	}

	answered := map[string]int{}
	var interrupts []string
	for _, d := range decisions {
		if answered[d.Interrupt]++; answered[d.Interrupt] == 1 {
			interrupts = append(interrupts, d.Interrupt)
		}
	}
	rows, err = c.pool.Query(ctx, `SELECT i.id::text, i.status, i.version, i.resolved_at, r.status,
			coalesce(t.status, ''), coalesce(t.source, '')
		FROM interrupts i JOIN runs r ON r.id = i.run_id
		LEFT JOIN tool_calls t ON t.run_id = i.run_id AND t.turn = i.turn AND t.ref = i.ref
		WHERE i.id::text = ANY($1)`, interrupts)
	if err != nil {
		return fmt.Errorf("acknowledged decisions: %w", err)
	}
	type resolution struct {
		ID, Status             string
		Version                int64
		ResolvedAt             *time.Time
		RunStatus              string
		CallStatus, CallSource string
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[resolution])
	if err != nil {
		return fmt.Errorf("acknowledged decisions: %w", err)
	}
	byInterrupt := map[string]resolution{}
	for _, f := range found {
		byInterrupt[f.ID] = f
	}
	reported := map[string]bool{}
	for _, d := range decisions {
		if n := answered[d.Interrupt]; n > 1 && !reported[d.Interrupt] {
			reported[d.Interrupt] = true
			r.violations = append(r.violations, violation{"decision acknowledged twice", d.Run, d.Interrupt, fmt.Sprintf(
				"the API answered 200 %d times for interrupt %s (%s, turn %d): a decision it acknowledged was lost and made again",
				n, d.Interrupt, d.Ref, d.Turn)})
		}
		f, ok := byInterrupt[d.Interrupt]
		subject := d.Interrupt + " " + d.ResolvedAt.Format(time.RFC3339Nano)
		switch {
		case !ok:
			r.violations = append(r.violations, violation{"acknowledged decision lost", d.Run, subject, fmt.Sprintf(
				"the API answered 200 for %s of interrupt %s (%s, turn %d), but the database has no such interrupt", d.Status, d.Interrupt, d.Ref, d.Turn)})
			continue
		case f.Status != d.Status || f.Version != d.Version || f.ResolvedAt == nil || !f.ResolvedAt.Equal(d.ResolvedAt):
			at := "never"
			if f.ResolvedAt != nil {
				at = stamp(*f.ResolvedAt)
			}
			r.violations = append(r.violations, violation{"acknowledged decision lost", d.Run, subject, fmt.Sprintf(
				"the API answered 200 for %s of interrupt %s (%s, turn %d) at version %d, resolved at %s; the database holds it %s at version %d, resolved %s",
				d.Status, d.Interrupt, d.Ref, d.Turn, d.Version, stamp(d.ResolvedAt), f.Status, f.Version, at)})
			continue
		}
		if !final(f.RunStatus) {
			continue // checkSettled says why it is not final
		}
		want := "completed by the tool"
		ok = f.CallStatus == "completed" && f.CallSource != "reviewer"
		if d.Status == "denied" {
			want, ok = "answered by the reviewer", f.CallStatus == "completed" && f.CallSource == "reviewer"
		}
		if !ok {
			r.violations = append(r.violations, violation{"acknowledged decision without its effect", d.Run, subject, fmt.Sprintf(
				"interrupt %s (%s, turn %d) was %s, and the run is %s, but the ledger holds the call %s (source %s), not %s",
				d.Interrupt, d.Ref, d.Turn, d.Status, f.RunStatus, or(f.CallStatus, "missing"), or(f.CallSource, "-"), want)})
		}
	}
	return nil
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
