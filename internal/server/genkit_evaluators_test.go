package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/eval"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/store"
)

// evalSetup is a local-mode Loupe with the demo agents, tracing into PostgreSQL, and an evaluator
// of its own, "says": it passes an output that contains "liftoff" and explains with the run's
// status and turns, so a test sees what case it was given.
func evalSetup(t *testing.T) *genkitBundle {
	t.Helper()
	define := func(reg *engine.Registry) {
		engine.DefineEvaluator(reg, "says", "the output says liftoff", func(_ context.Context, c *eval.Case) (*eval.Score, error) {
			var s string
			_ = json.Unmarshal(c.Output, &s)
			return &eval.Score{Pass: strings.Contains(s, "liftoff"), Explanation: fmt.Sprintf("status %s, %d turns", c.Status, c.Turns)}, nil
		})
	}
	b := setup(t, opts{dev: true, stack: true, ingest: true, workers: 2, define: []func(*engine.Registry){define}})
	return &genkitBundle{bundle: b}
}

// evalResponse is runAction's answer to an evaluator call.
type evalResponse struct {
	Result []struct {
		SampleIndex int    `json:"sampleIndex"`
		TestCaseID  string `json:"testCaseId"`
		TraceID     string `json:"traceId"`
		SpanID      string `json:"spanId"`
		Evaluation  struct {
			Score   *float64 `json:"score"`
			Status  string   `json:"status"`
			Error   string   `json:"error"`
			Details struct {
				Reasoning string `json:"reasoning"`
			} `json:"details"`
		} `json:"evaluation"`
	} `json:"result"`
	Telemetry struct {
		TraceID string `json:"traceId"`
	} `json:"telemetry"`
}

func (b *genkitBundle) evaluate(t *testing.T, evaluator, input string) (evalResponse, *http.Response) {
	t.Helper()
	resp := b.post(t, "/api/runAction", `{"key":"/evaluator/`+evaluator+`","input":`+input+`}`)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.False(t, strings.HasSuffix(body, "\n"), "the last line of runAction ends without a newline")
	var r evalResponse
	require.NoError(t, json.Unmarshal([]byte(body), &r), body)
	return r, resp
}

