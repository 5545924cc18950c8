package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// dashboardData gathers what both the dashboard page and its JSON twin show, over a time range.
func (s *Server) dashboardData(ctx context.Context, rg dashboardRange) (templates.Dashboard, error) {
	var d templates.Dashboard
	counts, err := s.store.RunCountByStatus(ctx)
	if err != nil {
		return d, err
	}
	for _, st := range store.RunStatuses {
		d.Counts = append(d.Counts, templates.StatusCount{Status: st, Count: counts[st]})
		d.TotalRuns += counts[st]
	}
	if d.Pending, err = s.store.InterruptCountPending(ctx); err != nil {
		return d, err
	}
	pending, err := s.store.InterruptListPending(ctx, 10)
	if err != nil {
		return d, err
	}
	now := time.Now()
	for _, i := range pending {
		d.PendingList = append(d.PendingList, templates.InterruptRow{
			ID: i.ID.String(), RunID: i.RunID.String(), Tool: i.Tool,
			Age: humanAge(now.Sub(i.CreatedAt)), Prompt: interruptMessage(i.Metadata),
		})
	}
	if d.Chart, err = s.dashboardChart(ctx, now, rg); err != nil {
		return d, err
	}
	if d.Stats, err = s.dashboardStats(ctx, now, rg); err != nil {
		return d, err
	}
	recent, _, err := s.store.RunList(ctx, store.RunListParams{Limit: 10})
	if err != nil {
		return d, err
	}
	for _, r := range recent {
		d.RecentRuns = append(d.RecentRuns, templates.RunRow{ID: r.ID.String(), Action: r.Action, Status: r.Status, CreatedAt: r.CreatedAt})
	}
	return d, nil
}

func (s *Server) dashboard(c echo.Context) error {
	d, err := s.dashboardData(c.Request().Context(), rangeNamed(c.QueryParam("range")))
	if err != nil {
		return err
	}
	d.Page = s.page(c, "Dashboard", "dashboard")
	return s.render(c, http.StatusOK, templates.DashboardPage(d))
}

func (s *Server) apiDashboard(c echo.Context) error {
	rg := rangeNamed(c.QueryParam("range"))
	d, err := s.dashboardData(c.Request().Context(), rg)
	if err != nil {
		return err
	}
	counts := make(map[string]int64, len(d.Counts))
	for _, sc := range d.Counts {
		counts[sc.Status] = sc.Count
	}
	return c.JSON(http.StatusOK, map[string]any{
		"runs_by_status":     counts,
		"runs_total":         d.TotalRuns,
		"pending_interrupts": d.Pending,
		"range":              rg.name,
		"runs_in_range":      d.Chart.Total,
		"errors_in_range":    d.Chart.Errors,
		"by_action":          apiActionStats(d.Stats),
	})
}

// actionStatsJSON is one row of the dashboard's per-action table in the API's snake_case.
type actionStatsJSON struct {
	Action    string `json:"action"`
	Model     string `json:"model"`
	Runs      int    `json:"runs"`
	Failed    int    `json:"failed"`
	Aborted   int    `json:"aborted"`
	Finished  int    `json:"finished"`
	RanP50    string `json:"ran_p50"`
	RanP95    string `json:"ran_p95"`
	TokensP50 string `json:"tokens_p50"`
	TokensP95 string `json:"tokens_p95"`
	TokensSum int64  `json:"tokens_sum"`
	// CostUSD is the runs' cost in all, null when a model they called has no price.
	CostUSD *float64 `json:"cost_usd"`
	RunsURL string   `json:"runs_url"`
}

func apiActionStats(list []templates.ActionStats) []actionStatsJSON {
	out := make([]actionStatsJSON, 0, len(list))
	for _, st := range list {
		out = append(out, actionStatsJSON{Action: st.Action, Model: st.Model, Runs: st.Runs, Failed: st.Failed, Aborted: st.Aborted,
			Finished: st.Finished, RanP50: st.RanP50, RanP95: st.RanP95, TokensP50: st.TokensP50, TokensP95: st.TokensP95,
			TokensSum: st.TokensSum, CostUSD: st.CostUSD, RunsURL: st.RunsURL})
	}
	return out
}

// humanAge renders a duration the way an inbox does: "42s", "5m", "3h", "2d".
func humanAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// interruptPrompt shows interrupt metadata that names no question (see interruptMessage) as it is,
// cut at 160 characters, whole runes only.
func interruptPrompt(metadata []byte) string {
	m := strings.TrimSpace(string(metadata))
	if m == "" || m == "true" || m == "null" {
		return "(no message)"
	}
	return store.Shorten(m, 160)
}
