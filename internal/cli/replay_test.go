package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// devui runs the devui command line against dbURL and returns its stdout, stderr and error.
func devui(t *testing.T, dbURL string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(demoProgram())
	cmd.SetArgs(append(args, "--database-url", dbURL, "--log-level", "error"))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestBulkReplayReportsTheRunsThatDiverged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.NewURL(t)
	for _, topic := range []string{"alpha", "beta"} {
		_, _, err := devui(t, dbURL, "run", "researchAgent", "--input", `{"topic":"`+topic+`","depth":2}`, "--wait")
		require.NoError(t, err)
	}

	out, progress, err := devui(t, dbURL, "replay", "--action", "researchAgent", "--since", "1h", "--mode", "exact")
	require.NoError(t, err, out)
	require.Contains(t, out, "replayed 2 runs of /flow/researchAgent: 2 identical, 0 diverged")
	require.Contains(t, progress, "] 2/2, 0 diverged", "a progress bar on stderr")

	// Change what one original recorded for a tool of turn 1: its replay with live tools now
	// differs there.
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var orig string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id::text FROM runs WHERE input->>'topic' = 'beta' AND replay_of IS NULL`).Scan(&orig))
	tag, err := pool.Exec(ctx, `UPDATE tool_calls SET output = '{"output":{"source":"doc-0000"}}' WHERE run_id = $1 AND turn = 1 AND ref = 'r1-0'`, orig)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	out, _, err = devui(t, dbURL, "replay", "--action", "researchAgent", "--since", "1h", "--tools", "live")
	var ee *exitError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.Equal(t, exitDiverged, ee.code, "a divergence fails the regression run")
	require.Contains(t, out, "2 runs of /flow/researchAgent: 1 identical, 1 diverged")
	require.Contains(t, out, orig+" -> ")
	require.Contains(t, out, "turn 1 tool_output search (ref r1-0) at /output")

	// One run, forked from turn 1 and followed to the end.
	out, info, err := devui(t, dbURL, "replay", orig, "--mode", "fork", "--turn", "1", "--wait")
	require.NoError(t, err, info)
	require.Contains(t, out, "output:")
	require.Contains(t, info, "fork ")

	_, _, err = devui(t, dbURL, "replay")
	require.ErrorContains(t, err, "give a run id")
	_, _, err = devui(t, dbURL, "replay", orig, "--mode", "fork")
	require.ErrorContains(t, err, "turn")
	require.False(t, strings.Contains(out, "diverged"))
}

// TestBulkReplayComparesEveryModeWithTheOriginals: a bulk re-run or fork compares each replay's
// status and output with its original's, says which differ, and exits with 4 when any does.
func TestBulkReplayComparesEveryModeWithTheOriginals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.NewURL(t)
	for _, topic := range []string{"gamma", "delta"} {
		_, _, err := devui(t, dbURL, "run", "researchAgent", "--input", `{"topic":"`+topic+`","depth":2}`, "--wait")
		require.NoError(t, err)
	}

	// Unchanged re-runs of a deterministic agent end as their originals did.
	out, _, err := devui(t, dbURL, "replay", "--action", "researchAgent", "--since", "1h", "--mode", "rerun")
	require.NoError(t, err, out)
	require.Contains(t, out, "replayed 2 runs of /flow/researchAgent (rerun): 2 with the same status and output, 0 diverged")

	// A turn limit makes every re-run abort where every original succeeded.
	out, _, err = devui(t, dbURL, "replay", "--action", "researchAgent", "--since", "1h", "--mode", "rerun", "--max-turns", "1")
	var ee *exitError
	require.True(t, errors.As(err, &ee), "%v\n%s", err, out)
	require.Equal(t, exitDiverged, ee.code)
	require.Contains(t, out, "0 with the same status and output, 2 diverged")
	require.Contains(t, out, `status: "succeeded" -> "aborted"`)
	require.NotContains(t, out, "as its original did")

	// Every original's output changed: every fork now differs in its output.
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `UPDATE runs SET output = '"an older summary"' WHERE replay_of IS NULL AND fork_of IS NULL`)
	require.NoError(t, err)
	out, _, err = devui(t, dbURL, "replay", "--action", "researchAgent", "--since", "1h", "--mode", "fork", "--turn", "1")
	require.True(t, errors.As(err, &ee), "%v\n%s", err, out)
	require.Equal(t, exitDiverged, ee.code)
	require.Contains(t, out, "(fork): 0 with the same status and output, 2 diverged")
	require.Contains(t, out, `output: "an older summary" -> `)

	// No run to replay is an error, not a successful regression run.
	out, _, err = devui(t, dbURL, "replay", "--action", "nope", "--since", "1h")
	require.Error(t, err, out)
	require.Contains(t, err.Error(), "no run of nope to replay")
	require.NotEqual(t, 0, exitCode(err))
}

func TestReplayRefusesAnExplicitZeroTurnLimitOrEmptySystem(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)
	_, _, err := devui(t, dbURL, "run", "countdown", "--input", `{"from":1}`, "--wait")
	require.NoError(t, err)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM runs`).Scan(&id))
	_, _, err = devui(t, dbURL, "replay", id, "--mode", "rerun", "--max-turns", "0")
	require.ErrorContains(t, err, "max_turns: must be 1 or more")
	_, _, err = devui(t, dbURL, "replay", id, "--mode", "rerun", "--system", "")
	require.ErrorContains(t, err, "omit system")
}
