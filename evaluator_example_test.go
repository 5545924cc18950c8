package loupe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe"
)

// An evaluator of the program's own: an experiment names it (devui eval run --evaluator polite),
// and it scores each example's run; here it scores one case directly.
func ExampleDefineEvaluator() {
	app := loupe.New()
	polite := loupe.DefineEvaluator(app, "polite", "The answer thanks the customer.",
		func(_ context.Context, c *loupe.EvalCase) (*loupe.EvalScore, error) {
			var answer string
			if err := json.Unmarshal(c.Output, &answer); err != nil {
				return &loupe.EvalScore{Explanation: "the output is not text"}, nil
			}
			if strings.Contains(strings.ToLower(answer), "thank") {
				return &loupe.EvalScore{Pass: true, Explanation: "it thanks the customer"}, nil
			}
			return &loupe.EvalScore{Explanation: "no thanks in " + answer}, nil
		})
	score, err := polite.Evaluate(context.Background(), &loupe.EvalCase{Status: "succeeded",
		Output: json.RawMessage(`"Refunded order 7. Thank you for your patience."`)})
	fmt.Println(score.Pass, score.Explanation, err)
	// Output: true it thanks the customer <nil>
}
