package genkitapp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestAppRunsLinkEachExecutionsTrace: the trace id the app names when Loupe calls it links each
// execution's trace to the run (run_traces), whatever the app's spans carry: a run resumed in the
// app has both its traces, in order. The first is the run's trace_id as soon as the app's response
// headers name it, while the run still runs, and stays after a cancel.
func TestAppRunsLinkEachExecutionsTrace(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	genkitapptest.Start(t, dir, "links")
	b := setup(t, dir)
	b.waitLive(t, "links")
	ctx := context.Background()

	run := b.start(t, genkitapp.Key("links", "/prompt/transferPrompt"), `{"to":"Bob","amount":50}`)
	stopped := b.wait(t, run.ID, store.RunInterrupted)
	require.NotNil(t, stopped.TraceID)
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, run.ID).ID, Action: runs.ActionRespond,
		Output: json.RawMessage(`{"approved":true}`), Actor: "rita"})
	require.NoError(t, err)
	b.wait(t, run.ID, store.RunSucceeded)
	var traces []string
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT array_agg(trace_id ORDER BY execution) FROM run_traces WHERE run_id = $1`, run.ID).Scan(&traces))
	require.Len(t, traces, 2, "one trace per execution")
	require.Equal(t, *stopped.TraceID, traces[0])
	require.NotEqual(t, traces[0], traces[1], "the app resumed in a trace of its own")

	run = b.start(t, genkitapp.Key("links", "/flow/countdown"), `{"from":50,"pauseMs":200}`)
	var running *store.Run
	require.Eventually(t, func() bool {
		running, err = b.store.RunGet(ctx, run.ID)
		require.NoError(t, err)
		return running.Status == store.RunRunning && running.TraceID != nil
	}, 30*time.Second, 20*time.Millisecond, "the running run has the app's trace id")
	_, err = b.runs.Cancel(ctx, run.ID, "rita")
	require.NoError(t, err)
	cancelled := b.wait(t, run.ID, store.RunCancelled)
	require.NotNil(t, cancelled.TraceID, "a cancelled run keeps its trace")
	require.Equal(t, *running.TraceID, *cancelled.TraceID)
}
