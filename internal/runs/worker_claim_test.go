package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestTwoJobsOfARunInOneProcessMakeOneExecution works two jobs of one run at the same moment in
// one process (the sweep's second job, say): one executes, the other is snoozed without taking
// the lease again. Taking it again, as the lease's owner may, would start a second execution and
// supersede the first while the first still counts on its lease to admit its tools.
func TestTwoJobsOfARunInOneProcessMakeOneExecution(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	reg := engine.NewRegistry()
	var calls atomic.Int32
	release := make(chan struct{})
	hold := engine.DefineTool(reg, "hold", "Waits to be let go.", func(tc *engine.ToolContext, _ struct{}) (string, error) {
		calls.Add(1)
		<-release
		return "held", nil
	})
	defineOneTurnAgent(reg, "holdAgent", []engine.Tool{hold}, scripted.ToolCall("hold", "h1", map[string]any{}))
	svc := b.serve(t, reg, runs.Config{Workers: 0, LeaseTTL: 5 * time.Second})
	run, err := svc.StartRun(context.Background(), runs.StartParams{Action: "holdAgent", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)

	go1 := make(chan struct{})
	results := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			results <- runs.WorkJob(context.Background(), svc, run.ID)
		}()
	}
	close(go1)
	var snooze *rivertype.JobSnoozeError
	select {
	case err := <-results:
		require.True(t, errors.As(err, &snooze), "the second job is snoozed, not executed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("neither job returned while the tool is held: both execute")
	}
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 30*time.Second, 10*time.Millisecond)
	cur, err := b.store.RunGet(context.Background(), run.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), cur.LeaseEpoch, "the lease was taken once")
	close(release)
	wg.Wait()
	require.NoError(t, <-results)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, int64(1), done.LeaseEpoch)
	require.Equal(t, int32(1), calls.Load(), "the tool ran once")
}
