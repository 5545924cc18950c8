package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/eval"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/store"
)

// A Genkit app's own evaluator actions score experiments as "<app>:/evaluator/<name>" (an
// argument after one more colon is the evaluator's options: JSON, or else a string). Each
// example is one datapoint of Genkit's EvalRequest ({dataset, evalRunId, options}): its example
// key as testCaseId, its input, its run's output, its reference, and its run's trace; the
// evalRunId is the experiment's id. The app's answer becomes the stored score: PASS or FAIL as
// the app says; without a status, true, or a number from 0.5 to 1, passes; UNKNOWN, a string
// without a status, or the evaluator's error fails, saying why. The score links to the trace the
// app recorded the evaluation in.

// appEvalTimeout bounds one call of an app's evaluator (which may call a model).
const appEvalTimeout = 5 * time.Minute

// caseRef is what an app's evaluator is told of an example beyond its case.
type caseRef struct {
	testCaseID string
	traceID    string
}

// checkAppEvaluator refuses an app's evaluator that the app, running, does not have; one of an
// app that is not running now is accepted, and its examples fail with the reason if it is still
// not running when they are scored.
func (s *Service) checkAppEvaluator(ctx context.Context, spec eval.Spec) error {
	_, err := genkitapp.FindEvaluator(ctx, s.store, spec.Name, s.http)
	switch {
	case errors.Is(err, genkitapp.ErrUnknownEvaluator):
		return &InvalidError{Field: "evaluators", Message: err.Error()}
	case errors.Is(err, genkitapp.ErrAppNotRunning):
		s.log.Warn("experiments: an evaluator's Genkit app is not running now", "evaluator", spec.Name, "err", err)
		return nil
	}
	return err
}

// evaluateApp scores a case with a Genkit app's evaluator, through the app's reflection API.
func (s *Service) evaluateApp(ctx context.Context, experimentID uuid.UUID, sp eval.Spec, c *eval.Case, ref caseRef) store.Score {
	out := store.Score{Evaluator: sp.String()}
	ev, err := genkitapp.FindEvaluator(ctx, s.store, sp.Name, s.http)
	if err != nil {
		out.Explanation = "the evaluator could not run: " + err.Error()
		return out
	}
	dp := genkitapp.EvalDataPoint{TestCaseID: ref.testCaseID, Input: c.Input, Output: c.Output, Reference: c.Reference}
	if len(dp.Output) == 0 {
		dp.Output = json.RawMessage("null")
	}
	if ref.traceID != "" {
		dp.TraceIDs = []string{ref.traceID}
	}
	req := &genkitapp.EvalRequest{Dataset: []genkitapp.EvalDataPoint{dp}, EvalRunID: experimentID.String(), Options: appOptions(sp.Arg)}
	ctx, cancel := context.WithTimeout(ctx, appEvalTimeout)
	defer cancel()
	resps, traceID, err := ev.Evaluate(ctx, req)
	if traceID != "" {
		out.TraceID = &traceID
	}
	if err != nil {
		out.Explanation = fmt.Sprintf("the Genkit app %s's evaluator %s failed: %v", ev.App, ev.Key, err)
		return out
	}
	var r *genkitapp.EvalResponse
	for i := range resps {
		if resps[i].TestCaseID == ref.testCaseID {
			r = &resps[i]
			break
		}
	}
	if r == nil {
		out.Explanation = fmt.Sprintf("the Genkit app %s's evaluator %s answered no score for this example (Genkit leaves out a datapoint whose batch failed: the app's log says why)", ev.App, ev.Key)
		return out
	}
	if r.TraceID != "" {
		out.TraceID = &r.TraceID
	}
	scores, err := r.Scores()
	if err != nil || len(scores) == 0 {
		if err == nil {
			err = errors.New("an empty list of scores")
		}
		out.Explanation = fmt.Sprintf("the Genkit app %s's evaluator %s answered what is not a score: %v", ev.App, ev.Key, err)
		return out
	}
	out.Score, out.Pass, out.Explanation = appVerdict(scores)
	return out
}

// appOptions is the options of an app's evaluator from the spec's argument: JSON as written, any
// other text as a JSON string, nothing as none.
func appOptions(arg string) json.RawMessage {
	if arg == "" {
		return nil
	}
	if json.Valid([]byte(arg)) {
		return json.RawMessage(arg)
	}
	b, _ := json.Marshal(arg)
	return b
}

// appVerdict reads Genkit scores as one: it passes when each passes, its score is the mean of
// their numeric scores, and its explanation each one's.
func appVerdict(scores []genkitapp.EvalScore) (*float64, bool, string) {
	pass := true
	var sum float64
	var n int
	whys := make([]string, 0, len(scores))
	for i := range scores {
		v, ok, why := appScore(&scores[i])
		pass = pass && ok
		if v != nil {
			sum += *v
			n++
		}
		if len(scores) > 1 {
			id := scores[i].ID
			if id == "" {
				id = strconv.Itoa(i + 1)
			}
			why = id + ": " + why
		}
		whys = append(whys, why)
	}
	var mean *float64
	if n > 0 {
		m := sum / float64(n)
		mean = &m
	}
	return mean, pass, strings.Join(whys, "; ")
}

// appScore reads one Genkit score: its numeric value (true 1, false 0, a string none), whether
// it passes, and why.
func appScore(sc *genkitapp.EvalScore) (*float64, bool, string) {
	reasoning := sc.Reasoning()
	if sc.Error != "" {
		return nil, false, "the evaluator failed: " + sc.Error
	}
	var (
		value *float64
		text  string
		isStr bool
		isNum bool
		b     bool
		isB   bool
	)
	raw := strings.TrimSpace(string(sc.Score))
	switch {
	case raw == "" || raw == "null":
	case json.Unmarshal(sc.Score, &b) == nil:
		isB = true
		v := 0.0
		if b {
			v = 1
		}
		value = &v
	case json.Unmarshal(sc.Score, &text) == nil:
		isStr = true
	default:
		var f float64
		if err := json.Unmarshal(sc.Score, &f); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			isNum = true
			value = &f
		}
	}
	var pass bool
	why := reasoning
	switch strings.ToUpper(sc.Status) {
	case "PASS":
		pass = true
	case "FAIL":
		pass = false
	case "UNKNOWN":
		why = join("the evaluator's status is UNKNOWN: counted as failing", reasoning)
	default:
		switch {
		case isB:
			pass = b
		case isNum && *value >= 0.5 && *value <= 1:
			pass = true
		case isNum:
			why = join(fmt.Sprintf("a score of %v with no status (a number from 0.5 to 1 passes)", *value), reasoning)
		case isStr:
			why = join(fmt.Sprintf("a score of %q with no PASS or FAIL status: counted as failing", text), reasoning)
		default:
			why = join("no score and no status: counted as failing", reasoning)
		}
	}
	if why == "" {
		switch {
		case isStr:
			why = fmt.Sprintf("scored %q", text)
		case value != nil:
			why = fmt.Sprintf("scored %v", strings.TrimSpace(raw))
		case pass:
			why = "passed"
		default:
			why = "failed"
		}
	} else if isStr && !strings.Contains(why, text) {
		why = fmt.Sprintf("scored %q: %s", text, why)
	}
	return value, pass, why
}

func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}
