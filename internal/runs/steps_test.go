package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// stepsAgent registers, on a registry of its own, flows that use steps against the desk's model
// and refund tool, and serves them.
type stepsAgent struct {
	*bundle
	reg        *engine.Registry
	executions atomic.Int64 // executions of the flow under test
	calls      atomic.Int64 // calls of the step function under test
}

func setupSteps(t *testing.T) *stepsAgent {
	t.Helper()
	sa := &stepsAgent{bundle: setup(t, 0), reg: engine.NewRegistry()}
	refund := engine.DefineTool(sa.reg, "deskRefund", "Refunds an order once approved.", func(tc *engine.ToolContext, in RefundIn) (string, error) {
		if !tc.IsResumed() {
			return "", tc.Interrupt(nil)
		}
		return "refunded", nil
	})
	scripted.DefineFunc(sa.reg, "desk/model", deskScript)
	refundGen := func(ctx context.Context) (string, error) {
		return generateText(ctx, sa.reg, engine.WithModelName("desk/model"), engine.WithPrompt("refund"), engine.WithTools(refund))
	}
	// changing calls another step on its second execution than on its first.
	engine.DefineFlow(sa.reg, "changing", func(ctx context.Context, _ struct{}) (string, error) {
		name := "a"
		if sa.executions.Add(1) > 1 {
			name = "b"
		}
		if _, err := engine.Run(ctx, name, func() (int, error) { sa.calls.Add(1); return 1, nil }); err != nil {
			return "", err
		}
		return refundGen(ctx)
	})
	// fallback's step fails on its first call only; the flow takes another branch on an error.
	engine.DefineFlow(sa.reg, "fallback", func(ctx context.Context, _ struct{}) (string, error) {
		price, err := engine.Run(ctx, "price", func() (int, error) {
			if sa.calls.Add(1) == 1 {
				return 0, errors.New("pricing service down")
			}
			return 42, nil
		})
		branch := "priced"
		if err != nil {
			branch = "fallback: " + err.Error()
		}
		text, err := refundGen(ctx)
		if err != nil {
			return "", err
		}
		_ = price
		return branch + " / " + text, nil
	})
	// overlapping starts a step while another is still running.
	engine.DefineFlow(sa.reg, "overlapping", func(ctx context.Context, _ struct{}) (string, error) {
		started, release := make(chan struct{}), make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, err := engine.Run(ctx, "slow", func() (int, error) { close(started); <-release; return 1, nil })
			first <- err
		}()
		<-started
		_, err := engine.Run(ctx, "beside", func() (int, error) { return 2, nil })
		close(release)
		if ferr := <-first; ferr != nil {
			return "", ferr
		}
		return "", err
	})
	sa.svc = sa.serve(t, sa.reg, runs.Config{Workers: 2, LeaseTTL: time.Second})
	return sa
}

// TestAFlowThatChangesItsStepsFailsWithANonDeterminismError: a re-execution that calls another
// step than the recorded one at the same point fails the run with an error naming both, and
// runs nothing past it.
func TestAFlowThatChangesItsStepsFailsWithANonDeterminismError(t *testing.T) {
	t.Parallel()
	sa := setupSteps(t)
	run := sa.startFlow(t, "changing")
	r := sa.settled(t, run.ID, nil)
	require.Equal(t, store.RunInterrupted, r.Status)
	for _, i := range sa.pending(t, run.ID) {
		sa.resolve(t, i, runs.ActionApprove, "")
	}
	r = sa.wait(t, run.ID, store.RunFailed)
	var e struct{ Status, Message string }
	require.NoError(t, json.Unmarshal(r.Error, &e))
	require.Equal(t, "FAILED_PRECONDITION", e.Status)
	require.Contains(t, e.Message, `non-deterministic flow: its op 0 is step "b", where the recorded execution made step "a"`)
	require.EqualValues(t, 1, sa.calls.Load(), "the changed step did not run")
	calls, err := sa.store.ToolCallList(context.Background(), run.ID)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	require.Equal(t, store.ToolCallInterrupted, calls[0].Status, "the approved refund never ran")
}

// TestAStepsErrorIsJournaledToo: a step that failed on the first execution fails again on the
// next, from the journal, though its function would now succeed: the flow takes the branch it
// took before the interrupt.
func TestAStepsErrorIsJournaledToo(t *testing.T) {
	t.Parallel()
	sa := setupSteps(t)
	run := sa.startFlow(t, "fallback")
	require.Equal(t, store.RunInterrupted, sa.settled(t, run.ID, nil).Status)
	for _, i := range sa.pending(t, run.ID) {
		sa.resolve(t, i, runs.ActionApprove, "")
	}
	r := sa.wait(t, run.ID, store.RunSucceeded)
	require.JSONEq(t, `"fallback: UNKNOWN: pricing service down / refund => \"refunded\""`, string(r.Output))
	require.EqualValues(t, 1, sa.calls.Load())
	steps, err := sa.store.StepList(context.Background(), run.ID)
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, store.StepKindStep, steps[0].Kind)
	require.JSONEq(t, `{"status":"UNKNOWN","message":"pricing service down"}`, string(steps[0].Error))
	require.Equal(t, store.StepKindGenerate, steps[1].Kind)
}

// TestStepsOfADurableFlowRunOneAtATime: a step started while another runs fails with an error
// that says why, instead of being journaled in an order the next execution may not repeat.
func TestStepsOfADurableFlowRunOneAtATime(t *testing.T) {
	t.Parallel()
	sa := setupSteps(t)
	run := sa.startFlow(t, "overlapping")
	r := sa.wait(t, run.ID, store.RunFailed)
	require.Contains(t, string(r.Error), `step \"beside\" started while step \"slow\" was still running: a durable flow makes its generate calls and steps one at a time`)
}

