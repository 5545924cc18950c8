package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestEvalRunGatesCIOnARegression records approved travelAgent runs, makes a dataset of them,
// runs an experiment whose tools are served from the recordings (the bookings are not made again,
// no reviewer is asked), then one with another model against it as the baseline: eval run prints
// the regressions with their reason and exits 4, as a CI job needs. A JSONL file adds examples as
// a new version, and a broken line is refused by its number.
func TestEvalRunGatesCIOnARegression(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)
	// A worker executes the approved runs' resumes (and may drive an experiment too).
	ctx, stop := context.WithCancel(context.Background())
	worked := make(chan error, 1)
	go func() {
		worked <- Run(ctx, demoProgram(), []string{"worker", "--database-url", dbURL, "--log-level", "error"})
	}()
	defer func() {
		stop()
		require.NoError(t, <-worked)
	}()
	for _, city := range []string{"Lisbon", "Oslo"} {
		_, _, err := devui(t, dbURL, "run", "travelAgent", "--input", `{"destination":"`+city+`"}`, "--wait")
		var ee *exitError
		require.ErrorAs(t, err, &ee, "the booking waits for a reviewer")
		out, _, err := devui(t, dbURL, "interrupts", "list")
		require.NoError(t, err)
		_, _, err = devui(t, dbURL, "interrupts", "resolve", firstField(t, out), "--approve")
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		out, _, err := devui(t, dbURL, "runs", "list", "--status", "succeeded")
		return err == nil && strings.Count(out, "/flow/travelAgent") == 2
	}, 20*time.Second, 50*time.Millisecond)

	out, _, err := devui(t, dbURL, "dataset", "create", "trips", "--from-runs", "action=travelAgent&status=succeeded")
	require.NoError(t, err)
	require.Contains(t, out, "dataset trips: version 1, 2 examples")
	_, _, err = devui(t, dbURL, "dataset", "create", "more", "--from-runs", "action=travelAgent&colour=blue")
	require.ErrorContains(t, err, `"colour" is no filter`)

	out, _, err = devui(t, dbURL, "eval", "run", "--dataset", "trips", "--action", "travelAgent", "--name", "base",
		"--evaluator", "exact", "--evaluator", "trajectory", "--evaluator", "regex:^You're booked", "--quiet")
	require.NoError(t, err, out)
	require.Contains(t, out, "on trips v1: finished, 2/2 scored")
	require.Regexp(t, `this\s+2/2\s+1\.000`, out)
	out, _, err = devui(t, dbURL, "interrupts", "list")
	require.NoError(t, err)
	require.Equal(t, 1, len(strings.Split(strings.TrimSpace(out), "\n")), "the experiment asked nobody: %s", out)

	out, _, err = devui(t, dbURL, "eval", "run", "--dataset", "trips", "--action", "travelAgent", "--name", "other-model",
		"--model", "demo/research", "--baseline", "base", "--evaluator", "exact", "--quiet")
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 4, ee.code, "a regression fails the CI job")
	require.Contains(t, ee.msg, "2 examples that passed in base fail now")
	require.Contains(t, out, "against base: 2 regressions, 0 fixed")
	require.Contains(t, out, "REGRESSION")
	require.Contains(t, out, "the run ended failed: demo research script: unexpected prompt")

	out, _, err = devui(t, dbURL, "eval", "show", "other-model", "--json")
	require.NoError(t, err)
	var sum struct {
		Regressions int `json:"regressions"`
		Rows        []struct {
			Regression bool `json:"regression"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Equal(t, 2, sum.Regressions)
	require.True(t, sum.Rows[0].Regression)

	_, _, err = devui(t, dbURL, "eval", "run", "--dataset", "trips", "--action", "travelAgent", "--evaluator", "exact",
		"--min-pass-rate", "1", "--model", "demo/research", "--quiet")
	require.ErrorAs(t, err, &ee)
	require.Contains(t, ee.msg, "pass rate 0.000 is under --min-pass-rate 1.000")

	dir := t.TempDir()
	file := filepath.Join(dir, "more.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(`{"input": {"destination": "Rome"}, "reference": "You're booked to Rome", "tags": ["hand"]}`+"\n"), 0o644))
	out, _, err = devui(t, dbURL, "dataset", "add", "trips", "--file", file)
	require.NoError(t, err)
	require.Contains(t, out, "dataset trips: version 2, 1 examples added")
	out, _, err = devui(t, dbURL, "dataset", "show", "trips")
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(out, `"input"`))
	out, _, err = devui(t, dbURL, "dataset", "show", "trips", "--version", "1")
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(out, `"input"`), "version 1 is as it was")
	require.NoError(t, os.WriteFile(file, []byte(`{"input": 1}`+"\n"+`{"input": `+"\n"), 0o644))
	_, _, err = devui(t, dbURL, "dataset", "add", "trips", "--file", file)
	require.ErrorContains(t, err, "line 2")
}
