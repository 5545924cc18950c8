package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/ai"
)

// text is a JSON value as a person reads it: a string's text, anything else its compact JSON.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// short cuts a text for an explanation, at a rune boundary.
func short(s string) string { return cut(s, 120) }

// cut keeps at most n bytes of s, not splitting a rune, and marks the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func needReference(c *Case) *Score {
	if len(c.Reference) == 0 || string(c.Reference) == "null" {
		return &Score{Pass: false, Explanation: "the example has no reference output to compare with"}
	}
	return nil
}

func exact(_ context.Context, _ Env, _ string, c *Case) (*Score, error) {
	if s := needReference(c); s != nil {
		return s, nil
	}
	got, want := text(c.Output), text(c.Reference)
	if got == want {
		return verdict(true, "the output equals the reference"), nil
	}
	return verdict(false, "the output %q differs from the reference %q", short(got), short(want)), nil
}

func decode(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return normalise(v), nil
}

// normalise makes numbers compare by value (1 and 1.0 are equal).
func normalise(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		for k, e := range x {
			x[k] = normalise(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalise(e)
		}
	}
	return v
}

// firstDifference is the path of the first place two JSON values differ ("" when equal).
func firstDifference(a, b any, path string) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return orRoot(path)
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			if d := firstDifference(x[k], y[k], path+"/"+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return orRoot(path)
		}
		for i := range x {
			if d := firstDifference(x[i], y[i], path+"/"+strconv.Itoa(i)); d != "" {
				return d
			}
		}
		return ""
	}
	if reflect.DeepEqual(a, b) {
		return ""
	}
	return orRoot(path)
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

func jsonEqual(_ context.Context, _ Env, _ string, c *Case) (*Score, error) {
	if s := needReference(c); s != nil {
		return s, nil
	}
	if len(c.Output) == 0 {
		return verdict(false, "the run has no output (it ended %s)", c.Status), nil
	}
	got, err := decode(c.Output)
	if err != nil {
		return verdict(false, "the output is not JSON: %v", err), nil
	}
	want, err := decode(c.Reference)
	if err != nil {
		return verdict(false, "the reference is not JSON: %v", err), nil
	}
	if d := firstDifference(want, got, ""); d != "" {
		return verdict(false, "the output differs from the reference at %s", d), nil
	}
	return verdict(true, "the output is JSON-equal to the reference"), nil
}

func schemaSource(arg string, c *Case) ([]byte, error) {
	switch {
	case arg != "":
		return []byte(arg), nil
	case len(c.Reference) > 0:
		return c.Reference, nil
	}
	return nil, errors.New("no schema: give schema:{…}, or a reference that is a schema")
}

func checkSchemaArg(arg string) error {
	if arg == "" {
		return nil
	}
	raw, err := schemaSource(arg, &Case{})
	if err != nil {
		return err
	}
	var s ai.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("not a JSON Schema: %w", err)
	}
	return nil
}

func schemaValid(_ context.Context, _ Env, arg string, c *Case) (*Score, error) {
	raw, err := schemaSource(arg, c)
	if err != nil {
		return &Score{Explanation: err.Error()}, nil
	}
	var s ai.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return &Score{Explanation: "not a JSON Schema: " + err.Error()}, nil
	}
	out := c.Output
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if err := s.ValidateJSON(out); err != nil {
		return verdict(false, "the output is not valid against the schema: %v", err), nil
	}
	return verdict(true, "the output is valid against the schema"), nil
}

func contains(_ context.Context, _ Env, arg string, c *Case) (*Score, error) {
	want := arg
	if want == "" {
		if s := needReference(c); s != nil {
			return s, nil
		}
		want = text(c.Reference)
	}
	if strings.Contains(text(c.Output), want) {
		return verdict(true, "the output contains %q", short(want)), nil
	}
	return verdict(false, "the output %q does not contain %q", short(text(c.Output)), short(want)), nil
}

func checkRegex(arg string) error {
	if arg == "" {
		return errors.New("regex needs a pattern, as in regex:^Booked")
	}
	_, err := regexp.Compile(arg)
	return err
}

func regexMatch(_ context.Context, _ Env, arg string, c *Case) (*Score, error) {
	re, err := regexp.Compile(arg)
	if err != nil {
		return nil, err
	}
	if re.MatchString(text(c.Output)) {
		return verdict(true, "the output matches %s", arg), nil
	}
	return verdict(false, "the output %q does not match %s", short(text(c.Output)), arg), nil
}

func callText(t ToolCall) string { return t.Tool + " " + short(text(t.Input)) }

func sameCall(a, b ToolCall) bool {
	if a.Tool != b.Tool {
		return false
	}
	x, err1 := decode(a.Input)
	y, err2 := decode(b.Input)
	return err1 == nil && err2 == nil && firstDifference(x, y, "") == ""
}