// TestExactReplayServesStepsFromTheRecording: an exact replay of a run with steps serves them
// from the original's journal (the clock is not read again, no effect repeats), and ends as the
// original did.
func TestExactReplayServesStepsFromTheRecording(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	run := b.startFlow(t, "deskSteps")
	require.Equal(t, store.RunInterrupted, b.settled(t, run.ID, nil).Status)
	for _, i := range b.pending(t, run.ID) {
		b.resolve(t, i, runs.ActionApprove, "")
	}
	orig := b.wait(t, run.ID, store.RunSucceeded)
	replay, err := b.svc.Replay(context.Background(), runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayExact, ApplyResolutions: true})
	require.NoError(t, err)
	done := b.wait(t, replay.ID, store.RunSucceeded)
	require.JSONEq(t, string(orig.Output), string(done.Output), "the replay read the recorded clock")
	require.Equal(t, map[string]int{}, b.effects(t, replay.ID), "no step or tool of the replay acted")
	steps, err := b.store.StepList(context.Background(), replay.ID)
	require.NoError(t, err)
	require.NotEmpty(t, steps)
	require.Equal(t, "nonce", steps[0].Name)
}

// TestForkKeepsTheStepsBeforeItsTurn: a fork copies the journal of the ops before the generate
// call it forks, so a step before the fork point is served as recorded (the clock the original
// read), and the steps after it run for the fork.
func TestForkKeepsTheStepsBeforeItsTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	run := b.startFlow(t, "deskSteps")
	require.Equal(t, store.RunInterrupted, b.settled(t, run.ID, nil).Status)
	for _, i := range b.pending(t, run.ID) {
		b.resolve(t, i, runs.ActionApprove, "")
	}
	orig := b.wait(t, run.ID, store.RunSucceeded)
	fork, err := b.svc.Replay(context.Background(), runs.ReplayParams{RunID: orig.ID, Mode: store.ReplayFork, Turn: ptr(1)})
	require.NoError(t, err)
	done := b.wait(t, fork.ID, store.RunSucceeded)
	require.JSONEq(t, string(orig.Output), string(done.Output), "the fork read the recorded clock")
	require.Equal(t, map[string]int{"after": 1}, b.effects(t, fork.ID), "the step before the fork point did not run again; the one after it did")
	steps, err := b.store.StepList(context.Background(), fork.ID)
	require.NoError(t, err)
	var kinds []string
	for _, st := range steps {
		kinds = append(kinds, st.Kind+":"+st.Name)
	}
	require.Equal(t, []string{"step:nonce", "generate:", "step:after"}, kinds)
}

// TestAStepIsASpanAsGenkitsAndSaysWhenTheJournalServedIt: a loupe.Run step is a span of its own
// under the flow's, typed as Genkit Go's genkit.Run types it (flowStep, subtype flowStep, its
// output), in each execution of a durable flow; the execution after an approval, which gets the
// step's result from the journal, marks its span loupe.step.journaled with the same output.
func TestAStepIsASpanAsGenkitsAndSaysWhenTheJournalServedIt(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := engine.NewRegistry(engine.WithTracerProvider(tp))
	defineDeskAgent(reg, b.pool, "", "")
	b.svc = b.serve(t, reg, runs.Config{Workers: 1, LeaseTTL: time.Second})

	run := b.startFlow(t, "deskSteps")
	require.Equal(t, store.RunInterrupted, b.settled(t, run.ID, nil).Status)
	for _, i := range b.pending(t, run.ID) {
		b.resolve(t, i, runs.ActionApprove, "")
	}
	b.wait(t, run.ID, store.RunSucceeded)
	steps, err := b.store.StepList(context.Background(), run.ID)
	require.NoError(t, err)
	nonce := string(steps[0].Output)

	spans := exp.GetSpans()
	flows := map[string]bool{}
	for _, s := range spans {
		if s.Name == "deskSteps" {
			flows[s.SpanContext.SpanID().String()] = true
		}
	}
	var nonces, afters []tracetest.SpanStub
	for _, s := range spans {
		switch s.Name {
		case "nonce":
			nonces = append(nonces, s)
		case "after":
			afters = append(afters, s)
		}
	}
	require.Len(t, nonces, 2, "a span in each execution: the first, and the one after the approval")
	require.Len(t, afters, 1)
	for i, s := range append(nonces, afters...) {
		require.True(t, flows[s.Parent.SpanID().String()], "step span %s nests under a span of the flow", s.Name)
		attrs := map[string]any{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.AsInterface()
		}
		require.Equal(t, "flowStep", attrs[engine.AttrType], s.Name)
		require.Equal(t, "flowStep", attrs[engine.AttrSubtype], s.Name)
		require.Equal(t, s.Name, attrs[engine.AttrName])
		require.Equal(t, engine.StateSuccess, attrs[engine.AttrState], s.Name)
		require.Equal(t, "/{deskSteps,t:action,s:flow}/{"+s.Name+",t:flowStep,s:flowStep}", attrs[engine.AttrPath], s.Name)
		if s.Name == "nonce" {
			require.Equal(t, nonce, attrs[engine.AttrOutput], "both executions' spans show the journaled clock")
		}
		_, journaled := attrs[engine.AttrStepJournaled]
		require.Equal(t, i == 1, journaled, "only the step the journal served is marked (%s, span %d)", s.Name, i)
	}
}
