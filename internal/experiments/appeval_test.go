package experiments_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// A real Genkit JS app's own evaluator (compat/genkit-js's ai.defineEvaluator sameAsReference)
// scores a Loupe experiment as "<app>:/evaluator/sameAsReference": each example goes to the app
// as a datapoint of Genkit's EvalRequest, and the app's verdict (PASS or FAIL, its reasoning, the
// trace of its evaluation) is the stored score; the evaluator's error fails its example with the
// error. @genkit-ai/evaluator's genkitEval/deep_equal and genkitEval/regex, pinned with Genkit's
// version, score it too. An evaluator the running app does not have is refused when the experiment starts; one of
// an app that is not connected fails each example, saying so: never a silent pass.
func TestAGenkitAppsEvaluatorScoresAnExperiment(t *testing.T) {
	project := genkitapptest.Project(t)
	genkitapptest.Start(t, project, "evalapp")
	st := store.New(storetest.NewPool(t))
	ctx := context.Background()

	m := genkitapp.New(genkitapp.Config{Projects: []string{project}, Store: st, LeaseTTL: 3 * time.Second, Interval: 100 * time.Millisecond})
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)

	reg := engine.NewRegistry()
	engine.DefineFlow(reg, "echo", func(_ context.Context, in string) (string, error) { return "echo: " + in, nil })
	rs, err := runs.New(runs.Config{Workers: 4, LeaseTTL: 2 * time.Second}, st, reg)
	require.NoError(t, err)
	require.NoError(t, rs.Start(ctx))
	t.Cleanup(rs.Stop)
	exp := experiments.New(experiments.Config{LeaseTTL: 2 * time.Second}, st, rs)

	const key = "evalapp:/evaluator/sameAsReference"
	require.Eventually(t, func() bool {
		evs, err := exp.AllEvaluators(ctx)
		require.NoError(t, err)
		for _, ev := range evs {
			if ev.Name == key {
				require.Equal(t, "evalapp", ev.App)
				require.Equal(t, "The output equals the reference (as JSON)", ev.Description)
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "the app's evaluator is listed")

	raw := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	_, err = exp.CreateDataset(ctx, "echoes", "", "test", []store.ExampleParams{
		{Input: raw("a"), Reference: raw("echo: a")},
		{Input: raw("b"), Reference: raw("something else")},
		{Input: raw("boom"), Reference: raw("echo: boom")},
	})
	require.NoError(t, err)

	_, err = exp.Start(ctx, experiments.StartParams{Dataset: "echoes", Action: "/flow/echo", Evaluators: []string{"evalapp:/evaluator/noSuch"}})
	require.ErrorIs(t, err, experiments.ErrInvalid)
	require.ErrorContains(t, err, `the Genkit app "evalapp" has no evaluator /evaluator/noSuch; its evaluators are evalapp:/evaluator/genkitEval/deep_equal, evalapp:/evaluator/genkitEval/regex, `+key)

	drive := func(evaluators ...string) *experiments.Summary {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		e, err := exp.Start(ctx, experiments.StartParams{Dataset: "echoes", Action: "/flow/echo", Evaluators: evaluators, Concurrency: 3})
		require.NoError(t, err)
		e, err = exp.Drive(ctx, e.ID, nil)
		require.NoError(t, err)
		require.Equal(t, store.ExperimentFinished, e.Status)
		sum, err := exp.Summarise(ctx, e, "")
		require.NoError(t, err)
		return sum
	}
	byInput := func(sum *experiments.Summary) map[string]store.Score {
		out := map[string]store.Score{}
		for _, r := range sum.Rows {
			var in string
			require.NoError(t, json.Unmarshal(r.Input, &in))
			require.Len(t, r.Scores, 1)
			out[in] = r.Scores[0]
		}
		return out
	}

	sum := drive(key)
	require.Equal(t, 3, sum.Totals.Scored)
	require.Equal(t, 1, sum.Totals.Passed)
	scores := byInput(sum)
	traceID := regexp.MustCompile(`^[0-9a-f]{32}$`)

	a := scores["a"]
	require.True(t, a.Pass)
	require.NotNil(t, a.Score)
	require.InDelta(t, 1.0, *a.Score, 0)
	require.Equal(t, `compat-js says: "echo: a" equals "echo: a"`, a.Explanation, "the app's reasoning")
	require.NotNil(t, a.TraceID, "the app's trace of the evaluation")
	require.Regexp(t, traceID, *a.TraceID)

	b := scores["b"]
	require.False(t, b.Pass)
	require.InDelta(t, 0.0, *b.Score, 0)
	require.Equal(t, `compat-js says: "echo: b" differs from "something else"`, b.Explanation)

	boom := scores["boom"]
	require.False(t, boom.Pass)
	require.Nil(t, boom.Score)
	require.Contains(t, boom.Explanation, "the evaluator failed: ")
	require.Contains(t, boom.Explanation, "cannot score boom")

	// @genkit-ai/evaluator's metrics that need no model, as the app registers them.
	const deepEqual, regex = "evalapp:/evaluator/genkitEval/deep_equal", "evalapp:/evaluator/genkitEval/regex"
	sum = drive(deepEqual, regex)
	require.Equal(t, 3, sum.Totals.Scored)
	require.Equal(t, 2, sum.Totals.Passed, "a and boom")
	for _, r := range sum.Rows {
		var in string
		require.NoError(t, json.Unmarshal(r.Input, &in))
		require.Len(t, r.Scores, 2)
		for _, sc := range r.Scores {
			require.Equal(t, in != "b", sc.Pass, "%s on %q: %s", sc.Evaluator, in, sc.Explanation)
			require.NotNil(t, sc.TraceID)
		}
		if in == "b" {
			de := r.Scores[0]
			if de.Evaluator != deepEqual {
				de = r.Scores[1]
			}
			require.Equal(t, deepEqual, de.Evaluator)
			require.Contains(t, de.Explanation, "Expected values to be strictly deep-equal", "Node's assert message, the plugin's reasoning")
		}
	}

	// An app nobody connected: every example fails, saying so.
	sum = drive("ghost:/evaluator/sameAsReference")
	require.Equal(t, 3, sum.Totals.Scored)
	require.Equal(t, 0, sum.Totals.Passed)
	for _, sc := range byInput(sum) {
		require.False(t, sc.Pass)
		require.Contains(t, sc.Explanation, `the evaluator could not run: no Genkit app named "ghost" has been connected to Loupe`)
	}

	// The app gone: its evaluator fails each example with the reason, not the experiment.
	m.Stop()
	sum = drive(key)
	require.Equal(t, 0, sum.Totals.Passed)
	for _, sc := range byInput(sum) {
		require.False(t, sc.Pass)
		require.Contains(t, sc.Explanation, `the Genkit app "evalapp" is not running`)
	}
	_, err = genkitapp.FindEvaluator(ctx, st, key, nil)
	require.True(t, errors.Is(err, genkitapp.ErrAppNotRunning))
}
