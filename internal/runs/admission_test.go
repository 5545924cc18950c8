package runs_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestToolsCarryTheAdmissionOfTheExecutionThatDispatchedThem: a durable run's tool sees, in its
// context, the lease epoch of its execution and the moment that execution last knew it held the
// run (no later than the tool's start), what the crash harness tells a late act by; a tool run
// outside a durable run has none.
func TestToolsCarryTheAdmissionOfTheExecutionThatDispatchedThem(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	reg := engine.NewRegistry()
	var mu sync.Mutex
	type seen struct {
		admission runs.Admission
		ok        bool
		started   time.Time
	}
	var got []seen
	probe := engine.DefineTool(reg, "probe", "Notes its admission.", func(tc *engine.ToolContext, _ struct{}) (string, error) {
		a, ok := runs.AdmissionOf(tc)
		mu.Lock()
		got = append(got, seen{a, ok, time.Now()})
		mu.Unlock()
		return "noted", nil
	})
	defineOneTurnAgent(reg, "probeAgent", []engine.Tool{probe},
		scripted.ToolCall("probe", "p1", map[string]any{}), scripted.ToolCall("probe", "p2", map[string]any{}))
	svc := b.serve(t, reg, runs.Config{Workers: 1, LeaseTTL: time.Second})
	before := time.Now()
	run, err := svc.StartRun(context.Background(), runs.StartParams{Action: "probeAgent", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	done := b.wait(t, run.ID, store.RunSucceeded)
	mu.Lock()
	first := append([]seen(nil), got...)
	mu.Unlock()
	require.Len(t, first, 2)
	for _, s := range first {
		require.True(t, s.ok, "a durable run's tool has an admission")
		require.Equal(t, done.LeaseEpoch, s.admission.Epoch, "the epoch of the execution that ran it")
		require.False(t, s.admission.At.Before(before), "admitted after the run started")
		require.False(t, s.admission.At.After(s.started), "admitted before the tool started")
	}

	_, err = engine.Generate(context.Background(), reg, engine.WithModelName("probeAgent/model"), engine.WithPrompt("go"), engine.WithTools(probe))
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 4)
	require.False(t, got[2].ok, "no admission outside a durable run")
	require.False(t, got[3].ok, "no admission outside a durable run")
}
