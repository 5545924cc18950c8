package experiments_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/store"
)

// FuzzDecodeGenkitEvalRequest: any body either decodes to a request Loupe can score and store
// (an evalRunId, every datapoint with a testCaseId and an input, all storable), decoded again the
// same from its own JSON, or is refused as the caller's mistake (ErrInvalid); it never panics.
func FuzzDecodeGenkitEvalRequest(f *testing.F) {
	for _, seed := range []string{
		`{"evalRunId":"e","dataset":[{"testCaseId":"t","input":"a","output":"b","reference":"b","context":["c"],"traceIds":["0123"]}]}`,
		`{"evalRunId":"e","dataset":[{},{"input":null}],"options":{"arg":"^x"},"batchSize":2}`,
		`{"evalRunId":"e","dataset":[],"options":"x"}`,
		`{"evalRunId":"","dataset":[]}`,
		`{"evalRunId":"e","dataset":[{"testCaseId":"a\u0000"}]}`,
		`{"evalRunId":"e","dataset":[1]}`,
		`{"evalRunId":"e","dataset":[]} {}`,
		`{"evalRunId":"e","options":{"arg":1},"dataset":[]}`,
		`"x"`, `null`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := experiments.DecodeGenkitEvalRequest(body)
		if err != nil {
			require.True(t, errors.Is(err, experiments.ErrInvalid), "a refusal is the caller's mistake: %v", err)
			return
		}
		require.NotEmpty(t, req.EvalRunID)
		require.NoError(t, store.CheckText("evalRunId", req.EvalRunID))
		for _, dp := range req.Dataset {
			require.NotEmpty(t, dp.TestCaseID)
			require.NoError(t, store.CheckText("testCaseId", dp.TestCaseID))
			require.NotEmpty(t, dp.Input)
			for _, raw := range []json.RawMessage{dp.Input, dp.Output, dp.Reference} {
				require.NoError(t, store.CheckJSON("", raw))
			}
		}
		again, err := json.Marshal(req)
		require.NoError(t, err)
		req2, err := experiments.DecodeGenkitEvalRequest(again)
		require.NoError(t, err, "its own JSON decodes: %s", again)
		require.Equal(t, len(req.Dataset), len(req2.Dataset))
		for i := range req.Dataset {
			require.Equal(t, req.Dataset[i].TestCaseID, req2.Dataset[i].TestCaseID)
		}
	})
}
