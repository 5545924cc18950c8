package server

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// dashboardRange is a time range the dashboard shows: its width, and the bucket its chart counts
// runs in.
type dashboardRange struct {
	name, label   string
	width, bucket time.Duration
	bucketLabel   string
	tick          string // the x axis's time format
}

var dashboardRanges = []dashboardRange{
	{"1h", "last hour", time.Hour, time.Minute, "minute", "15:04"},
	{"24h", "last 24 hours", 24 * time.Hour, 30 * time.Minute, "30 minutes", "15:04"},
	{"7d", "last 7 days", 7 * 24 * time.Hour, 3 * time.Hour, "3 hours", "Jan 2 15:04"},
}

// rangeNamed is the range of a ?range= value; an unknown or empty one is the first (last hour).
func rangeNamed(name string) dashboardRange {
	for _, r := range dashboardRanges {
		if r.name == name {
			return r
		}
	}
	return dashboardRanges[0]
}

// chartWidth and chartHeight are the chart's SVG units.
const chartWidth, chartHeight = 600.0, 100.0

// dashboardChart counts the range's runs per bucket, with the failed and aborted ones, as bar
// heights for the dashboard's inline SVG, with x axis labels and the range choices.
func (s *Server) dashboardChart(ctx context.Context, now time.Time, rg dashboardRange) (templates.DashboardChart, error) {
	ch := templates.DashboardChart{Range: rg.label, Bucket: rg.bucketLabel}
	for _, r := range dashboardRanges {
		ch.Ranges = append(ch.Ranges, templates.RangeLink{Label: r.name, URL: "/?" + url.Values{"range": {r.name}}.Encode(), Current: r.name == rg.name})
	}
	n := int(rg.width / rg.bucket)
	start := now.Truncate(rg.bucket).Add(-time.Duration(n-1) * rg.bucket)
	stats, err := s.store.RunStatsPerBucket(ctx, start, rg.bucket)
	if err != nil {
		return ch, err
	}
	per := make([]struct{ total, errors int }, n)
	for _, m := range stats {
		i := int(m.Start.Sub(start) / rg.bucket)
		if i < 0 || i >= n {
			continue
		}
		per[i].total += m.Total
		per[i].errors += m.Errors
	}
	for _, p := range per {
		ch.Total += p.total
		ch.Errors += p.errors
		ch.Peak = max(ch.Peak, p.total)
	}
	scale := chartHeight / float64(max(ch.Peak, 1))
	step := chartWidth / float64(n)
	for i, p := range per {
		at := start.Add(time.Duration(i) * rg.bucket)
		ch.Bars = append(ch.Bars, templates.ChartBar{X: float64(i) * step, H: float64(p.total) * scale, EH: float64(p.errors) * scale,
			Title: fmt.Sprintf("%s UTC: %d runs, %d failed", at.UTC().Format(rg.tick), p.total, p.errors)})
	}
	for _, i := range []int{0, n / 2, n - 1} {
		at := start.Add(time.Duration(i) * rg.bucket)
		ch.XLabels = append(ch.XLabels, templates.AxisLabel{X: float64(i) * step, Text: at.UTC().Format(rg.tick)})
	}
	ch.ErrorRate = "0%"
	if ch.Total > 0 {
		ch.ErrorRate = fmt.Sprintf("%.1f%%", 100*float64(ch.Errors)/float64(ch.Total))
	}
	return ch, nil
}

// dashboardStats are the p50/p95 running time and tokens per action and model of the runs that
// finished in the range, each linked to those runs: the action's, and the action's with that model.
func (s *Server) dashboardStats(ctx context.Context, now time.Time, rg dashboardRange) ([]templates.ActionStats, error) {
	since := now.Add(-rg.width)
	list, err := s.store.RunPercentilesSince(ctx, since, 20)
	if err != nil {
		return nil, err
	}
	out := make([]templates.ActionStats, 0, len(list))
	for _, p := range list {
		q := url.Values{"action": {p.Action}, "since": {since.UTC().Format(time.RFC3339)}}
		failed := url.Values{"action": {p.Action}, "status": {store.RunFailed}, "since": {since.UTC().Format(time.RFC3339)}}
		var modelRuns string
		if p.Model != "" {
			mq := url.Values{"action": {p.Action}, "model": {p.Model}, "since": {since.UTC().Format(time.RFC3339)}}
			modelRuns = "/runs?" + mq.Encode()
		}
		out = append(out, templates.ActionStats{ModelRunsURL: modelRuns, Action: p.Action, Model: p.Model, Runs: p.Runs, Failed: p.Failed, Aborted: p.Aborted, Finished: p.Finished,
			RanP50: fmtNanos(int64(p.RanP50Ms * 1e6)), RanP95: fmtNanos(int64(p.RanP95Ms * 1e6)),
			TokensP50: fmt.Sprintf("%.0f", p.TokensP50), TokensP95: fmt.Sprintf("%.0f", p.TokensP95), TokensSum: p.TokensSum,
			Cost: costText(s.prices.Cost(p.Usage)), CostTitle: pricesOf(s.prices, p.Usage), CostUSD: costUSD(s.prices.Cost(p.Usage)),
			RunsURL: "/runs?" + q.Encode(), FailedRunsURL: "/runs?" + failed.Encode()})
	}
	return out, nil
}
