package devui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// deskFlow is a flow of testdata/deskagent run durably to its end, approving every interrupt:
// what must have happened each time the run waits for its reviewers (the effects, in order, and
// how many interrupts it waits on), and at its end.
type deskFlow struct {
	rounds  []deskWait
	effects []string
	output  string // in the final output
	kills   int    // one after each generate call and step that returned
}

type deskWait struct {
	pending int
	effects []string
}

var deskFlows = map[string]deskFlow{
	"twostep": {
		rounds:  []deskWait{{1, nil}},
		effects: []string{"refund 7", "stamp", "notify"}, output: `notify: refund 7 => refunded 7 => sent (`, kills: 3},
	"threestep": {
		rounds:  []deskWait{{1, []string{"lookup"}}, {1, []string{"lookup", "refund 7"}}},
		effects: []string{"lookup", "refund 7", "email"}, output: `email: refund 7 => refunded 7 => emailed`, kills: 3},
	"swallow": {
		rounds:  []deskWait{{1, nil}},
		effects: []string{"refund 7", "notify"}, output: `swallowed: notify: refund 7 => refunded 7 => sent`, kills: 2},
	"typed": {
		rounds:  []deskWait{{1, nil}},
		effects: []string{"refund 7"}, output: `{"refunded":true,"order":7}`, kills: 1},
}

// TestDeskFlowsOfAnotherModuleStopAtInterruptsAcrossKills builds testdata/deskagent, a program
// in a module of its own outside this repository's path (so it can use the public API only),
// written as issue 23's second agent was: flows of two and three generate calls and a step
// (loupe.GenerateText, loupe.Run), one that swallows its generate calls' errors, and
// loupe.GenerateData with a tool that asks a person. Each flow is started with the program's run
// command and executed by its worker command, a process SIGKILLed each time the flow gets past a
// generate call or step (every worker after it takes the run over). Whenever the run waits for
// its reviewers, nothing after the interrupted call has happened (no e-mail before the refund is
// approved, no step); the interrupts are approved with the program's interrupts command, and at
// the end each tool and step acted once and the run succeeded with the flow's output.
func TestDeskFlowsOfAnotherModuleStopAtInterruptsAcrossKills(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "deskagent")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("testdata", "deskagent")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the deskagent module: %s", out)

	for flow, want := range deskFlows {
		t.Run(flow, func(t *testing.T) {
			t.Parallel()
			d := newDesk(t, bin)
			runID := strings.TrimSpace(d.cli(t, "run", flow, "--input", "7"))
			rounds, kills := 0, 0
			for attempt := 0; ; attempt++ {
				require.Less(t, attempt, 16, "the run never finished")
				worker := d.worker(t)
				status := d.settled(t, runID)
				require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
				_ = worker.Wait()
				if status == "paused" {
					require.NoError(t, os.Remove(filepath.Join(d.pause, "paused")))
					kills++
					continue
				}
				if status == "interrupted" {
					require.Less(t, rounds, len(want.rounds), "the run waited for reviewers more often than its flow asks them")
					w := want.rounds[rounds]
					require.Equal(t, w.effects, d.effects(t), "round %d: what had happened when the run waited for its reviewers", rounds)
					pending := d.pending(t, runID)
					require.Len(t, pending, w.pending, "round %d", rounds)
					for _, id := range pending {
						d.cli(t, "interrupts", "resolve", id, "--approve")
					}
					rounds++
					continue
				}
				var output, runErr json.RawMessage
				require.NoError(t, d.pool.QueryRow(context.Background(), `SELECT output, error FROM runs WHERE id = $1`, runID).Scan(&output, &runErr))
				require.Equal(t, "succeeded", status, "run error: %s", runErr)
				require.Equal(t, len(want.rounds), rounds, "rounds of review")
				require.Equal(t, want.effects, d.effects(t), "each tool and step acted once, after its approval")
				if strings.HasPrefix(want.output, "{") {
					require.JSONEq(t, want.output, string(output), "the typed output")
				} else {
					var text string
					require.NoError(t, json.Unmarshal(output, &text))
					require.Contains(t, text, want.output)
				}
				var asked int
				require.NoError(t, d.pool.QueryRow(context.Background(), `SELECT count(*) FROM interrupts WHERE run_id = $1`, runID).Scan(&asked))
				total := 0
				for _, r := range want.rounds {
					total += r.pending
				}
				require.Equal(t, total, asked, "each tool call asked its reviewers once")
				require.Equal(t, want.kills, kills, "a worker was killed after each generate call and step")
				return
			}
		})
	}
}

// desk is one flow's database, effects file and pause directory.
type desk struct {
	bin, url, effectsFile, pause string
	pool                         *pgxpool.Pool
}

func newDesk(t *testing.T, bin string) *desk {
	dir := t.TempDir()
	d := &desk{bin: bin, url: storetest.NewURL(t), effectsFile: filepath.Join(dir, "effects"), pause: filepath.Join(dir, "pause")}
	require.NoError(t, os.Mkdir(d.pause, 0o755))
	pool, err := pgxpool.New(context.Background(), d.url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d.pool = pool
	return d
}

func (d *desk) env() []string {
	return append(os.Environ(), "DATABASE_URL="+d.url, "DESK_EFFECTS="+d.effectsFile, "DESK_PAUSE="+d.pause,
		"LOG_LEVEL=error", "LOUPE_LEASE_TTL=1s")
}

// cli runs a command of the program to its end and returns what it printed.
func (d *desk) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(d.bin, args...)
	cmd.Env = d.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "deskagent %s: %s", strings.Join(args, " "), stderr.String())
	return stdout.String()
}

// worker starts the program's worker command.
func (d *desk) worker(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(d.bin, "worker", "--workers", "1")
	cmd.Env = d.env()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// settled waits until the flow stopped at a pause point ("paused"), or the run waits for its
// reviewers or has ended (its status).
func (d *desk) settled(t *testing.T, runID string) string {
	t.Helper()
	var status string
	require.Eventually(t, func() bool {
		if _, err := os.Stat(filepath.Join(d.pause, "paused")); err == nil {
			status = "paused"
			return true
		}
		require.NoError(t, d.pool.QueryRow(context.Background(), `SELECT status FROM runs WHERE id = $1`, runID).Scan(&status))
		switch status {
		case "interrupted", "succeeded", "failed", "aborted", "cancelled":
			return true
		}
		return false
	}, 90*time.Second, 20*time.Millisecond, "run %s never settled", runID)
	return status
}

// effects lists what the tools and steps did, in order.
func (d *desk) effects(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(d.effectsFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// pending lists the run's pending interrupts.
func (d *desk) pending(t *testing.T, runID string) []string {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), `SELECT id::text FROM interrupts WHERE run_id = $1 AND status = 'pending' ORDER BY id`, runID)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}
