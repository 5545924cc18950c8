package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

type bundle struct {
	svc   *runs.Service
	store *store.Store
	pool  *pgxpool.Pool
	dsn   string
}

// setup gives the test a fresh database with the test agent and a run service with workers
// (none when workers is 0).
func setup(t *testing.T, workers int) *bundle {
	t.Helper()
	ctx := context.Background()
	dsn := storetest.NewURL(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `CREATE TABLE test_effects (run_id text, ref text, at timestamptz DEFAULT now());
		CREATE TABLE test_blocks (run_id text, point text, PRIMARY KEY (run_id, point))`)
	require.NoError(t, err)
	b := &bundle{store: store.New(pool), pool: pool, dsn: dsn}
	b.svc = b.newService(t, workers)
	return b
}

func (b *bundle) newService(t *testing.T, workers int) *runs.Service {
	t.Helper()
	reg := engine.NewRegistry()
	defineTestAgent(reg, b.pool, "", "")
	svc, err := runs.New(runs.Config{Workers: workers, LeaseTTL: time.Second, Logger: testLogger()}, b.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	return svc
}

func (b *bundle) start(t *testing.T, scenario string) *store.Run {
	t.Helper()
	run, err := b.svc.StartRun(context.Background(), runs.StartParams{
		Action: "testAgent", Input: json.RawMessage(`{"scenario":"` + scenario + `"}`), CreatedBy: "tester",
	})
	require.NoError(t, err)
	require.Equal(t, store.RunQueued, run.Status)
	return run
}

// wait polls the run until it reaches status.
func (b *bundle) wait(t *testing.T, id uuid.UUID, status string) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = b.store.RunGet(context.Background(), id)
		require.NoError(t, err)
		return run.Status == status
	}, 60*time.Second, 20*time.Millisecond, "run %s never became %s", id, status)
	return run
}

func (b *bundle) pending(t *testing.T, id uuid.UUID) []*store.Interrupt {
	t.Helper()
	list, err := b.store.InterruptListByRun(context.Background(), id)
	require.NoError(t, err)
	var out []*store.Interrupt
	for _, i := range list {
		if i.Status == store.InterruptPending {
			out = append(out, i)
		}
	}
	return out
}

func (b *bundle) resolve(t *testing.T, i *store.Interrupt, action string, payload string) *store.Interrupt {
	t.Helper()
	p := runs.ResolveParams{InterruptID: i.ID, Action: action, Actor: "rita", Comment: "ok " + action, Version: i.Version}
	switch action {
	case runs.ActionEdit:
		p.Input = json.RawMessage(payload)
	case runs.ActionRespond:
		p.Output = json.RawMessage(payload)
	}
	res, err := b.svc.Resolve(context.Background(), p)
	require.NoError(t, err)
	return res
}