// trajectory compares the run's tool calls with the reference run's, position by position: the
// score is the share of positions that agree (of the longer list), and the explanation names the
// first that does not.
func trajectory(_ context.Context, _ Env, _ string, c *Case) (*Score, error) {
	want, got := c.ReferenceToolCalls, c.ToolCalls
	n := max(len(want), len(got))
	if n == 0 {
		return verdict(true, "no tool calls, as in the reference run"), nil
	}
	same, first := 0, -1
	for i := range n {
		if i < len(want) && i < len(got) && sameCall(want[i], got[i]) {
			same++
		} else if first < 0 {
			first = i
		}
	}
	s := &Score{Score: score(float64(same) / float64(n)), Pass: same == n}
	switch {
	case first < 0:
		s.Explanation = fmt.Sprintf("the same %d tool calls as the reference run", n)
	case first >= len(got):
		s.Explanation = fmt.Sprintf("call %d: the reference run made %s, this run made no more calls (%d of %d agree)", first+1, callText(want[first]), same, n)
	case first >= len(want):
		s.Explanation = fmt.Sprintf("call %d: this run made %s, the reference run made no more calls (%d of %d agree)", first+1, callText(got[first]), same, n)
	default:
		s.Explanation = fmt.Sprintf("call %d: the reference run made %s, this run %s (%d of %d agree)", first+1, callText(want[first]), callText(got[first]), same, n)
	}
	return s, nil
}

func checkInt(arg string) error {
	if arg == "" {
		return nil
	}
	return checkIntRequired(arg)
}

func checkIntRequired(arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a whole number", arg)
	}
	return nil
}

func turns(_ context.Context, _ Env, arg string, c *Case) (*Score, error) {
	limit, from := c.ReferenceTurns, "the reference run's"
	if arg != "" {
		limit, _ = strconv.Atoi(arg)
		from = "the limit"
	} else if limit == 0 {
		return &Score{Explanation: "no turn limit: give turns:N, or an example from a recorded run"}, nil
	}
	return verdict(c.Turns <= limit, "%d turns, %s %d", c.Turns, from, limit), nil
}

func tokens(_ context.Context, _ Env, arg string, c *Case) (*Score, error) {
	limit, _ := strconv.ParseInt(arg, 10, 64)
	used := c.InputTokens + c.OutputTokens
	return verdict(used <= limit, "%d tokens, the budget %d", used, limit), nil
}

func checkDuration(arg string) error {
	d, err := time.ParseDuration(arg)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is not a duration such as 2s or 500ms", arg)
	}
	return nil
}

func latency(_ context.Context, _ Env, arg string, c *Case) (*Score, error) {
	d, _ := time.ParseDuration(arg)
	took := time.Duration(c.LatencyMs) * time.Millisecond
	return verdict(took <= d, "ran %s, the budget %s", took, d), nil
}

func succeeded(_ context.Context, _ Env, _ string, c *Case) (*Score, error) {
	if c.Status == "succeeded" {
		return verdict(true, "the run succeeded"), nil
	}
	if c.Error != "" {
		return verdict(false, "the run ended %s: %s", c.Status, cut(c.Error, 1000)), nil
	}
	return verdict(false, "the run ended %s", c.Status), nil
}

func checkRequired(arg string) error {
	if arg == "" {
		return errors.New("judge needs the model to ask, as in judge:openai/gpt-4o")
	}
	return nil
}

// judge asks a model to grade the output, and reads its JSON verdict.
func judge(ctx context.Context, env Env, model string, c *Case) (*Score, error) {
	if env.Judge == nil {
		return nil, errors.New("no model to judge with in this program")
	}
	rubric := "Does the output answer the input correctly and completely, as well as the reference does?"
	if r := text(c.Reference); len(c.Reference) > 0 && strings.HasPrefix(strings.TrimSpace(string(c.Reference)), `"`) {
		rubric = r
	}
	prompt := fmt.Sprintf(`You grade the output of an AI agent.
Rubric: %s

Input: %s
Reference output: %s
Agent output: %s

Answer with one JSON object and nothing else: {"score": a number from 0 to 1, "pass": true or false, "explanation": one sentence}.`,
		rubric, text(c.Input), text(c.Reference), text(c.Output))
	answer, err := env.Judge(ctx, model, prompt)
	if err != nil {
		return nil, fmt.Errorf("judge %s: %w", model, err)
	}
	start, end := strings.Index(answer, "{"), strings.LastIndex(answer, "}")
	var v struct {
		Score       *float64 `json:"score"`
		Pass        *bool    `json:"pass"`
		Explanation string   `json:"explanation"`
	}
	if start < 0 || end < start || json.Unmarshal([]byte(answer[start:end+1]), &v) != nil || (v.Score == nil && v.Pass == nil) {
		return &Score{Explanation: "the judge's answer is not a verdict: " + short(answer)}, nil
	}
	s := &Score{Score: v.Score, Explanation: v.Explanation}
	switch {
	case v.Pass != nil:
		s.Pass = *v.Pass
	case v.Score != nil:
		s.Pass = *v.Score >= 0.5
	}
	if s.Score != nil {
		*s.Score = min(max(*s.Score, 0), 1)
	}
	return s, nil
}
