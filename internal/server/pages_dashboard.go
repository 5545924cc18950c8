package server

import (
	"context"
	"fmt"
	"time"

	"github.com/loupe-dev/loupe/web/templates"
)

// dashboardChart counts the last hour's runs per minute, with the failed and aborted ones, as bar
// heights for the dashboard's inline SVG (60 bars of 10 units on a 600×40 canvas).
func (s *Server) dashboardChart(ctx context.Context, now time.Time) (templates.DashboardChart, error) {
	var ch templates.DashboardChart
	start := now.Truncate(time.Minute).Add(-59 * time.Minute)
	stats, err := s.store.RunStatsPerMinute(ctx, start)
	if err != nil {
		return ch, err
	}
	per := make([]struct{ total, errors int }, 60)
	for _, m := range stats {
		i := int(m.Minute.Sub(start) / time.Minute)
		if i < 0 || i >= 60 {
			continue
		}
		per[i].total += m.Total
		per[i].errors += m.Errors
	}
	for _, p := range per {
		ch.Total += p.total
		ch.Errors += p.errors
		ch.PeakPerMin = max(ch.PeakPerMin, p.total)
	}
	scale := 40.0 / float64(max(ch.PeakPerMin, 1))
	for i, p := range per {
		at := start.Add(time.Duration(i) * time.Minute)
		ch.Bars = append(ch.Bars, templates.ChartBar{X: float64(i * 10), H: float64(p.total) * scale, EH: float64(p.errors) * scale,
			Title: fmt.Sprintf("%s: %d runs, %d failed", at.UTC().Format("15:04"), p.total, p.errors)})
	}
	ch.ErrorRate = "0%"
	if ch.Total > 0 {
		ch.ErrorRate = fmt.Sprintf("%.1f%%", 100*float64(ch.Errors)/float64(ch.Total))
	}
	return ch, nil
}