func (b *bundle) effects(t *testing.T, id uuid.UUID) map[string]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT ref, count(*) FROM test_effects WHERE run_id = $1 GROUP BY ref`, id.String())
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var ref string
		var n int
		require.NoError(t, rows.Scan(&ref, &n))
		out[ref] = n
	}
	return out
}

func TestStartInterruptResolveResumeSucceed(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	run := b.start(t, "approve1")
	b.wait(t, run.ID, store.RunInterrupted)
	pending := b.pending(t, run.ID)
	require.Len(t, pending, 1)
	it := pending[0]
	require.Equal(t, "confirm", it.Tool)
	require.Equal(t, "c1", it.Ref)
	require.JSONEq(t, `{"amount":5}`, string(it.Input))
	require.JSONEq(t, `{"message":"Confirm 5?"}`, string(it.Metadata))
	require.NotEmpty(t, it.InputSchema, "the tool's schemas are stored with the interrupt")
	require.Empty(t, b.effects(t, run.ID), "nothing happened before approval")

	b.resolve(t, it, runs.ActionApprove, "")
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.JSONEq(t, `"done: c1={\"ok\":true,\"amount\":5};"`, string(done.Output))
	require.Equal(t, map[string]int{"c1": 1}, b.effects(t, run.ID))
	require.Equal(t, 1, done.Resumes)
	require.EqualValues(t, 20, done.InputTokens, "usage of both model calls is recorded")

	msgs, err := b.store.MessageList(context.Background(), run.ID)
	require.NoError(t, err)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []string{"user", "model", "tool", "model"}, roles, "the resume continued the same history")
	require.Contains(t, string(msgs[1].Content), "resolvedInterrupt")
	calls, err := b.store.ToolCallList(context.Background(), run.ID)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	require.Equal(t, store.ToolCallCompleted, calls[0].Status)
	require.Equal(t, 2, calls[0].Attempt, "interrupted, then run again on approval")
	audit, err := b.store.AuditList(context.Background(), "interrupt", it.ID.String())
	require.NoError(t, err)
	require.Len(t, audit, 1)
	require.Equal(t, "rita", audit[0].Actor)
}

func TestTwoInterruptsInOneTurnResolvedInEitherOrder(t *testing.T) {
	t.Parallel()
	for _, order := range [][]int{{0, 1}, {1, 0}} {
		b := setup(t, 2)
		run := b.start(t, "approve2")
		b.wait(t, run.ID, store.RunInterrupted)
		pending := b.pending(t, run.ID)
		require.Len(t, pending, 2)
		b.resolve(t, pending[order[0]], runs.ActionApprove, "")
		r, err := b.store.RunGet(context.Background(), run.ID)
		require.NoError(t, err)
		require.Equal(t, store.RunInterrupted, r.Status, "one decision left: no resume yet")
		b.resolve(t, pending[order[1]], runs.ActionRespond, `{"ok":false,"amount":0}`)
		done := b.wait(t, run.ID, store.RunSucceeded)
		approved := pending[order[0]].Ref
		require.Equal(t, map[string]int{approved: 1}, b.effects(t, run.ID), "only the approved call ran")
		require.Contains(t, string(done.Output), `\"ok\":false`, "the responded value reached the model")
	}
}

func TestEachResolutionKind(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		action, payload string
		effects         map[string]int
		output          string
		ledgerSource    string
	}{
		"approve": {runs.ActionApprove, "", map[string]int{"c1": 1}, `c1={\"ok\":true,\"amount\":5}`, store.ToolSourceExecuted},
		"edit":    {runs.ActionEdit, `{"amount":7}`, map[string]int{"c1": 1}, `c1={\"ok\":true,\"amount\":7}`, store.ToolSourceExecuted},
		"respond": {runs.ActionRespond, `{"ok":true,"amount":42}`, map[string]int{}, `c1={\"amount\":42,\"ok\":true}`, store.ToolSourceReviewer},
		"deny":    {runs.ActionDeny, "", map[string]int{}, `\"refused_by\":\"rita\",\"why\":\"ok deny\"`, store.ToolSourceReviewer},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 1)
			run := b.start(t, "approve1")
			b.wait(t, run.ID, store.RunInterrupted)
			it := b.resolve(t, b.pending(t, run.ID)[0], tc.action, tc.payload)
			require.Equal(t, map[string]string{"approve": "approved", "edit": "edited", "respond": "responded", "deny": "denied"}[name], it.Status)
			done := b.wait(t, run.ID, store.RunSucceeded)
			require.Contains(t, string(done.Output), tc.output)
			require.Equal(t, tc.effects, b.effects(t, run.ID))
			calls, err := b.store.ToolCallList(context.Background(), run.ID)
			require.NoError(t, err)
			require.Equal(t, tc.ledgerSource, calls[0].Source)
			require.Equal(t, store.ToolCallCompleted, calls[0].Status)
		})
	}
}

func TestConcurrentResolutionsExactlyOneWins(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	run := b.start(t, "approve1")
	b.wait(t, run.ID, store.RunInterrupted)
	it := b.pending(t, run.ID)[0]

	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = b.svc.Resolve(context.Background(), runs.ResolveParams{
				InterruptID: it.ID, Action: runs.ActionApprove, Actor: "r" + string(rune('a'+i%26)), Version: it.Version,
			})
		})
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		require.ErrorIs(t, err, runs.ErrConflict)
		var ce *runs.ConflictError
		require.True(t, errors.As(err, &ce))
		require.Contains(t, ce.Error(), "already approved by")
	}
	require.Equal(t, 1, wins, "exactly one resolution wins")
	b.wait(t, run.ID, store.RunSucceeded)
	require.Equal(t, map[string]int{"c1": 1}, b.effects(t, run.ID), "the tool executed exactly once")
	// One decision was recorded, so one resume was enqueued: the winner's transaction is the only
	// one that wrote. The number of River jobs is not the promise: on a starved machine the
	// recovery sweep may enqueue a takeover of a run whose resume job was fetched but not yet
	// leased within LeaseTTL, and the lease fence lets only one execution act (the tool ran once).
	audit, err := b.store.AuditList(context.Background(), "interrupt", it.ID.String())
	require.NoError(t, err)
	decisions := 0
	for _, a := range audit {
		if a.Action == "interrupt."+runs.ActionApprove {
			decisions++
		}
	}
	require.Equal(t, 1, decisions, "exactly one decision recorded: %+v", audit)
	calls, err := b.store.ToolCallList(context.Background(), run.ID)
	require.NoError(t, err)
	require.Len(t, calls, 1, "one tool call in the ledger")
	require.Equal(t, store.ToolCallCompleted, calls[0].Status)
}

func TestResolutionPayloadValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	run := b.start(t, "approve1")
	b.wait(t, run.ID, store.RunInterrupted)
	it := b.pending(t, run.ID)[0]
	cases := []struct {
		p     runs.ResolveParams
		field string
	}{
		{runs.ResolveParams{Action: "maybe"}, "action"},
		{runs.ResolveParams{Action: runs.ActionEdit}, "input"},
		{runs.ResolveParams{Action: runs.ActionEdit, Input: json.RawMessage(`{"amount":-1}`)}, "input/amount"},
		{runs.ResolveParams{Action: runs.ActionEdit, Input: json.RawMessage(`{"amount":"x"}`)}, "input/amount"},
		{runs.ResolveParams{Action: runs.ActionEdit, Input: json.RawMessage(`{}`)}, "input/amount"},
		{runs.ResolveParams{Action: runs.ActionRespond}, "output"},
		{runs.ResolveParams{Action: runs.ActionRespond, Output: json.RawMessage(`{"ok":"yes","amount":1}`)}, "output/ok"},
		{runs.ResolveParams{Action: runs.ActionRespond, Output: json.RawMessage(`{not json`)}, "output"},
	}
	for _, tc := range cases {
		tc.p.InterruptID, tc.p.Actor = it.ID, "rita"
		_, err := b.svc.Resolve(context.Background(), tc.p)
		require.ErrorIs(t, err, runs.ErrInvalid, "%+v", tc.p)
		var ve *runs.ValidationError
		require.True(t, errors.As(err, &ve), "%v", err)
		require.Equal(t, tc.field, ve.Field, "%v", err)
	}
	after, err := b.store.InterruptGet(context.Background(), it.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.InterruptPending, after.Status, "a rejected payload changes nothing")
	require.Equal(t, it.Version, after.Version)

	_, err = b.svc.Resolve(context.Background(), runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita", Version: it.Version + 5})
	require.ErrorIs(t, err, runs.ErrConflict, "a stale version loses")
	_, err = b.svc.Resolve(context.Background(), runs.ResolveParams{InterruptID: uuid.New(), Action: runs.ActionApprove})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestStartRejectsBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	_, err := b.svc.StartRun(context.Background(), runs.StartParams{Action: "nope"})
	require.ErrorIs(t, err, runs.ErrInvalid)
	_, err = b.svc.StartRun(context.Background(), runs.StartParams{Action: "testAgent", Input: json.RawMessage(`{"scenario":`)})
	require.ErrorIs(t, err, runs.ErrInvalid)
	_, err = b.svc.StartRun(context.Background(), runs.StartParams{Action: "testAgent", Input: json.RawMessage(`{"scenario":3}`)})
	require.ErrorIs(t, err, runs.ErrInvalid, "the input is checked against the flow's schema")
	list, _, err := b.store.RunList(context.Background(), store.RunListParams{})
	require.NoError(t, err)
	require.Empty(t, list, "a rejected start writes nothing")
}

