package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/eval"
	"github.com/loupe-dev/loupe/internal/store"
)

// Genkit's eval tools (genkit eval:run, eval:flow, the Dev UI's evaluations) call evaluators
// through the reflection API: POST /api/runAction {key: "/evaluator/<name>", input: EvalRequest}
// (genkit/ai's evaluator.ts), answered with one EvalResponse per datapoint. Loupe answers them
// with its evaluators, and records each evaluation run (an evalRunId) as an experiment:
//
//   - the experiment's id is the evalRunId when it is a UUID (the CLI's are), so that
//     `devui eval show <evalRunId>` finds it; its name is the evalRunId;
//   - its dataset is genkit-<flow> when the datapoints' traces are runs of one action (eval:flow
//     against Loupe), else genkit-eval; each datapoint is an example keyed by its input and
//     reference, so that two evaluations of the same data line up example by example;
//   - each evaluator called with the evalRunId adds itself and its scores, one transaction per
//     call, and a call made again changes nothing;
//   - a datapoint whose last trace is a Loupe run's is scored with that run (status, tool calls,
//     turns, tokens, latency) and its result links to it.

// GenkitEvalRequest is the input of a Genkit evaluator action: EvalRequest.
type GenkitEvalRequest struct {
	Dataset   []GenkitDataPoint `json:"dataset"`
	EvalRunID string            `json:"evalRunId"`
	// Options is the evaluator's configuration: for Loupe's evaluators, the argument of one that
	// takes one (regex, tokens, latency, judge, ...), as {"arg": "..."} or as a string.
	Options   json.RawMessage `json:"options,omitempty"`
	BatchSize *int            `json:"batchSize,omitempty"`
}

// GenkitDataPoint is one datapoint to score: Genkit's BaseDataPoint.
type GenkitDataPoint struct {
	TestCaseID string            `json:"testCaseId,omitempty"`
	Input      json.RawMessage   `json:"input,omitempty"`
	Output     json.RawMessage   `json:"output,omitempty"`
	Context    []json.RawMessage `json:"context,omitempty"`
	Reference  json.RawMessage   `json:"reference,omitempty"`
	TraceIDs   []string          `json:"traceIds,omitempty"`
}

// GenkitEvalResponse is one datapoint's score, as Genkit's evaluators answer it (EvalResponse).
type GenkitEvalResponse struct {
	SampleIndex int         `json:"sampleIndex"`
	TestCaseID  string      `json:"testCaseId"`
	TraceID     string      `json:"traceId,omitempty"`
	SpanID      string      `json:"spanId,omitempty"`
	Evaluation  GenkitScore `json:"evaluation"`
}

// GenkitScore is Genkit's Score: a number in [0, 1] when the evaluator has one, PASS or FAIL,
// the explanation as details.reasoning, or the evaluator's error.
type GenkitScore struct {
	Score   *float64            `json:"score,omitempty"`
	Status  string              `json:"status,omitempty"`
	Error   string              `json:"error,omitempty"`
	Details *GenkitScoreDetails `json:"details,omitempty"`
}

// GenkitScoreDetails holds a score's reasoning.
type GenkitScoreDetails struct {
	Reasoning string `json:"reasoning,omitempty"`
}

// genkitNamespace derives the ids of Genkit evaluations' experiments and examples (UUIDv5).
var genkitNamespace = uuid.MustParse("6f2b1c8e-3d4a-5b6c-9d7e-0a1b2c3d4e5f")

const maxEvalRunID = 200

