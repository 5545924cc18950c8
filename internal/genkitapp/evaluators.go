package genkitapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// A Genkit app's evaluator actions (/evaluator/<name>: Genkit's evaluator plugins, such as
// @genkit-ai/evaluator's genkitEval/regex, or an app's own ai.defineEvaluator) score Loupe's
// experiments under Loupe's key of the action, "<app>:/evaluator/<name>". An experiment is
// driven by whichever process on the database holds its lease (devui eval run, serve, a worker),
// which need not be the one whose Manager found the app: so the driver calls the app directly,
// at the reflection server URL the app's catalogue entry names (MetaURL), with Genkit's
// EvalRequest, and reads Genkit's EvalResponses.

// evaluatorType is Genkit's action type of evaluators.
const evaluatorType = "evaluator"

// MetaURL is the catalogue metadata field of a Genkit app's evaluator action naming the app's
// reflection server URL.
const MetaURL = "loupe:genkitURL"

// ErrAppNotRunning says that the Genkit app an evaluator belongs to is not connected now.
var ErrAppNotRunning = errors.New("the Genkit app is not running")

// ErrUnknownEvaluator says that a running Genkit app has no such evaluator.
var ErrUnknownEvaluator = errors.New("no such evaluator")

// findError is FindEvaluator's refusal: its message says what to do, its kind is one of the two
// errors above.
type findError struct {
	kind error
	msg  string
}

func (e *findError) Error() string { return e.msg }
func (e *findError) Unwrap() error { return e.kind }

func refuse(kind error, format string, args ...any) error {
	return &findError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// IsEvaluatorKey says whether key names a Genkit app's evaluator: "<app>:/evaluator/<name>".
func IsEvaluatorKey(key string) bool {
	_, gk, ok := SplitKey(key)
	return ok && strings.HasPrefix(gk, "/"+evaluatorType+"/") && len(gk) > len("/evaluator/")
}

// EvalDataPoint is one datapoint of Genkit's EvalRequest (BaseEvalDataPoint).
type EvalDataPoint struct {
	TestCaseID string            `json:"testCaseId"`
	Input      json.RawMessage   `json:"input"`
	Output     json.RawMessage   `json:"output,omitempty"`
	Context    []json.RawMessage `json:"context,omitempty"`
	Reference  json.RawMessage   `json:"reference,omitempty"`
	TraceIDs   []string          `json:"traceIds,omitempty"`
}

// EvalRequest is the input of a Genkit evaluator action.
type EvalRequest struct {
	Dataset   []EvalDataPoint `json:"dataset"`
	EvalRunID string          `json:"evalRunId"`
	Options   json.RawMessage `json:"options,omitempty"`
}

// EvalScore is Genkit's Score. Score is a number, a string or a boolean; Status PASS, FAIL or
// UNKNOWN; Error the evaluator's failure on the datapoint.
type EvalScore struct {
	ID      string          `json:"id,omitempty"`
	Score   json.RawMessage `json:"score,omitempty"`
	Status  string          `json:"status,omitempty"`
	Error   string          `json:"error,omitempty"`
	Details *struct {
		Reasoning string `json:"reasoning,omitempty"`
	} `json:"details,omitempty"`
}

// Reasoning is the score's details.reasoning, or "".
func (s *EvalScore) Reasoning() string {
	if s.Details == nil {
		return ""
	}
	return s.Details.Reasoning
}

// EvalResponse is one datapoint's answer: its evaluation is one Score, or a list of them.
type EvalResponse struct {
	TestCaseID string          `json:"testCaseId"`
	TraceID    string          `json:"traceId,omitempty"`
	SpanID     string          `json:"spanId,omitempty"`
	Evaluation json.RawMessage `json:"evaluation"`
}

// Scores reads the evaluation, one Score or a list.
func (r *EvalResponse) Scores() ([]EvalScore, error) {
	raw := json.RawMessage(strings.TrimSpace(string(r.Evaluation)))
	if len(raw) > 0 && raw[0] == '[' {
		var list []EvalScore
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("read the evaluation of test case %s: %w", r.TestCaseID, err)
		}
		return list, nil
	}
	var one EvalScore
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, fmt.Errorf("read the evaluation of test case %s: %w", r.TestCaseID, err)
	}
	return []EvalScore{one}, nil
}

// Evaluator is a running Genkit app's evaluator action.
type Evaluator struct {
	// App is the app's name, Key the action's key in the app (/evaluator/<name>).
	App, Key string
	client   *Client
}

