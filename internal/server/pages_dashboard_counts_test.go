package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDashboardPerActionCountsEveryRunAndAbortedApart: the per-action table counts every run
// created in the range, queued, running and waiting ones too (not only the finished); "Failed"
// counts failures, aborted runs (maxTurns exceeded) have their own column; the percentiles are the
// finished runs'. GET /api/v1/dashboard says the same in snake_case.
func TestDashboardPerActionCountsEveryRunAndAbortedApart(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	_, err := b.store.Pool().Exec(context.Background(), `
		INSERT INTO runs (action, input, status, model, started_at, finished_at, input_tokens, output_tokens)
		SELECT '/flow/x', '{}', s, 'm', now() - interval '2 s', CASE WHEN s IN ('succeeded','failed','aborted') THEN now() END, 10, 5
		FROM unnest(ARRAY['succeeded','failed','aborted','aborted','queued','running','interrupted']) s`)
	require.NoError(t, err)

	var out struct {
		ByAction []map[string]any `json:"by_action"`
	}
	resp, body := get(t, b.url+"/api/v1/dashboard", "Accept", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Len(t, out.ByAction, 1)
	row := out.ByAction[0]
	require.Equal(t, "/flow/x", row["action"])
	require.EqualValues(t, 7, row["runs"], "every run created in the range")
	require.EqualValues(t, 1, row["failed"], "failures only")
	require.EqualValues(t, 2, row["aborted"])
	require.EqualValues(t, 4, row["finished"])
	require.Contains(t, row, "ran_p50")
	require.Contains(t, row, "tokens_sum")
	require.NotContains(t, row, "RanP50", "snake_case, as the rest of the API")
	require.NotContains(t, body, `"Action"`)

	_, page := get(t, b.url+"/", "Accept", "text/html")
	require.Contains(t, page, `<td data-stat="runs">7</td>`)
	require.Contains(t, page, `<td data-stat="aborted">2</td>`)
}
