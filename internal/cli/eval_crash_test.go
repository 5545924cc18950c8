package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestEvalRunKilledMidwayIsFinishedByAWorker SIGKILLs a real `devui eval run` process in the
// middle of its experiment; a real `devui worker` started after it takes the experiment over once
// its lease has expired, and finishes it: every example run once (one run each, none started
// twice), every run ended, every example scored once with every evaluator.
func TestEvalRunKilledMidwayIsFinishedByAWorker(t *testing.T) {
	t.Parallel()
	bin := buildDevui(t)
	dbURL := storetest.NewURL(t)
	dir := newDataDir(t)
	const examples = 10
	file := filepath.Join(t.TempDir(), "countdowns.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat(`{"input": {"from": 3}, "reference": "liftoff"}`+"\n", examples)), 0o644))
	_, _, err := devui(t, dbURL, "dataset", "create", "countdowns", "--file", file)
	require.NoError(t, err)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	scored := func() (n int) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM experiment_results WHERE status = 'scored'`).Scan(&n))
		return n
	}

	evalRun := runDevui(t, bin, dir, "eval", "run", "--database-url", dbURL, "--dataset", "countdowns", "--action", "countdown",
		"--name", "killed", "--tools", "live", "--evaluator", "exact", "--evaluator", "succeeded", "--concurrency", "2",
		"--lease-ttl", "2s", "--quiet")
	require.Eventually(t, func() bool { return scored() >= 2 }, time.Minute, 20*time.Millisecond, "eval run never scored 2 examples")
	evalRun.kill9(t)
	at := scored()
	require.Less(t, at, examples, "the experiment was killed mid-way")

	worker := runDevui(t, bin, dir, "worker", "--database-url", dbURL, "--workers", "2", "--lease-ttl", "2s")
	var status string
	require.Eventually(t, func() bool {
		require.NoError(t, conn.QueryRow(ctx, `SELECT status FROM experiments WHERE name = 'killed'`).Scan(&status))
		return status == "finished"
	}, 2*time.Minute, 50*time.Millisecond, "the worker never finished the experiment (scored %d at the kill)", at)
	worker.interrupt(t)

	var results, scoredOnce, runs, runsEnded, scores, passed int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'scored' AND scored_at IS NOT NULL) FROM experiment_results`).
		Scan(&results, &scoredOnce))
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'succeeded') FROM runs
		WHERE labels ->> 'loupe.experiment' = (SELECT id::text FROM experiments WHERE name = 'killed')`).Scan(&runs, &runsEnded))
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE pass) FROM experiment_scores`).Scan(&scores, &passed))
	require.Equal(t, examples, results)
	require.Equal(t, examples, scoredOnce)
	require.Equal(t, examples, runs, "each example was started once: one run each")
	require.Equal(t, examples, runsEnded, "every example's run succeeded, the killed process's taken over")
	require.Equal(t, 2*examples, scores, "each example scored once by each evaluator")
	require.Equal(t, 2*examples, passed)

	out, _, err := devui(t, dbURL, "eval", "show", "killed")
	require.NoError(t, err)
	require.Contains(t, out, "finished, 10/10 scored")
}
