package runs_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// NameIn is the input of the catalogue tests' flows.
type NameIn struct {
	Name string `json:"name" jsonschema:"minLength=1"`
}

// programService starts a run service of program with a flow per name in flows; each flow answers
// with the program that executed it.
func programService(t *testing.T, st *store.Store, program string, workers int, flows ...string) *runs.Service {
	t.Helper()
	reg := engine.NewRegistry()
	for _, f := range flows {
		engine.DefineFlow(reg, f, func(_ context.Context, in NameIn) (string, error) {
			return program + " ran " + f + " for " + in.Name, nil
		})
	}
	svc, err := runs.New(runs.Config{Workers: workers, LeaseTTL: time.Second, Program: program, Logger: testLogger()}, st, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	return svc
}

func catalogueStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), storetest.NewURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return store.New(pool), pool
}

func waitStatus(t *testing.T, st *store.Store, run *store.Run, status string) *store.Run {
	t.Helper()
	var got *store.Run
	require.Eventually(t, func() bool {
		var err error
		got, err = st.RunGet(context.Background(), run.ID)
		require.NoError(t, err)
		require.NotEqual(t, store.RunFailed, got.Status, "run %s failed: %s", run.ID, got.Error)
		return got.Status == status
	}, 30*time.Second, 20*time.Millisecond, "run %s of %s never became %s", run.ID, run.Action, status)
	return got
}

