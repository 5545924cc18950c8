package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestCheckEffectsTellsALateActFromADispatchAgain runs the harness's effects check over a run
// whose lease changed hands while a call was in flight, with one effects-log start of each kind:
// in flight at the takeover, re-executed by the new execution, a late act of the old one (admitted
// before it lost the run, acting after the new one completed the call: counted, not a violation),
// a completed call started again by the execution that completed it, a tool admitted by the old
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
	for _, ref := range []string{"a", "b", "c", "d"} {
		exec(`INSERT INTO tool_calls (run_id, turn, ref, tool, idempotency_key) VALUES ($1, 0, $2, 'search', $3)`, run, ref, key(ref))
	}
	inFlight := time.Now()
	time.Sleep(30 * time.Millisecond)
	takeover := exec(`UPDATE runs SET lease_epoch = 2 WHERE id = $1`, run)
	admitted2 := time.Now()
	time.Sleep(30 * time.Millisecond)
	exec(`UPDATE tool_calls SET status = 'completed', source = 'reexecuted', finished_at = clock_timestamp()
		WHERE run_id = $1 AND ref IN ('a', 'b')`, run)
	after := time.Now()

	lines := []effectLine{
		{Key: key("a"), At: inFlight.UnixNano(), Epoch: 1, Admitted: admitted1.UnixNano()},                        // in flight at the takeover
		{Key: key("a"), At: admitted2.UnixNano(), Epoch: 2, Admitted: admitted2.UnixNano()},                       // re-executed by epoch 2
		{Key: key("a"), At: after.UnixNano(), Epoch: 1, Admitted: admitted1.UnixNano()},                           // late act of epoch 1
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
	}, kinds, "%v", r.violations)
	require.Equal(t, 1, r.lateActs, "a's start by epoch 1 after epoch 2 completed it")
	require.Equal(t, 7, r.executions)
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