// experimentOf reads GET /api/v1/experiments/{id}.
func (b *genkitBundle) experimentOf(t *testing.T, id string) map[string]any {
	t.Helper()
	resp, err := http.Get(b.url + "/api/v1/experiments/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var d map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	return d
}

// TestGenkitActionsListLoupesEvaluators: GET /api/actions lists the built-ins that need no
// argument and the program's own evaluator as /evaluator/<name>, with the input and output
// schemas and the metadata.evaluator that genkit-tools reads (display name, definition, billed);
// those needing an argument or a recorded run are not listed.
func TestGenkitActionsListLoupesEvaluators(t *testing.T) {
	t.Parallel()
	b := evalSetup(t)
	resp, err := http.Get(b.url + "/api/actions")
	require.NoError(t, err)
	defer resp.Body.Close()
	var actions map[string]struct {
		Key          string         `json:"key"`
		Name         string         `json:"name"`
		Description  string         `json:"description"`
		InputSchema  map[string]any `json:"inputSchema"`
		OutputSchema map[string]any `json:"outputSchema"`
		Metadata     map[string]any `json:"metadata"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&actions))
	var listed []string
	for k := range actions {
		if strings.HasPrefix(k, "/evaluator/") {
			listed = append(listed, k)
		}
	}
	require.ElementsMatch(t, []string{"/evaluator/exact", "/evaluator/json", "/evaluator/schema", "/evaluator/contains",
		"/evaluator/succeeded", "/evaluator/says"}, listed)
	for _, k := range listed {
		a := actions[k]
		require.Equal(t, k, a.Key)
		require.Equal(t, strings.TrimPrefix(k, "/evaluator/"), a.Name)
		require.ElementsMatch(t, []any{"dataset", "evalRunId"}, a.InputSchema["required"], k)
		require.Equal(t, "array", a.OutputSchema["type"], k)
		require.Equal(t, "evaluator", a.Metadata["type"], k)
		em, ok := a.Metadata["evaluator"].(map[string]any)
		require.True(t, ok, "%s has metadata.evaluator", k)
		require.Equal(t, a.Name, em["evaluatorDisplayName"], k)
		require.NotEmpty(t, em["evaluatorDefinition"], k)
		require.Equal(t, k == "/evaluator/says", em["evaluatorIsBilled"], "%s: only the program's own evaluator may call a model", k)
	}
}

// TestGenkitEvaluatorRunsAndRecordsAnExperiment: an evaluator called through runAction answers
// Genkit's EvalResponse per datapoint (score, PASS/FAIL, the explanation as reasoning, the trace
// of the call and a span per case); the evalRunId's experiment has each evaluator called with it
// and their scores; a retried call answers the same scores and writes nothing; two evaluators
// called at once on a new evalRunId both land in the one experiment.
func TestGenkitEvaluatorRunsAndRecordsAnExperiment(t *testing.T) {
	t.Parallel()
	b := evalSetup(t)
	runID := uuid.NewString()
	input := `{"evalRunId":"` + runID + `","dataset":[
		{"testCaseId":"same","input":"a","output":"liftoff","reference":"liftoff"},
		{"testCaseId":"json-equal","input":{"k":1},"output":{"a":1,"b":2},"reference":{"b":2,"a":1}},
		{"input":"c","output":"boom","reference":"liftoff"}]}`

	r, resp := b.evaluate(t, "exact", input)
	traceID := resp.Header.Get("X-Genkit-Trace-Id")
	require.Regexp(t, hexTraceID, traceID)
	require.Equal(t, traceID, r.Telemetry.TraceID)
	require.Len(t, r.Result, 3)
	var got []string
	for i, res := range r.Result {
		require.Equal(t, i, res.SampleIndex)
		require.Equal(t, traceID, res.TraceID, "each case's span is in the call's trace")
		require.Regexp(t, hexSpanID, res.SpanID)
		require.NotNil(t, res.Evaluation.Score)
		got = append(got, fmt.Sprintf("%s=%v/%s", res.TestCaseID, *res.Evaluation.Score, res.Evaluation.Status))
	}
	derived := uuid.NewSHA1(uuid.MustParse("6f2b1c8e-3d4a-5b6c-9d7e-0a1b2c3d4e5f"), []byte(runID+"/2")).String()
	require.Equal(t, []string{"same=1/PASS", "json-equal=0/FAIL", derived + "=0/FAIL"}, got,
		"a datapoint without a testCaseId gets one derived from the evalRunId and its place")
	require.Equal(t, `the output "boom" differs from the reference "liftoff"`, r.Result[2].Evaluation.Details.Reasoning)

	root := b.rootSpan(t, traceID)
	attrs := attrsOf(t, root)
	require.Equal(t, "exact", attrs["genkit:name"])
	require.Equal(t, "evaluator", attrs["genkit:metadata:subtype"])

	j, _ := b.evaluate(t, "json", input)
	require.Equal(t, "PASS", j.Result[1].Evaluation.Status)

	d := b.experimentOf(t, runID)
	exp := d["experiment"].(map[string]any)
	require.Equal(t, runID, exp["id"], "the experiment's id is the evalRunId")
	require.Equal(t, runID, exp["name"])
	require.Equal(t, []any{"exact", "json"}, exp["evaluators"])
	require.Equal(t, "finished", exp["status"])
	require.EqualValues(t, 3, exp["total"])
	require.EqualValues(t, 1, exp["passed"])
	require.Equal(t, "genkit-eval", d["dataset"].(map[string]any)["name"])
	var rows []string
	for _, row := range d["rows"].([]any) {
		row := row.(map[string]any)
		var scores []string
		for _, s := range row["scores"].([]any) {
			s := s.(map[string]any)
			scores = append(scores, fmt.Sprintf("%s=%v/%v", s["evaluator"], s["score"], s["pass"]))
		}
		in, _ := json.Marshal(row["input"])
		rows = append(rows, string(in)+":"+strings.Join(scores, ","))
	}
	require.Equal(t, []string{`"a":exact=1/true,json=1/true`, `{"k":1}:exact=0/false,json=1/true`, `"c":exact=0/false,json=0/false`}, rows)

	// The CLI retrying a call: the same scores, nothing new stored.
	counts := func() []int {
		return []int{b.count(t, "experiments"), b.count(t, "experiment_results"), b.count(t, "experiment_scores"),
			b.count(t, "dataset_examples"), b.count(t, "datasets")}
	}
	before := counts()
	again, _ := b.evaluate(t, "exact", input)
	for i := range again.Result {
		require.Equal(t, r.Result[i].TestCaseID, again.Result[i].TestCaseID)
		require.Equal(t, *r.Result[i].Evaluation.Score, *again.Result[i].Evaluation.Score)
	}
	require.Equal(t, before, counts())
	require.Equal(t, []any{"exact", "json"}, b.experimentOf(t, runID)["experiment"].(map[string]any)["evaluators"])

	// Two evaluators of a new evaluation at once: one experiment with both.
	other := uuid.NewString()
	var wg sync.WaitGroup
	for _, ev := range []string{"contains", "succeeded"} {
		wg.Go(func() {
			resp := b.post(t, "/api/runAction", `{"key":"/evaluator/`+ev+`","input":{"evalRunId":"`+other+`","dataset":[{"input":"a","output":"liftoff","reference":"lift"}]}}`)
			require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
		})
	}
	wg.Wait()
	exp = b.experimentOf(t, other)["experiment"].(map[string]any)
	require.ElementsMatch(t, []any{"contains", "succeeded"}, exp["evaluators"])
	require.EqualValues(t, 1, exp["total"])
	require.EqualValues(t, 1, exp["passed"])
}

// TestGenkitEvaluatorScoresTheRunOfATrace: a datapoint whose trace is a Loupe run's (eval:flow
// against Loupe) is scored with that run (the program's evaluator sees its status and turns), its
// result links to the run, and the experiment is on dataset genkit-<flow> with the flow as action;
// an evaluator needing an argument runs with it from options.
func TestGenkitEvaluatorScoresTheRunOfATrace(t *testing.T) {
	t.Parallel()
	b := evalSetup(t)
	run := b.startRun(t, "/flow/countdown", `{"from":1}`, store.RunSucceeded)
	traceID := strings.ReplaceAll(run.ID.String(), "-", "")
	runID := uuid.NewString()
	input := `{"evalRunId":"` + runID + `","dataset":[{"testCaseId":"t","input":{"from":1},"output":"liftoff","traceIds":["` + traceID + `"]}]}`
	r, _ := b.evaluate(t, "says", input)
	require.Len(t, r.Result, 1)
	require.Equal(t, "PASS", r.Result[0].Evaluation.Status)
	require.Nil(t, r.Result[0].Evaluation.Score, "an evaluator without a score answers none")
	require.Equal(t, fmt.Sprintf("status succeeded, %d turns", run.Turns), r.Result[0].Evaluation.Details.Reasoning)

	rx, _ := b.evaluate(t, "regex", `{"evalRunId":"`+runID+`","options":{"arg":"^lift"},"dataset":[{"testCaseId":"t","input":{"from":1},"output":"liftoff","traceIds":["`+traceID+`"]}]}`)
	require.Equal(t, "PASS", rx.Result[0].Evaluation.Status)

	d := b.experimentOf(t, runID)
	exp := d["experiment"].(map[string]any)
	require.Equal(t, "/flow/countdown", exp["action"])
	require.Equal(t, []any{"says", "regex:^lift"}, exp["evaluators"])
	require.Equal(t, "genkit-countdown", d["dataset"].(map[string]any)["name"])
	row := d["rows"].([]any)[0].(map[string]any)
	require.Equal(t, run.ID.String(), row["run_id"])
	require.Equal(t, "succeeded", row["run_status"])
}

// TestGenkitEvaluatorRefusesBadInput: each mistake is a 400 with Genkit's INVALID_ARGUMENT (an
// unknown evaluator a 404 NOT_FOUND), naming what is wrong, and nothing is recorded; an evalRunId
// that names an experiment Loupe ran itself is refused and that experiment left alone.
func TestGenkitEvaluatorRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := evalSetup(t)
	ctx := context.Background()
	_, err := b.srv.deps.Experiments.CreateDataset(ctx, "mine", "", "test", []store.ExampleParams{{Input: json.RawMessage(`{"from":1}`)}})
	require.NoError(t, err)
	own, err := b.srv.deps.Experiments.Start(ctx, experiments.StartParams{Dataset: "mine", Action: "/flow/countdown",
		Evaluators: []string{"succeeded"}, Tools: "live", CreatedBy: "test"})
	require.NoError(t, err)

	for _, tc := range []struct {
		name, key, input string
		status, code     int
		says             string
	}{
		{"input not an object", "exact", `"x"`, 400, 3, "not an evaluator's input"},
		{"no evalRunId", "exact", `{"dataset":[]}`, 400, 3, "evalRunId: required"},
		{"no dataset", "exact", `{"evalRunId":"e"}`, 400, 3, "dataset: required"},
		{"a datapoint not an object", "exact", `{"evalRunId":"e","dataset":[1]}`, 400, 3, "not an evaluator's input"},
		{"an argument not a string", "regex", `{"evalRunId":"e","options":{"arg":1},"dataset":[]}`, 400, 3, "options/arg"},
		{"a bad pattern", "regex", `{"evalRunId":"e","options":"(","dataset":[]}`, 400, 3, "regex:("},
		{"an argument missing", "tokens", `{"evalRunId":"e","dataset":[]}`, 400, 3, "tokens"},
		{"an unknown evaluator", "nope", `{"evalRunId":"e","dataset":[]}`, 404, 5, `no such evaluator "nope"`},
		{"a Loupe experiment's id", "exact", `{"evalRunId":"` + own.ID.String() + `","dataset":[{"output":"x"}]}`, 400, 3, "which no Genkit evaluation made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.post(t, "/api/runAction", `{"key":"/evaluator/`+tc.key+`","input":`+tc.input+`}`)
			body := readAll(t, resp.Body)
			require.Equal(t, tc.status, resp.StatusCode, body)
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			require.Equal(t, tc.code, e.Code, body)
			require.Contains(t, e.Message, tc.says)
		})
	}
	// What PostgreSQL cannot store is refused before any action, as for every runAction: 422.
	for _, in := range []string{`{"testCaseId":"a\u0000b"}`, `{"output":"a\u0000b"}`} {
		resp := b.post(t, "/api/runAction", `{"key":"/evaluator/exact","input":{"evalRunId":"e","dataset":[`+in+`]}}`)
		body := readAll(t, resp.Body)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
		require.Contains(t, body, "U+0000, which PostgreSQL cannot store")
	}
	require.Equal(t, 0, b.count(t, "experiments WHERE created_by = 'genkit eval'"), "no evaluation recorded")
	require.Equal(t, 0, b.count(t, "datasets WHERE created_by = 'genkit eval'"))
	require.Equal(t, 0, b.count(t, "experiment_scores WHERE evaluator = 'exact'"), "the experiment Loupe ran has no score of the refused call")
}
