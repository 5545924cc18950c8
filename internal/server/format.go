package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// fmtNanos renders a duration for people: 850µs, 12ms, 1.4s, 2m05s.
func fmtNanos(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// fmtOffset renders a time from a span's start: +850µs, +12.3ms, +1.42s, +2m05s.
func fmtOffset(ns int64) string {
	sign := "+"
	if ns < 0 {
		sign, ns = "-", -ns
	}
	d := time.Duration(ns)
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%s%dµs", sign, d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%s%.1fms", sign, float64(d)/float64(time.Millisecond))
	case d < time.Minute:
		return fmt.Sprintf("%s%.2fs", sign, d.Seconds())
	}
	return sign + fmtNanos(ns)
}

func prettyJSON(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func nonEmptyJSON(raw []byte) string {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" || t == "[]" || t == "{}" {
		return ""
	}
	return prettyJSON(raw)
}

// compactRaw is JSON without its insignificant spaces.
func compactRaw(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// compactJSON is stored JSON as compact text (PostgreSQL's jsonb output puts spaces after colons
// and commas); empty for none or null. JSON that does not parse is shown trimmed, as it is.
func compactJSON(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, t) != nil {
		return string(t)
	}
	return buf.String()
}

// shortUUID is an id's random tail, as the templates' shortID shows it.
func shortUUID(id uuid.UUID) string { return id.String()[28:] }
