package loupe

import (
	"context"
	"encoding/json"

	"github.com/loupe-dev/loupe/internal/engine"
)

// EvalCase is what an evaluator scores: one example of a dataset and what the run of an
// experiment did with it. Its JSON form is the input of the evaluator's action.
type EvalCase struct {
	// Input is the example's input; Reference its expected output (nil when it has none); Output
	// what the run returned.
	Input     json.RawMessage `json:"input"`
	Reference json.RawMessage `json:"reference,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	// Status is how the run ended: succeeded, failed, aborted, cancelled, or interrupted (it
	// waits for a person whose decision the recording did not have); Error is a failed run's
	// message.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Turns, the tokens and LatencyMs (waits for reviewers left out) are the run's.
	Turns        int   `json:"turns"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	LatencyMs    int64 `json:"latency_ms"`
	// ToolCalls are the run's tool calls in order (by turn, then by tool and input within a
	// turn); ReferenceToolCalls and ReferenceTurns those of the run the example was recorded from
	// (none for an example written by hand).
	ToolCalls          []EvalToolCall `json:"tool_calls"`
	ReferenceToolCalls []EvalToolCall `json:"reference_tool_calls,omitempty"`
	ReferenceTurns     int            `json:"reference_turns,omitempty"`
}

// EvalToolCall is one tool call of a run: the tool's name and its input.
type EvalToolCall struct {
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input"`
}

// EvalScore is an evaluator's verdict on one case.
type EvalScore struct {
	// Score is in [0, 1]; nil when the evaluator only passes or fails.
	Score *float64 `json:"score,omitempty"`
	// Pass says whether the example passes this evaluator; an experiment's pass rate counts the
	// examples every evaluator passed.
	Pass bool `json:"pass"`
	// Explanation says why, in a sentence a person reads on the experiment's page.
	Explanation string `json:"explanation"`
}

// Evaluator is a registered evaluator, /evaluator/<name>. Experiments name it with --evaluator
// <name> (devui eval run) or in their evaluators list (the API and the dataset page).
type Evaluator struct {
	e *engine.Evaluator[*EvalCase, *EvalScore]
}

// Evaluate scores one case, in the evaluator's span, as an experiment does.
func (e *Evaluator) Evaluate(ctx context.Context, c *EvalCase) (*EvalScore, error) {
	return e.e.Run(ctx, c)
}

// DefineEvaluator registers an evaluator under /evaluator/<name>: fn scores one example's run,
// and an error fails the example with the error as the explanation. Each evaluation runs in a
// span of its own, whose trace the experiment keeps beside the score. An experiment scores
// several examples at once: fn must be safe for concurrent calls. It panics on a duplicate name.
func DefineEvaluator(app *App, name, description string, fn func(ctx context.Context, c *EvalCase) (*EvalScore, error)) *Evaluator {
	return &Evaluator{e: engine.DefineEvaluator(app.reg, name, description, fn)}
}
