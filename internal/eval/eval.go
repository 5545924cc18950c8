// Package eval scores an experiment's examples: the case an evaluator is given, its score, and the
// built-in evaluators (exact and JSON match, JSON Schema, contains and regex, tool trajectory, turn,
// token and latency budgets, an LLM judge). It runs no SQL and starts no runs; internal/experiments
// builds the cases from stored runs and stores the scores.
package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Case is what an evaluator scores: one example and what its run did. Its JSON form is the input of
// a Go-defined evaluator action (loupe.EvalCase has the same shape).
type Case struct {
	Input     json.RawMessage `json:"input"`
	Reference json.RawMessage `json:"reference,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	// Status is how the run ended: succeeded, failed, aborted, cancelled, or interrupted (it
	// waits for a person the recording had no decision for).
	Status       string `json:"status"`
	Error        string `json:"error,omitempty"`
	Turns        int    `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	LatencyMs    int64  `json:"latency_ms"`
	// ToolCalls are the run's tool calls in order; ReferenceToolCalls those of the run the example
	// came from (none for an example written by hand), and ReferenceTurns its turns.
	ToolCalls          []ToolCall `json:"tool_calls"`
	ReferenceToolCalls []ToolCall `json:"reference_tool_calls,omitempty"`
	ReferenceTurns     int        `json:"reference_turns,omitempty"`
}

// ToolCall is one tool call of a run.
type ToolCall struct {
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input"`
}

// Score is an evaluator's verdict: a score in [0, 1] (nil when it has none), pass or fail, and why.
type Score struct {
	Score       *float64 `json:"score,omitempty"`
	Pass        bool     `json:"pass"`
	Explanation string   `json:"explanation"`
}

// Spec is an evaluator as named on the command line: a name and an optional argument after the
// first colon ("regex:^Booked", "latency:2s", "judge:openai/gpt-4o").
type Spec struct {
	Name string
	Arg  string
}

// ParseSpec splits "name[:arg]". A Genkit app's evaluator, "<app>:/evaluator/<name>[:options]",
// keeps its first colon in its name.
func ParseSpec(s string) Spec {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ":/evaluator/"); i > 0 && !strings.ContainsAny(s[:i], ":/") {
		name, arg, _ := strings.Cut(s[i+1:], ":")
		return Spec{Name: s[:i+1] + name, Arg: arg}
	}
	name, arg, _ := strings.Cut(s, ":")
	return Spec{Name: name, Arg: arg}
}

// String is the spec as written.
func (s Spec) String() string {
	if s.Arg == "" {
		return s.Name
	}
	return s.Name + ":" + s.Arg
}

// Judge asks a model a question and returns its text answer: what the judge evaluator needs.
type Judge func(ctx context.Context, model, prompt string) (string, error)

// Env is what built-in evaluators may use beyond the case.
type Env struct {
	Judge Judge
}

// Builtin scores a case with a built-in evaluator's argument.
type Builtin struct {
	Doc string
	// Check validates the argument before an experiment starts; nil accepts any.
	Check func(arg string) error
	Eval  func(ctx context.Context, env Env, arg string, c *Case) (*Score, error)
}

// Builtins are the evaluators every program has, by name.
var Builtins = map[string]Builtin{
	"exact":      {Doc: "the output equals the reference exactly (a string as text, anything else as its JSON)", Eval: exact},
	"json":       {Doc: "the output is JSON-equal to the reference (key order and number spelling aside)", Eval: jsonEqual},
	"schema":     {Doc: "the output is valid against a JSON Schema: schema:{…} inline (the CLI reads schema:@FILE), or the reference", Check: checkSchemaArg, Eval: schemaValid},
	"contains":   {Doc: "the output's text contains contains:TEXT, or the reference's text", Eval: contains},
	"regex":      {Doc: "the output's text matches regex:PATTERN (RE2)", Check: checkRegex, Eval: regexMatch},
	"trajectory": {Doc: "the same tool calls, same arguments, same order as the reference run; partial score and the first difference", Eval: trajectory},
	"turns":      {Doc: "at most turns:N turns, or no more than the reference run took", Check: checkInt, Eval: turns},
	"tokens":     {Doc: "at most tokens:N tokens (input and output)", Check: checkIntRequired, Eval: tokens},
	"latency":    {Doc: "ran within latency:DURATION (2s, 500ms), waits for reviewers left out", Check: checkDuration, Eval: latency},
	"judge":      {Doc: "an LLM judges the output against the input and reference: judge:MODEL, the reference as the rubric when it is text", Check: checkRequired, Eval: judge},
	"succeeded":  {Doc: "the run succeeded", Eval: succeeded},
}

// BuiltinNames are the built-in evaluators' names, sorted.
func BuiltinNames() []string {
	names := make([]string, 0, len(Builtins))
	for n := range Builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func score(v float64) *float64 { return &v }

func verdict(pass bool, why string, args ...any) *Score {
	s := 0.0
	if pass {
		s = 1
	}
	return &Score{Score: score(s), Pass: pass, Explanation: fmt.Sprintf(why, args...)}
}

func sortStrings(s []string) { sort.Strings(s) }