// TestCatalogueRoutesEachRunToTheProgramThatHasItsAction runs two programs on one database, each
// with its own action: every run is executed by the program that has its action and none fails
// NOT_FOUND, a run started through either program is validated against the other's announced
// schema, and a job left in the default queue by an older release is routed on.
func TestCatalogueRoutesEachRunToTheProgramThatHasItsAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, pool := catalogueStore(t)
	a := programService(t, st, "prog-a", 2, "a")
	b := programService(t, st, "prog-b", 2, "b")

	var started []*store.Run
	for i := range 6 {
		svc, action := a, "/flow/b" // each program starts runs of the other's action too
		if i%2 == 0 {
			svc, action = b, "/flow/a"
		}
		if i >= 3 {
			svc = [2]*runs.Service{a, b}[i%2]
		}
		run, err := svc.StartRun(ctx, runs.StartParams{Action: action, Input: json.RawMessage(`{"name":"n"}`)})
		require.NoError(t, err)
		require.Equal(t, store.RunQueued, run.Status)
		started = append(started, run)
	}
	_, err := a.StartRun(ctx, runs.StartParams{Action: "b", Input: json.RawMessage(`{"name":""}`)})
	var ve *runs.ValidationError
	require.ErrorAs(t, err, &ve, "program A validates /flow/b's input against the schema program B announced")
	require.Equal(t, "input/name", ve.Field)
	_, err = a.StartRun(ctx, runs.StartParams{Action: "/flow/nobody", Input: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, runs.ErrInvalid, "an action no program ever announced is refused")

	// A job in the default queue, as releases before the catalogue inserted it.
	old, err := st.RunCreate(ctx, store.RunCreateParams{Action: "/flow/b", Input: json.RawMessage(`{"name":"old"}`)})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state)
		VALUES (jsonb_build_object('run_id', $1::text), 'loupe.run', 25, 'default', 'available')`, old.ID)
	require.NoError(t, err)
	started = append(started, old)

	for _, run := range started {
		done := waitStatus(t, st, run, store.RunSucceeded)
		var out string
		require.NoError(t, json.Unmarshal(done.Output, &out))
		want := "prog-a ran a"
		if run.Action == "/flow/b" {
			want = "prog-b ran b"
		}
		require.True(t, strings.HasPrefix(out, want), "run of %s executed as %q", run.Action, out)
	}

	// Program B's entry is live for three of its heartbeats (here a second in all); on a loaded
	// machine its heartbeat may come late, and its actions then drop out of the list until the
	// next one lands: the list is read until it shows them.
	var keys []string
	require.Eventually(t, func() bool {
		actions, err := a.Actions(ctx)
		require.NoError(t, err)
		keys = keys[:0]
		for _, d := range actions {
			keys = append(keys, d.Key)
		}
		return slices.Equal([]string{"/flow/a", "/flow/b", "/util/generate"}, keys)
	}, 30*time.Second, 20*time.Millisecond, "program A lists its own actions and the live ones of program B: %v", keys)
}

// TestCatalogueRunWaitsQueuedUntilAProgramAnnouncesItsAction proves that a run whose action no
// live program has waits queued, saying why, and starts and succeeds once a program announcing the
// action starts: first for an action never announced, then for one whose program stopped.
func TestCatalogueRunWaitsQueuedUntilAProgramAnnouncesItsAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := catalogueStore(t)
	a := programService(t, st, "prog-a", 2, "a")
	// An insert-only service of program C starts runs of /flow/c and executes none.
	c0 := programService(t, st, "prog-c", 0, "c")

	run, err := c0.StartRun(ctx, runs.StartParams{Action: "c", Input: json.RawMessage(`{"name":"first"}`)})
	require.NoError(t, err)
	never := func() {
		require.Never(t, func() bool {
			got, err := st.RunGet(ctx, run.ID)
			require.NoError(t, err)
			return got.Status != store.RunQueued
		}, 1500*time.Millisecond, 50*time.Millisecond, "no live program has /flow/c: the run waits")
	}
	never()
	reason, err := a.WaitingReason(ctx, run)
	require.NoError(t, err)
	require.Equal(t, "no worker has announced /flow/c", reason)

	c1 := programService(t, st, "prog-c", 1, "c")
	done := waitStatus(t, st, run, store.RunSucceeded)
	require.JSONEq(t, `"prog-c ran c for first"`, string(done.Output))
	reason, err = a.WaitingReason(ctx, done)
	require.NoError(t, err)
	require.Empty(t, reason)

	c1.Stop()
	run, err = a.StartRun(ctx, runs.StartParams{Action: "/flow/c", Input: json.RawMessage(`{"name":"second"}`)})
	require.NoError(t, err, "program A accepts a run of an action a stopped program announced")
	never()
	reason, err = a.WaitingReason(ctx, run)
	require.NoError(t, err)
	require.Regexp(t, `^no worker for /flow/c has been seen since \d\d:\d\d \(program prog-c\)$`, reason)

	programService(t, st, "prog-c", 1, "c")
	done = waitStatus(t, st, run, store.RunSucceeded)
	require.JSONEq(t, `"prog-c ran c for second"`, string(done.Output))
}

func TestProgramQueueIsAValidRiverQueueName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "program_quickstart", runs.ProgramQueue("quickstart"))
	require.Equal(t, "program_my_app_v2", runs.ProgramQueue("My..App-v2!"))
	require.Equal(t, "program_unnamed", runs.ProgramQueue("..."))
	long := runs.ProgramQueue(strings.Repeat("x", 200))
	require.LessOrEqual(t, len(long), 64)
	require.NotEqual(t, long, runs.ProgramQueue(strings.Repeat("x", 201)))
}

// TestCatalogueResolveChecksAndDeniesAnotherProgramsTool resolves, through a service that lacks
// the tool, interrupts of runs a worker of another program executes: an edit is checked against the
// announced tool schema, and a denial reaches the model in the tool's own shape, which only the
// worker knows.
func TestCatalogueResolveChecksAndDeniesAnotherProgramsTool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, pool := catalogueStore(t)
	reg := engine.NewRegistry()
	defineTestAgent(reg, pool, "", "")
	worker, err := runs.New(runs.Config{Workers: 2, LeaseTTL: time.Second, Program: "agents", Logger: testLogger()}, st, reg)
	require.NoError(t, err)
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(worker.Stop)
	ui := programService(t, st, "ui", 0)

	run, err := ui.StartRun(ctx, runs.StartParams{Action: "testAgent", Input: json.RawMessage(`{"scenario":"approve1"}`)})
	require.NoError(t, err)
	waitStatus(t, st, run, store.RunInterrupted)
	its, err := st.InterruptListByRun(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, its, 1)

	_, err = ui.Resolve(ctx, runs.ResolveParams{InterruptID: its[0].ID, Action: runs.ActionEdit, Input: json.RawMessage(`{"amount":-1}`), Actor: "rev"})
	var ve *runs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "input/amount", ve.Field)

	_, err = ui.Resolve(ctx, runs.ResolveParams{InterruptID: its[0].ID, Action: runs.ActionDeny, Comment: "too much", Actor: "rev"})
	require.NoError(t, err)
	done := waitStatus(t, st, run, store.RunSucceeded)
	require.Contains(t, string(done.Output), `refused_by`, "the denial has the confirm tool's own shape")
	require.Contains(t, string(done.Output), `too much`)
}

// TestAFrozenProcessInItsAnnouncementDoesNotStallAnother holds the program's catalogue rows in an
// open transaction, as a process of the program stopped (SIGSTOP) inside its announcement does: a
// second process of the program still starts, says it is alive, and executes runs. Before, its
// Start waited on the lock for as long as the frozen process stayed frozen.
func TestAFrozenProcessInItsAnnouncementDoesNotStallAnother(t *testing.T) {
	t.Parallel()
	st, pool := catalogueStore(t)
	first := programService(t, st, "frozen", 1, "work")
	first.Stop()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var held int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM action_catalogue WHERE program = 'frozen' FOR UPDATE) l`).Scan(&held))
	require.Positive(t, held)

	var before time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&before))
	// Announced since before (its expiry, a second in tests, may be past on a loaded machine).
	announced := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM action_catalogue_workers WHERE program = 'frozen' AND seen_at >= $1`, before).Scan(&n))
		return n
	}
	started := make(chan *runs.Service, 1)
	go func() { started <- programService(t, st, "frozen", 1, "work") }()
	var second *runs.Service
	select {
	case second = <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the second process's Start waited on the frozen one's lock")
	}
	require.Equal(t, 1, announced(), "the second process's own entry is written")
	run, err := second.StartRun(ctx, runs.StartParams{Action: "work", Input: json.RawMessage(`{"name":"x"}`)})
	require.NoError(t, err)
	waitStatus(t, st, run, store.RunSucceeded)
}
