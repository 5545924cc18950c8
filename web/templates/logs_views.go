package templates

import "time"

// LogLine is one log record as the span panel and the run page show it.
type LogLine struct {
	Time time.Time
	// Severity is the record's severity text, or its number's name when the text is empty.
	Severity   string
	Body       string
	Attributes string
}
