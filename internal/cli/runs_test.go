package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestRunsListAndGetShowARunsState proves a run's state can be checked from the CLI: a run waiting
// for a reviewer is listed as interrupted, and `runs get` shows its pending interrupt; after the
// reviewer's decision (interrupts resolve), it reads succeeded with its output.
func TestRunsListAndGetShowARunsState(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)
	out, _, err := devui(t, dbURL, "run", "transferMoney", "--input", `{"to":"Ada","amount":5,"currency":"EUR"}`, "--wait")
	require.Error(t, err, "the run waits for a reviewer")
	require.Equal(t, 3, exitCode(err), out)

	out, _, err = devui(t, dbURL, "runs", "list", "--action", "transferMoney")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Contains(t, lines[1], "/flow/transferMoney")
	require.Contains(t, lines[1], "interrupted")
	id := strings.Fields(lines[1])[0]

	var run struct {
		Status  string          `json:"status"`
		Output  json.RawMessage `json:"output"`
		Pending []struct {
			ID   string `json:"id"`
			Tool string `json:"tool"`
		} `json:"pending_interrupts"`
	}
	out, _, err = devui(t, dbURL, "runs", "get", id)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &run), out)
	require.Equal(t, "interrupted", run.Status)
	require.Len(t, run.Pending, 1)
	require.Equal(t, "transfer", run.Pending[0].Tool)

	_, _, err = devui(t, dbURL, "interrupts", "resolve", run.Pending[0].ID, "--approve")
	require.NoError(t, err)
	// The resume runs on a worker.
	ctx, stop := context.WithCancel(context.Background())
	worked := make(chan error, 1)
	go func() {
		worked <- Run(ctx, demoProgram(), []string{"worker", "--database-url", dbURL, "--log-level", "error"})
	}()
	require.Eventually(t, func() bool {
		out, _, err = devui(t, dbURL, "runs", "get", id)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(out), &run), out)
		return run.Status == "succeeded"
	}, time.Minute, 50*time.Millisecond, "the approved run never succeeded")
	stop()
	require.NoError(t, <-worked)
	require.Contains(t, string(run.Output), "Ada")
	require.Empty(t, run.Pending)

	_, _, err = devui(t, dbURL, "runs", "list", "--status", "nonsense")
	require.ErrorContains(t, err, "--status \"nonsense\"")
	_, _, err = devui(t, dbURL, "runs", "get", "not-a-uuid")
	require.ErrorContains(t, err, "run id \"not-a-uuid\"")
}