// DecodeGenkitEvalRequest reads an evaluator action's input; a mistake in it is an *InvalidError.
// A datapoint without a testCaseId gets one derived from the evalRunId and its place.
func DecodeGenkitEvalRequest(body []byte) (*GenkitEvalRequest, error) {
	var req GenkitEvalRequest
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&req); err != nil {
		return nil, &InvalidError{Field: "input", Message: "not an evaluator's input {dataset, evalRunId, options}: " + err.Error()}
	}
	if d.More() {
		return nil, &InvalidError{Field: "input", Message: "one JSON value expected"}
	}
	if req.EvalRunID == "" {
		return nil, &InvalidError{Field: "evalRunId", Message: "required"}
	}
	if len(req.EvalRunID) > maxEvalRunID {
		return nil, &InvalidError{Field: "evalRunId", Message: fmt.Sprintf("at most %d bytes", maxEvalRunID)}
	}
	if err := store.CheckText("evalRunId", req.EvalRunID); err != nil {
		return nil, &InvalidError{Field: "evalRunId", Message: err.Error()}
	}
	if req.Dataset == nil {
		return nil, &InvalidError{Field: "dataset", Message: "required: the datapoints to score"}
	}
	for i := range req.Dataset {
		dp := &req.Dataset[i]
		field := "dataset/" + strconv.Itoa(i)
		if dp.TestCaseID == "" {
			dp.TestCaseID = uuid.NewSHA1(genkitNamespace, []byte(req.EvalRunID+"/"+strconv.Itoa(i))).String()
		}
		if err := store.CheckText(field+"/testCaseId", dp.TestCaseID); err != nil {
			return nil, &InvalidError{Field: field + "/testCaseId", Message: err.Error()}
		}
		if len(dp.Input) == 0 {
			dp.Input = json.RawMessage("null")
		}
		for name, raw := range map[string]json.RawMessage{"input": dp.Input, "output": dp.Output, "reference": dp.Reference} {
			if err := store.CheckJSON(field+"/"+name, raw); err != nil {
				return nil, &InvalidError{Field: field + "/" + name, Message: err.Error()}
			}
		}
		for _, t := range dp.TraceIDs {
			if len(t) > 64 {
				return nil, &InvalidError{Field: field + "/traceIds", Message: "a trace id is at most 64 characters"}
			}
		}
	}
	if _, err := genkitEvalArg(req.Options); err != nil {
		return nil, err
	}
	return &req, nil
}

// genkitEvalArg is an evaluator's argument from the request's options: {"arg": "..."} or "...".
// Other options (a Genkit client's config for another evaluator) give none.
func genkitEvalArg(options json.RawMessage) (string, error) {
	t := bytes.TrimSpace(options)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(t, &s) == nil {
		return s, store.CheckText("options", s)
	}
	var o struct {
		Arg *json.RawMessage `json:"arg"`
	}
	if json.Unmarshal(t, &o) != nil || o.Arg == nil {
		return "", nil
	}
	if err := json.Unmarshal(*o.Arg, &s); err != nil {
		return "", &InvalidError{Field: "options/arg", Message: "a string: the evaluator's argument, as in regex:ARG"}
	}
	if err := store.CheckText("options/arg", s); err != nil {
		return "", &InvalidError{Field: "options/arg", Message: err.Error()}
	}
	return s, nil
}

// genkitEvalInputSchema and genkitEvalOutputSchema are Genkit's EvalRequest and EvalResponses.
var (
	genkitEvalInputSchema = mustSchema(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"properties":{"dataset":{"type":"array","items":{"type":"object","properties":{"input":{},"output":{},
		"context":{"type":"array","items":{}},"reference":{},"testCaseId":{"type":"string"},
		"traceIds":{"type":"array","items":{"type":"string"}}},"additionalProperties":true}},
		"evalRunId":{"type":"string"},"options":{},"batchSize":{"type":"number"}},
		"required":["dataset","evalRunId"],"additionalProperties":true}`)
	genkitEvalOutputSchema = mustSchema(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array",
		"items":{"type":"object","properties":{"sampleIndex":{"type":"number"},"testCaseId":{"type":"string"},
		"traceId":{"type":"string"},"spanId":{"type":"string"},"evaluation":{}},
		"required":["testCaseId","evaluation"],"additionalProperties":true}}`)
)

func mustSchema(raw string) *ai.Schema {
	s, err := ai.NewSchema(json.RawMessage(raw))
	if err != nil {
		panic(err)
	}
	return s
}

// genkitUnlisted are the built-ins that compare with the run an example was recorded from, which
// a Genkit datapoint never has.
var genkitUnlisted = map[string]bool{"trajectory": true, "turns": true}

