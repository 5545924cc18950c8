package genkitapp_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/store"
)

// storedError is a run's stored error.
type storedError struct {
	Status  string         `json:"status"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

func runError(t *testing.T, run *store.Run) storedError {
	t.Helper()
	var e storedError
	require.NoError(t, json.Unmarshal(run.Error, &e), "run error %s", run.Error)
	return e
}

// TestAppToolThatInterruptsSaysItAskedAPerson runs the app's interrupting tools on their own (no
// generate around them to pause): the run fails FAILED_PRECONDITION saying that the tool asked a
// person, linked to the app's trace, never INTERNAL with Genkit JS's empty code-13 error.
func TestAppToolThatInterruptsSaysItAskedAPerson(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	genkitapptest.Start(t, dir, "tools")
	b := setup(t, dir)
	b.waitLive(t, "tools")

	for _, tool := range []string{"/tool/approveTransfer", "/tool/transferMoney"} {
		run := b.start(t, genkitapp.Key("tools", tool), `{"to":"LIS","amount":420}`)
		done := b.wait(t, run.ID, store.RunFailed)
		e := runError(t, done)
		require.Equal(t, "FAILED_PRECONDITION", e.Status, "%s: %s", tool, done.Error)
		require.Contains(t, e.Message, "interrupted to ask a person")
		require.NotContains(t, e.Message, "code 13")
		require.Contains(t, e.Details, "interrupt", "the stored error carries the interrupt")
		require.NotNil(t, done.TraceID, "the run is linked to the app's trace")
	}
}

// TestUnresumableInterruptedOutputIsNoSilentSuccess runs, in an app without a default model, a
// flow returning its interrupted generate response (which names no model) and a flow returning
// its interrupts in an object of its own: neither is a success nobody hears of. Each fails
// FAILED_PRECONDITION naming what is missing, with the interrupts, and keeps the flow's output.
func TestUnresumableInterruptedOutputIsNoSilentSuccess(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	genkitapptest.Start(t, dir, "nomodel", "NO_DEFAULT_MODEL=1")
	b := setup(t, dir)
	b.waitLive(t, "nomodel")

	run := b.start(t, genkitapp.Key("nomodel", "/flow/transferFlow"), `{"to":"Ann","amount":9}`)
	done := b.wait(t, run.ID, store.RunFailed)
	e := runError(t, done)
	require.Equal(t, "FAILED_PRECONDITION", e.Status)
	require.Contains(t, e.Message, "Add a `model` field")
	require.Contains(t, e.Message, `approveTransfer asks "Send 9 to Ann?"`)
	require.Equal(t, "model", e.Details["unresumable"])
	require.Len(t, e.Details["interrupts"], 1)
	require.Contains(t, string(done.Output), `"finishReason": "interrupted"`, "the flow's output is kept")

	run = b.start(t, genkitapp.Key("nomodel", "/flow/approvalStatusFlow"), `{"to":"Ann","amount":9}`)
	done = b.wait(t, run.ID, store.RunFailed)
	e = runError(t, done)
	require.Equal(t, "FAILED_PRECONDITION", e.Status)
	require.Equal(t, "generate response", e.Details["unresumable"])
	require.Contains(t, e.Message, `approveTransfer asks "Send 9 to Ann?"`)
	require.Contains(t, string(done.Output), `"status": "interrupted"`)

	// An output with no interrupt in it is a success as before.
	run = b.start(t, genkitapp.Key("nomodel", "/flow/echo"), `"hi"`)
	b.wait(t, run.ID, store.RunSucceeded)
}
