package server

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// logLines reads the log records of a trace, or of one span of it, for the pages. A failure to
// read them costs the page its logs, not the page: it is logged.
func (s *Server) logLines(ctx context.Context, traceID, spanID string) []templates.LogLine {
	if s.deps.Traces == nil || traceID == "" {
		return nil
	}
	logs, err := s.deps.Traces.Logs(ctx, store.LogListParams{TraceID: traceID, SpanID: spanID, Limit: 1000})
	if err != nil {
		s.log.Warn("read logs", "trace", traceID, "span", spanID, "err", err)
		return nil
	}
	out := make([]templates.LogLine, len(logs))
	for i, l := range logs {
		sev := l.SeverityText
		if sev == "" {
			sev = severityName(l.SeverityNumber)
		}
		body := string(l.Body)
		var str string
		if json.Unmarshal(l.Body, &str) == nil {
			body = str
		}
		out[i] = templates.LogLine{Time: l.Time, Severity: sev, Body: body, Attributes: string(l.Attributes)}
	}
	return out
}

// severityName names an OTel severity number by its range (TRACE 1-4 … FATAL 21-24).
func severityName(n int16) string {
	names := []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}
	if n < 1 || n > 24 {
		return "UNSPECIFIED"
	}
	name, step := names[(n-1)/4], (n-1)%4
	if step > 0 {
		return name + strconv.Itoa(int(step)+1)
	}
	return name
}
