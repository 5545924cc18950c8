package templates

import (
	"strconv"
)

// DashboardChart is the runs and failures per time bucket over the dashboard's range.
type DashboardChart struct {
	// Bars are per bucket, oldest first, with heights in the chart's 0..100 units.
	Bars      []ChartBar
	Total     int
	Errors    int
	ErrorRate string
	// Peak is the most runs in one bucket, the y axis's top; Bucket names a bucket's width.
	Peak   int
	Bucket string
	// XLabels are the x axis's time labels; Range is the chosen range and Ranges its choices.
	XLabels []AxisLabel
	Range   string
	Ranges  []RangeLink
}

// ChartBar is one bucket of the chart.
type ChartBar struct {
	X, H, EH float64
	Title    string
}

// AxisLabel is a tick on the chart's x axis, at X in the chart's 0..600 units.
type AxisLabel struct {
	X    float64
	Text string
}

// RangeLink is one of the dashboard's time ranges.
type RangeLink struct {
	Label, URL string
	Current    bool
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