// FindEvaluator finds the evaluator of Loupe's key "<app>:/evaluator/<name>" among the live
// actions of the catalogue: ErrAppNotRunning when the app is not connected now (never, or no
// longer), ErrUnknownEvaluator when it is and has no such evaluator, each with a message that
// says what to do.
func FindEvaluator(ctx context.Context, st *store.Store, key string, hc *http.Client) (*Evaluator, error) {
	app, gkey, ok := SplitKey(key)
	if !ok || !IsEvaluatorKey(key) {
		return nil, refuse(ErrUnknownEvaluator, "%q is not a Genkit app's evaluator, <app>:/evaluator/<name>", key)
	}
	rows, err := st.CatalogueActionList(ctx, store.CatalogueActionListParams{})
	if err != nil {
		return nil, err
	}
	program := ProgramPrefix + app
	var (
		found           *store.CatalogueAction
		seen, live      bool
		lastSeen        time.Time
		liveEvaluators  []string
		evaluatorPrefix = app + ":/" + evaluatorType + "/"
	)
	for _, r := range rows {
		if r.Program != program {
			continue
		}
		seen = true
		if r.SeenAt.After(lastSeen) {
			lastSeen = r.SeenAt
		}
		if !r.Live {
			continue
		}
		live = true
		if strings.HasPrefix(r.Key, evaluatorPrefix) {
			liveEvaluators = append(liveEvaluators, r.Key)
		}
		if r.Key == key {
			found = r
		}
	}
	switch {
	case !seen:
		return nil, refuse(ErrAppNotRunning, "no Genkit app named %q has been connected to Loupe (run it with devui start -- <command>, or serve --genkit-project DIR)", app)
	case !live:
		return nil, refuse(ErrAppNotRunning, "the Genkit app %q is not running (last seen %s)", app, lastSeen.UTC().Format(time.DateTime))
	case found == nil:
		slices.Sort(liveEvaluators)
		has := "it has none"
		if len(liveEvaluators) > 0 {
			has = "its evaluators are " + strings.Join(liveEvaluators, ", ")
		}
		return nil, refuse(ErrUnknownEvaluator, "the Genkit app %q has no evaluator %s; %s", app, gkey, has)
	}
	var desc struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(found.Description, &desc); err != nil {
		return nil, fmt.Errorf("read the catalogue entry of %s: %w", key, err)
	}
	u, _ := desc.Metadata[MetaURL].(string)
	if u == "" {
		return nil, refuse(ErrAppNotRunning, "the catalogue entry of %s names no URL of the app (announced by an older Loupe); restart devui start or serve", key)
	}
	return &Evaluator{App: app, Key: gkey, client: &Client{BaseURL: u, HTTP: hc}}, nil
}

// EvaluatorList is the keys of the live Genkit apps' evaluators in the catalogue, sorted, with
// their descriptions.
func EvaluatorList(ctx context.Context, st *store.Store) ([]EvaluatorInfo, error) {
	rows, err := st.CatalogueActionList(ctx, store.CatalogueActionListParams{LiveOnly: true})
	if err != nil {
		return nil, err
	}
	var out []EvaluatorInfo
	seen := map[string]bool{}
	for _, r := range rows {
		if !strings.HasPrefix(r.Program, ProgramPrefix) || !IsEvaluatorKey(r.Key) || seen[r.Key] {
			continue
		}
		seen[r.Key] = true
		var desc struct {
			Description string         `json:"description"`
			Metadata    map[string]any `json:"metadata"`
		}
		_ = json.Unmarshal(r.Description, &desc)
		info := EvaluatorInfo{Key: r.Key, Description: desc.Description}
		if ev, ok := desc.Metadata["evaluator"].(map[string]any); ok && info.Description == "" {
			// Genkit keeps an evaluator's words in its metadata.
			info.Description, _ = ev["evaluatorDefinition"].(string)
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b EvaluatorInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// EvaluatorInfo is a Genkit app's evaluator as listed.
type EvaluatorInfo struct {
	Key         string
	Description string
}

// Evaluate runs the evaluator on the request through the app's POST /api/runAction, returning
// its responses and the trace the app recorded the evaluation in. An error the evaluator action
// returned is an *ActionError.
func (e *Evaluator) Evaluate(ctx context.Context, req *EvalRequest) ([]EvalResponse, string, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, "", err
	}
	res, err := e.client.RunAction(ctx, RunRequest{Key: e.Key, Input: in}, nil)
	if err != nil {
		return nil, "", err
	}
	var out []EvalResponse
	if err := json.Unmarshal(res.Result, &out); err != nil {
		return nil, res.TraceID, fmt.Errorf("read the answer of %s: not Genkit's EvalResponses: %w", e.Key, err)
	}
	return out, res.TraceID, nil
}
