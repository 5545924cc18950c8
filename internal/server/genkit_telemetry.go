package server

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// The parts of Genkit's telemetry server (genkit-tools/telemetry-server) beyond storing and
// reading traces, which the genkit CLI and the Dev UI server call on GENKIT_TELEMETRY_SERVER:
// streaming one trace as it grows, and logs.

// Trace streams are polled from the database, so that they see spans that any instance, or any
// program, wrote.
var (
	traceStreamPoll = 200 * time.Millisecond
	// traceStreamIdle ends a stream whose trace has not changed for this long.
	traceStreamIdle = 5 * time.Minute
)

// genkitTraceStream is GET /api/traces/{id}/stream, as Genkit's telemetry server serves it: a
// text/event-stream whose first message is the trace so far ("data: <TraceData>\n\n", when it
// exists), followed by "data: {"type":"span_start"|"span_end","traceId","span"}\n\n" as spans
// start and end (an ended span that was not seen running gets both, as Genkit sends them).
// As Genkit's, the stream stays open until the client leaves, after the root span has ended too
// (the Dev UI's streamTrace ends when the stream does); Loupe's also ends after traceStreamIdle
// without a change, or when the server stops.
func (s *Server) genkitTraceStream(c echo.Context) error {
	if err := s.checkTelemetryToken(c, "reading traces"); err != nil {
		return err
	}
	traceID, err := traceParam(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	w.Flush()

	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
			return err
		}
		w.Flush()
		return nil
	}
	seen := map[string]bool{} // span id: ended
	first := true
	lastChange := time.Now()
	tick := time.NewTicker(traceStreamPoll)
	defer tick.Stop()
	for {
		td, err := s.deps.Traces.GenkitGet(ctx, traceID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			s.log.Warn("trace stream: read trace", "trace_id", traceID, "err", err)
			return nil
		case first:
			first = false
			lastChange = time.Now()
			for id, sp := range td.Spans {
				seen[id] = sp.EndTime > 0
			}
			if err := send(td); err != nil {
				return nil
			}
		default:
			for _, ev := range traceStreamEvents(traceID, td, seen) {
				lastChange = time.Now()
				if err := send(ev); err != nil {
					return nil
				}
			}
		}
		if time.Since(lastChange) > traceStreamIdle {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return nil
		case <-tick.C:
		}
	}
}

// genkitSpanEvent is one message of a trace stream after the first.
type genkitSpanEvent struct {
	Type    string          `json:"type"`
	TraceID string          `json:"traceId"`
	Span    *trace.SpanData `json:"span"`
}

// traceStreamEvents are the events that take seen (span id: ended) to td, ordered by the time they
// happened, starts before ends at the same time, as Genkit's spanBroadcastEvents orders them.
func traceStreamEvents(traceID string, td *trace.TraceData, seen map[string]bool) []genkitSpanEvent {
	var evs []genkitSpanEvent
	for id, sp := range td.Spans {
		ended, known := seen[id]
		done := sp.EndTime > 0
		if known && (ended || !done) {
			continue
		}
		seen[id] = done
		evs = append(evs, genkitSpanEvent{Type: event.SpanStarted, TraceID: traceID, Span: sp})
		if done {
			evs = append(evs, genkitSpanEvent{Type: event.SpanEnded, TraceID: traceID, Span: sp})
		}
	}
	at := func(e genkitSpanEvent) trace.Millis {
		if e.Type == event.SpanStarted {
			return e.Span.StartTime
		}
		return e.Span.EndTime
	}
	// Few events per poll: an insertion sort keeps equal times in their start-before-end order.
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && (at(evs[j]) < at(evs[j-1]) || at(evs[j]) == at(evs[j-1]) && evs[j].Type == event.SpanStarted && evs[j-1].Type == event.SpanEnded); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	return evs
}

// genkitLogs is Genkit's GET /api/logs, /api/traces/{id}/logs and
// /api/traces/{id}/spans/{spanId}/logs: the stored OTLP log records, in Genkit's list shape
// ({"logs":[…],"continuationToken"}), newest first, which the genkit CLI's log:list and the Dev UI
// read. The query takes Genkit's limit (1 to 1000, default 100), continuationToken, traceId and
// spanId (when the path names none), severityNumber (that severity and above) and severityText.
func (s *Server) genkitLogs(c echo.Context) error {
	if err := s.checkTelemetryToken(c, "reading logs"); err != nil {
		return err
	}
	p := store.LogListParams{TraceID: c.Param("id"), SpanID: c.Param("spanId"), NewestFirst: true, Limit: 100,
		SeverityText: c.QueryParam("severityText")}
	if p.TraceID == "" {
		p.TraceID, p.SpanID = c.QueryParam("traceId"), c.QueryParam("spanId")
	}
	if p.TraceID != "" {
		if _, err := trace.ParseTraceID(p.TraceID); err != nil {
			return Errorf(http.StatusBadRequest, "bad_request", "trace id %q: %v", p.TraceID, err)
		}
	} else if p.SpanID != "" {
		return Errorf(http.StatusBadRequest, "bad_request", "spanId needs a traceId")
	}
	number := func(name string, lo, hi int) (int, error) {
		v := c.QueryParam(name)
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, Errorf(http.StatusBadRequest, "bad_request", "%s %q: want a number from %d to %d", name, v, lo, hi)
		}
		return n, nil
	}
	var err error
	if c.QueryParam("limit") != "" {
		if p.Limit, err = number("limit", 1, maxTraceListLimit); err != nil {
			return err
		}
	}
	if c.QueryParam("continuationToken") != "" {
		if p.Offset, err = number("continuationToken", 0, math.MaxInt32); err != nil {
			return err
		}
	}
	if c.QueryParam("severityNumber") != "" {
		n, err := number("severityNumber", 0, 24)
		if err != nil {
			return err
		}
		p.MinSeverity = int16(n)
	}
	// One record more than asked says whether there is a next page.
	want := p.Limit
	p.Limit++
	logs, err := s.deps.Traces.Logs(c.Request().Context(), p)
	if err != nil {
		return traceError(err)
	}
	resp := map[string]any{}
	if len(logs) > want {
		logs = logs[:want]
		resp["continuationToken"] = strconv.Itoa(p.Offset + want)
	}
	resp["logs"] = trace.GenkitLogsOf(logs)
	return c.JSON(http.StatusOK, resp)
}

// stopStreams ends the long streams (trace streams) when the server stops, instead of letting
// them hold up the shutdown.
func (s *Server) stopStreams() {
	s.closeOnce.Do(func() { close(s.closing) })
}
