package experiments

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/genkitapp"
)

// A Genkit app's scores read as Loupe's: a number, a boolean or a string, PASS or FAIL as the app
// says; without a status, true or a number from 0.5 to 1 passes; UNKNOWN, a bare string, nothing,
// or the evaluator's error fails, saying why; a list passes when each passes.
func TestGenkitScoresReadAsLoupes(t *testing.T) {
	read := func(evaluation string) (*float64, bool, string) {
		t.Helper()
		r := genkitapp.EvalResponse{TestCaseID: "t", Evaluation: json.RawMessage(evaluation)}
		scores, err := r.Scores()
		require.NoError(t, err)
		return appVerdict(scores)
	}
	for _, c := range []struct {
		evaluation string
		score      *float64
		pass       bool
		why        string
	}{
		{`{"score":true,"status":"PASS","details":{"reasoning":"same"}}`, ptr(1), true, "same"},
		{`{"score":false}`, ptr(0), false, "scored false"},
		{`{"score":0.8}`, ptr(0.8), true, "scored 0.8"},
		{`{"score":0.8,"status":"FAIL","details":{"reasoning":"too low for me"}}`, ptr(0.8), false, "too low for me"},
		{`{"score":0.2}`, ptr(0.2), false, "a score of 0.2 with no status (a number from 0.5 to 1 passes)"},
		{`{"score":4,"details":{"reasoning":"4 of 5"}}`, ptr(4), false, "a score of 4 with no status (a number from 0.5 to 1 passes); 4 of 5"},
		{`{"score":"yes"}`, nil, false, `a score of "yes" with no PASS or FAIL status: counted as failing`},
		{`{"score":"good","status":"PASS"}`, nil, true, `scored "good"`},
		{`{"score":1,"status":"UNKNOWN"}`, ptr(1), false, "the evaluator's status is UNKNOWN: counted as failing"},
		{`{}`, nil, false, "no score and no status: counted as failing"},
		{`{"error":"no model"}`, nil, false, "the evaluator failed: no model"},
		{`[{"id":"a","score":1,"status":"PASS"},{"id":"b","score":0,"status":"FAIL","details":{"reasoning":"b is off"}}]`, ptr(0.5), false, "a: scored 1; b: b is off"},
	} {
		score, pass, why := read(c.evaluation)
		require.Equal(t, c.score, score, c.evaluation)
		require.Equal(t, c.pass, pass, c.evaluation)
		require.Equal(t, c.why, why, c.evaluation)
	}
}

func ptr(f float64) *float64 { return &f }