// GenkitEvaluators are Loupe's evaluators as Genkit's evaluator actions, /evaluator/<name>, with
// the metadata Genkit's eval tools read (metadata.evaluator's evaluatorDisplayName,
// evaluatorDefinition, evaluatorIsBilled): the built-ins that need no argument, and this
// program's own. A built-in that needs one (regex, tokens, latency, judge) or a recorded run
// (trajectory, turns) is not listed, so that
// `genkit eval:run` without --evaluators runs only what can run; a caller that gives the argument
// in options runs it by its key all the same.
func (s *Service) GenkitEvaluators() []*engine.ActionDesc {
	var out []*engine.ActionDesc
	for _, info := range s.Evaluators() {
		billed := false
		if info.Builtin {
			if b := eval.Builtins[info.Name]; b.Check != nil && b.Check("") != nil || genkitUnlisted[info.Name] {
				continue
			}
		} else {
			// A program's own evaluator may call a model: Genkit's default is billed.
			billed = true
		}
		out = append(out, &engine.ActionDesc{
			Key: engine.ActionKey(engine.ActionTypeEvaluator, info.Name), Name: info.Name, Type: engine.ActionTypeEvaluator,
			Description: info.Description, InputSchema: genkitEvalInputSchema, OutputSchema: genkitEvalOutputSchema,
			Metadata: map[string]any{"type": "evaluator", "evaluator": map[string]any{
				"evaluatorDisplayName": info.Name, "evaluatorDefinition": info.Description, "evaluatorIsBilled": billed,
			}},
		})
	}
	return out
}

// ErrNoEvaluator is GenkitEvaluate's answer for a name that is no evaluator of this program.
var ErrNoEvaluator = errors.New("no such evaluator")

// GenkitEvaluator is the evaluator a Genkit evaluator action names, with its argument from the
// request's options: ErrNoEvaluator for a name that is none of this program's, an *InvalidError
// for a bad argument.
func (s *Service) GenkitEvaluator(name string, req *GenkitEvalRequest) (eval.Spec, error) {
	arg, err := genkitEvalArg(req.Options)
	if err != nil {
		return eval.Spec{}, err
	}
	spec := eval.Spec{Name: name, Arg: arg}
	if _, ok := eval.Builtins[name]; !ok && s.reg.Lookup(engine.ActionKey(engine.ActionTypeEvaluator, name)) == nil {
		return eval.Spec{}, fmt.Errorf("%w %q: the built-ins are %s%s", ErrNoEvaluator, name, strings.Join(eval.BuiltinNames(), ", "), s.definedList())
	}
	if err := s.checkEvaluator(spec); err != nil {
		return eval.Spec{}, err
	}
	return spec, nil
}