func TestCancelInEachState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("queued", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 0) // no workers: the run stays queued
		run := b.start(t, "approve1")
		got, err := b.svc.Cancel(ctx, run.ID, "rita")
		require.NoError(t, err)
		require.Equal(t, store.RunCancelled, got.Status)
		b.newService(t, 1) // a worker that picks the job up finds nothing to do
		time.Sleep(300 * time.Millisecond)
		r, err := b.store.RunGet(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, store.RunCancelled, r.Status)
		_, err = b.svc.Cancel(ctx, run.ID, "rita")
		require.ErrorIs(t, err, runs.ErrConflict, "cancelling twice is a conflict")
	})

	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1)
		run := b.start(t, "approve1")
		b.wait(t, run.ID, store.RunInterrupted)
		it := b.pending(t, run.ID)[0]
		_, err := b.svc.Cancel(ctx, run.ID, "rita")
		require.NoError(t, err)
		after, err := b.store.InterruptGet(ctx, it.ID, false)
		require.NoError(t, err)
		require.Equal(t, store.InterruptCancelled, after.Status)
		_, err = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "x"})
		require.ErrorIs(t, err, runs.ErrConflict)
	})

	t.Run("running", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 0)
		// A worker whose effect tool blocks until its context ends.
		reg := engine.NewRegistry()
		defineTestAgent(reg, b.pool, "tool", "")
		svc, err := runs.New(runs.Config{Workers: 1, LeaseTTL: time.Second}, b.store, reg)
		require.NoError(t, err)
		require.NoError(t, svc.Start(ctx))
		t.Cleanup(svc.Stop)
		run := b.start(t, "pair")
		require.Eventually(t, func() bool {
			c, err := b.store.ToolCallGet(ctx, run.ID, 0, "b")
			return err == nil && c.Status == store.ToolCallStarted
		}, 30*time.Second, 10*time.Millisecond)
		_, err = b.svc.Cancel(ctx, run.ID, "rita")
		require.NoError(t, err)
		r := b.wait(t, run.ID, store.RunCancelled)
		require.Nil(t, r.LeaseOwner)
		// The blocked tool saw its context end: the worker is free and the run stays cancelled.
		require.Eventually(t, func() bool {
			var n int
			_ = b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&n)
			return n == 0
		}, 30*time.Second, 20*time.Millisecond)
	})
}

