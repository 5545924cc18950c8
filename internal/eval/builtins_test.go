package eval

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func run(t *testing.T, spec string, c *Case) *Score {
	t.Helper()
	sp := ParseSpec(spec)
	b, ok := Builtins[sp.Name]
	require.True(t, ok, "no built-in %s", sp.Name)
	if b.Check != nil {
		require.NoError(t, b.Check(sp.Arg))
	}
	s, err := b.Eval(context.Background(), Env{}, sp.Arg, c)
	require.NoError(t, err)
	return s
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestExactComparesTextAndJSON(t *testing.T) {
	require.True(t, run(t, "exact", &Case{Output: raw(`"Booked"`), Reference: raw(`"Booked"`)}).Pass)
	s := run(t, "exact", &Case{Output: raw(`"booked"`), Reference: raw(`"Booked"`)})
	require.False(t, s.Pass)
	require.Contains(t, s.Explanation, `"booked"`)
	require.False(t, run(t, "exact", &Case{Output: raw(`"x"`)}).Pass, "no reference is no pass")
}

func TestJSONEqualIgnoresOrderAndNumberSpellingAndNamesTheFirstDifference(t *testing.T) {
	require.True(t, run(t, "json", &Case{Output: raw(`{"b": 1.0, "a": [1, "x"]}`), Reference: raw(`{"a": [1, "x"], "b": 1}`)}).Pass)
	s := run(t, "json", &Case{Output: raw(`{"a": [1, "y"], "b": 1}`), Reference: raw(`{"a": [1, "x"], "b": 1}`)})
	require.False(t, s.Pass)
	require.Contains(t, s.Explanation, "/a/1")
	require.False(t, run(t, "json", &Case{Output: raw(`{"a":1}`), Reference: raw(`{"a":1,"b":2}`)}).Pass)
}

func TestSchemaValidatesTheOutput(t *testing.T) {
	schema := `schema:{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}`
	require.True(t, run(t, schema, &Case{Output: raw(`{"city":"Lisbon"}`)}).Pass)
	s := run(t, schema, &Case{Output: raw(`{"town":"Lisbon"}`)})
	require.False(t, s.Pass)
	require.Contains(t, s.Explanation, "city")
	require.Error(t, Builtins["schema"].Check(`{"type": 7`))
}

func TestContainsAndRegex(t *testing.T) {
	require.True(t, run(t, "contains:Lisbon", &Case{Output: raw(`"Flight to Lisbon booked"`)}).Pass)
	require.False(t, run(t, "contains", &Case{Output: raw(`"Flight booked"`), Reference: raw(`"Lisbon"`)}).Pass)
	require.True(t, run(t, "regex:^Flight .* booked$", &Case{Output: raw(`"Flight to Lisbon booked"`)}).Pass)
	require.False(t, run(t, "regex:^Booked", &Case{Output: raw(`"Flight booked"`)}).Pass)
	require.Error(t, Builtins["regex"].Check("("), "a broken pattern is refused before the experiment starts")
	require.Error(t, Builtins["regex"].Check(""))
}

func TestTrajectoryScoresTheShareOfAgreeingCallsAndNamesTheFirstDifference(t *testing.T) {
	ref := []ToolCall{{Tool: "search", Input: raw(`{"q":"lisbon"}`)}, {Tool: "book", Input: raw(`{"id":1}`)}, {Tool: "email", Input: raw(`{}`)}}
	same := []ToolCall{{Tool: "search", Input: raw(`{ "q" : "lisbon" }`)}, {Tool: "book", Input: raw(`{"id":1.0}`)}, {Tool: "email", Input: raw(`{}`)}}
	s := run(t, "trajectory", &Case{ToolCalls: same, ReferenceToolCalls: ref})
	require.True(t, s.Pass)
	require.InDelta(t, 1, *s.Score, 1e-9)

	other := []ToolCall{{Tool: "search", Input: raw(`{"q":"lisbon"}`)}, {Tool: "book", Input: raw(`{"id":2}`)}}
	s = run(t, "trajectory", &Case{ToolCalls: other, ReferenceToolCalls: ref})
	require.False(t, s.Pass)
	require.InDelta(t, 1.0/3, *s.Score, 1e-9)
	require.Contains(t, s.Explanation, "call 2")
	require.Contains(t, s.Explanation, `book {"id":1}`)
	require.Contains(t, s.Explanation, `book {"id":2}`)
}

func TestBudgets(t *testing.T) {
	require.True(t, run(t, "turns", &Case{Turns: 3, ReferenceTurns: 3}).Pass)
	require.False(t, run(t, "turns:2", &Case{Turns: 3}).Pass)
	require.False(t, run(t, "turns", &Case{Turns: 1}).Pass, "no limit and no reference run is no pass")
	require.True(t, run(t, "tokens:300", &Case{InputTokens: 200, OutputTokens: 100}).Pass)
	require.False(t, run(t, "tokens:299", &Case{InputTokens: 200, OutputTokens: 100}).Pass)
	require.Error(t, Builtins["tokens"].Check(""))
	require.True(t, run(t, "latency:2s", &Case{LatencyMs: 2000}).Pass)
	require.False(t, run(t, "latency:500ms", &Case{LatencyMs: 501}).Pass)
	require.Error(t, Builtins["latency"].Check("fast"))
}

func TestSucceededKeepsTheWholeErrorAndCutsOnARune(t *testing.T) {
	long := strings.Repeat("é", 600)
	s := run(t, "succeeded", &Case{Status: "failed", Error: long})
	require.False(t, s.Pass)
	require.True(t, strings.HasSuffix(s.Explanation, "…"))
	require.True(t, json.Valid([]byte(`"`+strings.TrimSuffix(s.Explanation, "…")+`"`)), "cut inside a rune")
}

func TestJudgeReadsTheModelsVerdict(t *testing.T) {
	c := &Case{Input: raw(`"2+2"`), Output: raw(`"4"`), Reference: raw(`"The answer is 4"`)}
	var asked string
	env := Env{Judge: func(_ context.Context, model, prompt string) (string, error) {
		asked = prompt
		require.Equal(t, "m", model)
		return "Sure. {\"score\": 1.5, \"pass\": true, \"explanation\": \"right\"}", nil
	}}
	s, err := Builtins["judge"].Eval(context.Background(), env, "m", c)
	require.NoError(t, err)
	require.True(t, s.Pass)
	require.InDelta(t, 1, *s.Score, 1e-9, "a score is kept within [0, 1]")
	require.Contains(t, asked, "Rubric: The answer is 4")
	env.Judge = func(context.Context, string, string) (string, error) { return "I think so", nil }
	s, err = Builtins["judge"].Eval(context.Background(), env, "m", c)
	require.NoError(t, err)
	require.False(t, s.Pass)
	require.Contains(t, s.Explanation, "not a verdict")
	require.Error(t, Builtins["judge"].Check(""))
}

// A Genkit app's evaluator keeps the colon of its key in its name; an argument follows one more.
func TestParseSpecOfAGenkitAppsEvaluator(t *testing.T) {
	for in, want := range map[string]Spec{
		"regex:^a:b":                         {Name: "regex", Arg: "^a:b"},
		"my-app:/evaluator/genkitEval/regex": {Name: "my-app:/evaluator/genkitEval/regex"},
		`app:/evaluator/x:{"k":"v:w"}`:       {Name: "app:/evaluator/x", Arg: `{"k":"v:w"}`},
		"regex:a:/evaluator/b":               {Name: "regex", Arg: "a:/evaluator/b"},
		"contains::/evaluator/":              {Name: "contains", Arg: ":/evaluator/"},
	} {
		got := ParseSpec(in)
		require.Equal(t, want, got, in)
		require.Equal(t, in, got.String(), in)
	}
}