// GenkitEvaluate scores a Genkit evaluator action's datapoints with the evaluator spec (from
// GenkitEvaluator), each in a span of its own under ctx's, and records them in the evaluation's
// experiment.
func (s *Service) GenkitEvaluate(ctx context.Context, spec eval.Spec, req *GenkitEvalRequest) ([]GenkitEvalResponse, error) {
	out := make([]GenkitEvalResponse, 0, len(req.Dataset))
	if len(req.Dataset) == 0 {
		return out, nil
	}
	expID := genkitExperimentID(req.EvalRunID)
	examples := make([]store.GenkitEvalExample, len(req.Dataset))
	actions := map[string]bool{}
	seen := map[string]int{}
	for i, dp := range req.Dataset {
		ex := &examples[i]
		ex.Input, ex.Reference, ex.Output, ex.RunStatus = dp.Input, dp.Reference, dp.Output, store.RunSucceeded
		content := canonicalJSON(dp.Input) + "\n" + canonicalJSON(dp.Reference)
		ex.Key = uuid.NewSHA1(genkitNamespace, []byte(content+"\n"+strconv.Itoa(seen[content])))
		seen[content]++
		c := &eval.Case{Input: dp.Input, Reference: dp.Reference, Output: dp.Output, Status: store.RunSucceeded, ToolCalls: []eval.ToolCall{}}
		if run, err := s.runOfTraces(ctx, dp.TraceIDs); err != nil {
			return nil, err
		} else if run != nil {
			if c, err = s.buildCase(ctx, &store.Example{Input: dp.Input, Reference: dp.Reference}, run); err != nil {
				return nil, err
			}
			if len(dp.Output) > 0 {
				c.Output = dp.Output
			} else {
				ex.Output = run.Output
			}
			actions[run.Action] = true
			id := run.ID
			latency := c.LatencyMs
			ex.RunID, ex.RunStatus, ex.Error = &id, run.Status, c.Error
			ex.LatencyMs, ex.InputTokens, ex.OutputTokens = &latency, run.InputTokens, run.OutputTokens
		}
		sc, spanID, evalErr := s.evaluateCase(ctx, expID, spec, c)
		ex.Score = sc
		r := GenkitEvalResponse{SampleIndex: i, TestCaseID: dp.TestCaseID, SpanID: spanID}
		if sc.TraceID != nil {
			r.TraceID = *sc.TraceID
		}
		if evalErr != nil {
			r.Evaluation = GenkitScore{Error: evalErr.Error()}
		} else {
			r.Evaluation = GenkitScore{Score: sc.Score, Status: "FAIL", Details: &GenkitScoreDetails{Reasoning: sc.Explanation}}
			if sc.Pass {
				r.Evaluation.Status = "PASS"
			}
		}
		out = append(out, r)
	}
	action, dataset := "genkit eval:run", "genkit-eval"
	if len(actions) == 1 {
		for a := range actions {
			action, dataset = a, "genkit-"+datasetNameOf(a)
		}
	}
	_, err := s.store.GenkitEvalRecord(ctx, store.GenkitEvalParams{ExperimentID: expID, Name: req.EvalRunID, Dataset: dataset,
		Action: action, Evaluator: spec.String(), Examples: examples})
	if errors.Is(err, store.ErrNotGenkitEval) {
		return nil, &InvalidError{Field: "evalRunId", Message: fmt.Sprintf("%q names experiment %s, which no Genkit evaluation made", req.EvalRunID, expID)}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// genkitExperimentID is the experiment of an evalRunId: the id itself when it is a UUID.
func genkitExperimentID(evalRunID string) uuid.UUID {
	if id, err := uuid.Parse(evalRunID); err == nil && len(evalRunID) == 36 {
		return id
	}
	return uuid.NewSHA1(genkitNamespace, []byte("evalRunId:"+evalRunID))
}

// runOfTraces is the run whose trace is the last of traceIds (the one Genkit's eval tools score),
// or nil.
func (s *Service) runOfTraces(ctx context.Context, traceIDs []string) (*store.Run, error) {
	if len(traceIDs) == 0 {
		return nil, nil //nolint:nilnil // no trace, no run
	}
	id, err := s.store.RunIDByTrace(ctx, strings.ToLower(traceIDs[len(traceIDs)-1]))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil //nolint:nilnil // a trace of another program
	}
	if err != nil {
		return nil, err
	}
	run, err := s.store.RunGet(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil //nolint:nilnil // deleted meanwhile
	}
	return run, err
}

var notDatasetChar = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// datasetNameOf makes an action key part of a dataset's name: "/flow/countdown" is "countdown",
// "my-app:/flow/menu" is "my-app-menu".
func datasetNameOf(action string) string {
	app, key, ok := strings.Cut(action, ":/")
	if !ok {
		app, key = "", strings.TrimPrefix(action, "/")
	}
	if _, name, ok := strings.Cut(key, "/"); ok {
		key = name
	}
	n := strings.Trim(notDatasetChar.ReplaceAllString(key, "-"), "-")
	if app != "" {
		n = strings.Trim(notDatasetChar.ReplaceAllString(app, "-"), "-") + "-" + n
	}
	if n == "" {
		n = "action"
	}
	return n[:min(len(n), 90)]
}

// canonicalJSON is a JSON value with its object keys sorted and its numbers as written, so that
// the same content gives the same example key.
func canonicalJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// evaluateCase scores a case with one evaluator in a span of its own (child of ctx's): the score
// to store (the span's trace beside it), the span's id, and the evaluator's error if it failed.
func (s *Service) evaluateCase(ctx context.Context, experimentID uuid.UUID, sp eval.Spec, c *eval.Case) (store.Score, string, error) {
	out := store.Score{Evaluator: sp.String()}
	ctx, span := s.reg.Tracer().Start(ctx, "evaluate "+sp.Name)
	span.SetAttributes(attribute.String("genkit:type", "action"), attribute.String("genkit:metadata:subtype", "evaluator"),
		attribute.String("genkit:name", sp.Name), attribute.String("loupe.experiment.id", experimentID.String()))
	var spanID string
	if sc := span.SpanContext(); sc.HasTraceID() {
		tid := sc.TraceID().String()
		out.TraceID = &tid
		spanID = sc.SpanID().String()
	}
	var (
		res *eval.Score
		err error
	)
	if b, ok := eval.Builtins[sp.Name]; ok {
		res, err = b.Eval(ctx, eval.Env{Judge: s.judge}, sp.Arg, c)
	} else {
		res, err = s.evaluateDefined(ctx, sp.Name, c)
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		out.Explanation = "the evaluator failed: " + err.Error()
	} else {
		out.Score, out.Pass, out.Explanation = res.Score, res.Pass, res.Explanation
	}
	span.End()
	return out, spanID, err
}
