package server

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGenkitTraceGetAnswersAsGenkitsServer: GET /api/traces/{id} gives back what Genkit JS sent
// where Genkit's own telemetry server does (a successful span's status code 0, links [],
// timeEvents {timeEvent: []}), and an unknown trace id gets what that server answers, 200 and no
// body, which `genkit trace:get` reads as "not found" rather than an error; a malformed id is a 400.
func TestGenkitTraceGetAnswersAsGenkitsServer(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	replayFixture(t, b, "genkit-js-1.42-dev.jsonl")
	const traceID = "016017260409a9c3e70ee5c46e056d1a"
	resp, err := http.Get(b.url + "/api/traces/" + traceID)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var td struct {
		Spans map[string]map[string]json.RawMessage `json:"spans"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&td))
	require.NotEmpty(t, td.Spans)
	ok := 0
	for id, sp := range td.Spans {
		require.JSONEq(t, `[]`, string(sp["links"]), id)
		var attrs map[string]any
		require.NoError(t, json.Unmarshal(sp["attributes"], &attrs))
		if attrs["genkit:state"] == "success" {
			ok++
			require.JSONEq(t, `{"code":0}`, string(sp["status"]), "%s: a successful span's status is Genkit's", id)
			require.JSONEq(t, `{"timeEvent":[]}`, string(sp["timeEvents"]), id)
		}
	}
	require.Positive(t, ok)

	resp, err = http.Get(b.url + "/api/traces/0123456789abcdef0123456789abcdef")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, body, "an unknown trace is no trace, as Genkit's server answers")

	resp, err = http.Get(b.url + "/api/traces/nope")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