func testLogger() *slog.Logger {
	if os.Getenv("LOUPE_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestPromptRunsDurably starts a run of a registered prompt, not only of flows.
func TestPromptRunsDurably(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	reg := engine.NewRegistry()
	defineTestAgent(reg, b.pool, "", "")
	engine.DefinePrompt(reg, "confirmPrompt", "Asks to confirm an amount.", func(in ConfirmIn) (string, error) {
		return "approve1", nil // the test model plays its approve1 scenario
	}, engine.PromptConfig{Model: "test/agent", Tools: []string{"confirm"}})
	svc, err := runs.New(runs.Config{Workers: 1, LeaseTTL: time.Second}, b.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	b.svc = svc
	run, err := svc.StartRun(context.Background(), runs.StartParams{Action: "/prompt/confirmPrompt", Input: json.RawMessage(`{"amount":5}`)})
	require.NoError(t, err)
	b.wait(t, run.ID, store.RunInterrupted)
	b.resolve(t, b.pending(t, run.ID)[0], runs.ActionApprove, "")
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.Contains(t, string(done.Output), `"finishReason": "stop"`, "the output is the prompt's response")
	require.Equal(t, map[string]int{"c1": 1}, b.effects(t, run.ID))
}

// TestCancelRacingAnApprovalNeverLetsAToolRunUnrecorded approves interrupted runs and cancels
// them at the same moment, many times. Whichever wins, the run ends cancelled, and the approved
// tool either never acted or acted with its result in the run's ledger: a tool never runs
// unrecorded after a cancel.
func TestCancelRacingAnApprovalNeverLetsAToolRunUnrecorded(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	ran := 0
	for i := range 12 {
		run := b.start(t, "approve1")
		b.wait(t, run.ID, store.RunInterrupted)
		it := b.pending(t, run.ID)[0]
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita", Version: it.Version})
		})
		wg.Go(func() {
			// Staggered, so that some cancels land before the resume starts, some while its
			// tool runs, and some after it.
			time.Sleep(time.Duration(i) * 4 * time.Millisecond)
			_, _ = b.svc.Cancel(ctx, run.ID, "carl")
		})
		wg.Wait()
		end, err := b.store.RunGet(ctx, run.ID)
		require.NoError(t, err)
		if end.Status != store.RunCancelled {
			// The resume won: it finished before the cancel, which then found nothing to cancel.
			require.Equal(t, store.RunSucceeded, end.Status)
		}
		// Let any execution the approval started finish what it may still do.
		require.Eventually(t, func() bool {
			var jobs int
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'run_id' = $1
				AND state NOT IN ('completed', 'cancelled', 'discarded')`, run.ID.String()).Scan(&jobs))
			return jobs == 0
		}, 30*time.Second, 10*time.Millisecond)
		acted := b.effects(t, run.ID)["c1"]
		require.LessOrEqual(t, acted, 1)
		call, err := b.store.ToolCallGet(ctx, run.ID, 0, "c1")
		require.NoError(t, err)
		if acted == 1 {
			ran++
			require.Equal(t, store.ToolCallCompleted, call.Status, "run %s: the tool acted after the cancel and the run does not say so", run.ID)
		} else {
			require.NotEqual(t, store.ToolCallCompleted, call.Status, "run %s: the ledger says the tool ran, but it never acted", run.ID)
		}
		after, err := b.store.RunGet(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, end.Version, after.Version, "run %s changed after it was cancelled", run.ID)
	}
	t.Logf("the tool acted before the cancel in %d of 12 races", ran)
}

// TestRunGoesOnWhenItsModelAndToolsPrintNUL proves that text PostgreSQL cannot store, produced by
// a model or a tool (U+0000 here, which jsonb refuses), never fails a run: it is stored with
// U+FFFD in its place, in the history, the ledgers and the outcome.
func TestRunGoesOnWhenItsModelAndToolsPrintNUL(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	reg := engine.NewRegistry()
	echo := engine.DefineTool(reg, "echoNUL", "Answers with a NUL.", func(tc *engine.ToolContext, in struct {
		Q string `json:"q"`
	}) (string, error) {
		return "tool\x00said " + in.Q, nil
	})
	scripted.DefineFunc(reg, "nul/model", func(req *engine.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(engine.NewTextPart("thinking\x00aloud"), scripted.ToolCall("echoNUL", "n1", map[string]any{"q": "a\x00b"})), nil
		}
		return scripted.Text("done\x00"), nil
	})
	engine.DefineFlow(reg, "nulAgent", func(ctx context.Context, _ struct{}) (string, error) {
		resp, err := engine.Generate(ctx, reg, engine.WithModelName("nul/model"), engine.WithPrompt("go"), engine.WithTools(echo))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	svc, err := runs.New(runs.Config{Workers: 1, LeaseTTL: time.Second, Logger: testLogger()}, b.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	run, err := svc.StartRun(context.Background(), runs.StartParams{Action: "nulAgent", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	done := b.wait(t, run.ID, store.RunSucceeded)
	require.JSONEq(t, `"done\ufffd"`, string(done.Output))
	call, err := b.store.ToolCallGet(context.Background(), run.ID, 0, "n1")
	require.NoError(t, err)
	require.Contains(t, string(call.Output), "tool\ufffdsaid a\ufffdb")
	calls, err := b.store.ModelCallList(context.Background(), run.ID)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	require.Contains(t, string(calls[0].Response), "thinking\ufffdaloud")
}

// TestClientTextPostgreSQLCannotStoreIsRefusedByTheService proves every caller of the service
// (the CLI and library users, not only the API) gets a validation error naming the field for a
// U+0000 in a run's input or a reviewer's comment or payload, and that nothing is written.
func TestClientTextPostgreSQLCannotStoreIsRefusedByTheService(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	_, err := b.svc.StartRun(ctx, runs.StartParams{Action: "testAgent", Input: json.RawMessage(`{"scenario":"a\u0000b"}`)})
	var ve *runs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "input/scenario", ve.Field)
	require.ErrorIs(t, err, runs.ErrInvalid)
	list, _, err := b.store.RunList(ctx, store.RunListParams{})
	require.NoError(t, err)
	require.Empty(t, list, "no run was created")

	run := b.start(t, "approve1")
	b.wait(t, run.ID, store.RunInterrupted)
	it := b.pending(t, run.ID)[0]
	_, err = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Comment: "ok\x00", Actor: "rita"})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "comment", ve.Field)
	_, err = b.svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionEdit, Input: json.RawMessage(`{"amount":"\ud800"}`), Actor: "rita"})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "input/amount", ve.Field)
	require.Len(t, b.pending(t, run.ID), 1, "the interrupt is still pending")
}
