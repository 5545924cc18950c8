package server

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// seedPricedRuns stores four finished runs: one on gpt-4o ($3.50), one on gpt-4o-mini
// ($0.0021), one that also called a model without a price, and one with no model call.
func seedPricedRuns(t *testing.T, b *bundle) (dear, cheap, unpriced, none uuid.UUID) {
	t.Helper()
	ids := make([]uuid.UUID, 4)
	for i, r := range []struct{ action, model, usage string }{
		{"/flow/priced", "gpt-4o", `{"openai/gpt-4o": {"input": 1000000, "output": 100000}}`},
		{"/flow/priced", "gpt-4o", `{"gpt-4o-mini-2024-07-18": {"input": 10000, "output": 1000}}`},
		{"/flow/unpriced", "demo/travel", `{"gpt-4o": {"input": 10, "output": 1}, "demo/travel": {"input": 5, "output": 5}}`},
		{"/flow/none", "", ``},
	} {
		var usage any
		if r.usage != "" {
			usage = r.usage
		}
		require.NoError(t, b.store.Pool().QueryRow(context.Background(), `
			INSERT INTO runs (action, input, status, model, started_at, finished_at, usage)
			VALUES ($1, '{}', 'succeeded', nullif($2, ''), now(), now(), $3::jsonb) RETURNING id`,
			r.action, r.model, usage).Scan(&ids[i]))
	}
	return ids[0], ids[1], ids[2], ids[3]
}

// TestRunsListShowsAndSortsCost: the runs list has a Cost column, priced per model called (a
// model without a price shows "—", never a number), sortable, the unknown last; the run page's
// header shows it with the prices in its tooltip; the runs API sends cost_usd (null when unknown)
// and the tokens per model; the dashboard prices each action and model's runs in all.
func TestRunsListShowsAndSortsCost(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	dear, cheap, unpriced, none := seedPricedRuns(t, b)

	costCell := regexp.MustCompile(`(?s)<tr data-run="([0-9a-f-]{36})".*?<td data-cost[^>]*>([^<]*)</td>`)
	cells := func(body string) ([]string, map[string]string) {
		var order []string
		byID := map[string]string{}
		for _, m := range costCell.FindAllStringSubmatch(body, -1) {
			order = append(order, m[1])
			byID[m[1]] = m[2]
		}
		return order, byID
	}
	resp, body := get(t, b.url+"/runs", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-sort="cost"`, "the column sorts")
	_, byID := cells(body)
	require.Equal(t, map[string]string{dear.String(): "$3.50", cheap.String(): "$0.0021", unpriced.String(): "—", none.String(): "$0"}, byID)

	_, body = get(t, b.url+"/runs?sort=cost", "Accept", "text/html")
	order, _ := cells(body)
	require.Equal(t, []string{dear.String(), cheap.String(), none.String(), unpriced.String()}, order, "dearest first, the unknown last")
	_, body = get(t, b.url+"/runs?sort=cost&dir=asc&limit=2", "Accept", "text/html")
	order, _ = cells(body)
	require.Equal(t, []string{unpriced.String(), none.String()}, order)

	_, body = get(t, b.url+"/runs/"+dear.String(), "Accept", "text/html")
	require.Regexp(t, `data-fact="cost"><dt>Cost</dt><dd title="openai/gpt-4o: 1000000 in × \$2.5 \+ 100000 out × \$10 per million">\$3.50</dd>`, body)
	_, body = get(t, b.url+"/runs/"+unpriced.String(), "Accept", "text/html")
	require.Regexp(t, `data-fact="cost"><dt>Cost</dt><dd title="[^"]*demo/travel: no price[^"]*">—</dd>`, body)
	_, body = get(t, b.url+"/runs/"+none.String(), "Accept", "text/html")
	require.NotContains(t, body, `data-fact="cost"`, "no model call, no cost to speak of")

	var list struct {
		Runs []struct {
			ID      uuid.UUID                   `json:"id"`
			CostUSD *float64                    `json:"cost_usd"`
			Usage   map[string]map[string]int64 `json:"usage"`
		} `json:"runs"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/runs?sort=cost", &list))
	require.Len(t, list.Runs, 4)
	require.Equal(t, dear, list.Runs[0].ID)
	require.InDelta(t, 3.5, *list.Runs[0].CostUSD, 1e-9)
	require.Equal(t, map[string]map[string]int64{"openai/gpt-4o": {"input_tokens": 1000000, "output_tokens": 100000}}, list.Runs[0].Usage)
	require.InDelta(t, 0.0021, *list.Runs[1].CostUSD, 1e-9)
	require.InDelta(t, 0, *list.Runs[2].CostUSD, 1e-9)
	require.Nil(t, list.Runs[3].CostUSD, "unknown is null, not 0")
	var one map[string]any
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/runs/"+unpriced.String(), &one))
	require.Contains(t, one, "cost_usd")
	require.Nil(t, one["cost_usd"])

	var dash struct {
		ByAction []struct {
			Action  string   `json:"action"`
			CostUSD *float64 `json:"cost_usd"`
		} `json:"by_action"`
	}
	resp, body = get(t, b.url+"/api/v1/dashboard", "Accept", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &dash))
	costs := map[string]*float64{}
	for _, r := range dash.ByAction {
		costs[r.Action] = r.CostUSD
	}
	require.InDelta(t, 3.5021, *costs["/flow/priced"], 1e-9)
	require.Nil(t, costs["/flow/unpriced"])
	require.InDelta(t, 0, *costs["/flow/none"], 1e-9)
	_, body = get(t, b.url+"/", "Accept", "text/html")
	require.Regexp(t, `<td data-stat="cost" title="[^"]*">\$3.50</td>`, body)
	require.Contains(t, body, `<th>Cost in all</th>`)
}
