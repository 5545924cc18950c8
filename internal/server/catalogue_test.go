package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestAPIStartsAndResolvesRunsOfAnotherProgramsAction serves a program with no actions of its own
// (devui serve --no-demo) beside a worker of another program that has the demo agents, on one
// database: the API lists the worker's actions, starts runs of them validated against the
// announced input schema, checks a reviewer's edit against the announced tool schema, and the run
// is executed by the worker. With the worker gone, a new run waits and says why.
func TestAPIStartsAndResolvesRunsOfAnotherProgramsAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, storetest.NewURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool)

	workerReg := engine.NewRegistry()
	require.NoError(t, demo.Register(bridge.NewApp(workerReg).(*loupe.App), demo.Config{}))
	// A catalogue entry lives for a lease (renewed every third of it): at one second, a worker
	// starved for a second by a loaded machine (make stress, -race) dropped out of the list
	// before the first read. Nothing here waits for a lease to expire.
	worker, err := runs.New(runs.Config{Workers: 2, LeaseTTL: 10 * time.Second, Program: "agents"}, st, workerReg)
	require.NoError(t, err)
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(worker.Stop)

	served, err := runs.New(runs.Config{Workers: 2, LeaseTTL: 10 * time.Second, Program: "devui"}, st, engine.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, served.Start(ctx))
	t.Cleanup(served.Stop)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: true, Version: "test"}, Deps{Store: st, Runs: served})
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	url := "http://" + srv.Addr()

	var actions struct {
		Actions []engine.ActionDesc `json:"actions"`
	}
	require.Equal(t, http.StatusOK, call(t, "GET", url+"/api/v1/actions", "", &actions))
	var keys []string
	for _, a := range actions.Actions {
		keys = append(keys, a.Key)
	}
	require.Contains(t, keys, "/flow/transferMoney", "the worker's announced actions are listed")

	var e apiError
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", url+"/api/v1/runs",
		`{"action":"transferMoney","input":{"to":"bob","amount":"lots","currency":"CNY"}}`, &e))
	require.Equal(t, "input/amount", e.Error.Details["field"], "the input is checked against the announced schema")

	var run store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", url+"/api/v1/runs",
		`{"action":"transferMoney","input":{"to":"bob","amount":500,"currency":"CNY"}}`, &run))
	require.Equal(t, "/flow/transferMoney", run.Action)

	var list struct {
		Interrupts []store.Interrupt `json:"interrupts"`
	}
	require.Eventually(t, func() bool {
		call(t, "GET", url+"/api/v1/interrupts?status=pending", "", &list)
		return len(list.Interrupts) == 1
	}, 30*time.Second, 20*time.Millisecond)
	it := list.Interrupts[0]
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"edit","input":{"to":"bob","amount":-1,"currency":"CNY"}}`, &e))
	require.Equal(t, "input/amount", e.Error.Details["field"], "the edit is checked against the announced tool schema")
	var resolved store.Interrupt
	require.Equal(t, http.StatusOK, call(t, "POST", url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"edit","input":{"to":"bob","amount":400,"currency":"CNY"}}`, &resolved))

	var detail struct {
		store.Run
		WaitingReason string `json:"waiting_reason"`
	}
	require.Eventually(t, func() bool {
		call(t, "GET", url+"/api/v1/runs/"+run.ID.String(), "", &detail)
		require.NotEqual(t, store.RunFailed, detail.Status, string(detail.Error))
		return detail.Status == store.RunSucceeded
	}, 30*time.Second, 20*time.Millisecond)
	require.Contains(t, string(detail.Output), "400")
	require.Empty(t, detail.WaitingReason)

	worker.Stop()
	require.Equal(t, http.StatusCreated, call(t, "POST", url+"/api/v1/runs",
		`{"action":"transferMoney","input":{"to":"eve","amount":1,"currency":"CNY"}}`, &run))
	call(t, "GET", url+"/api/v1/runs/"+run.ID.String(), "", &detail)
	require.Equal(t, store.RunQueued, detail.Status)
	require.Regexp(t, `^no worker for /flow/transferMoney has been seen since .+ \(program agents\)$`, detail.WaitingReason)
	_, page := get(t, url+"/runs/"+run.ID.String())
	require.True(t, strings.Contains(page, `data-testid="waiting-reason"`) && strings.Contains(page, "(program agents)"),
		"the run page shows why the run waits")
}
