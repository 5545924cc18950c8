package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
)

// actionStream answers an action run at once in Genkit's runAction shapes: the headers (trace
// and span ids in X-Genkit-Trace-Id and X-Genkit-Span-Id) go out as soon as the root span
// starts, a streamed run's chunks follow a line each, and the last line is {"result"} or
// {"error"}. While the run lasts, its trace id cancels it (/api/cancelAction). Both Genkit's
// /api/runAction and the prompt playground's run answer through it.
type actionStream struct {
	s       *Server
	w       *echo.Response
	stream  bool
	cancel  context.CancelCauseFunc
	traceID string
}

// startActionStream prepares the answer to c and returns the context to run the action in (its
// root span carries labels) and a func to call when the run is over.
func (s *Server) startActionStream(c echo.Context, stream bool, labels map[string]string) (context.Context, *actionStream, func()) {
	ctx, cancel := context.WithCancelCause(c.Request().Context())
	a := &actionStream{s: s, w: c.Response(), stream: stream, cancel: cancel}
	ctx = engine.WithRootSpan(ctx, labels, a.commit)
	return ctx, a, func() {
		if a.traceID != "" {
			s.active.remove(a.traceID)
		}
		cancel(nil)
	}
}

// commit sends the headers once, with the root span's ids when sc is valid.
func (a *actionStream) commit(sc oteltrace.SpanContext) {
	if a.w.Committed {
		return
	}
	h := a.w.Header()
	if sc.IsValid() {
		a.traceID = sc.TraceID().String()
		h.Set("X-Genkit-Trace-Id", a.traceID)
		h.Set("X-Genkit-Span-Id", sc.SpanID().String())
		a.s.active.add(a.traceID, a.cancel)
	}
	h.Set("X-Genkit-Version", "loupe/"+a.s.cfg.Version)
	if a.stream {
		h.Set(echo.HeaderContentType, "text/plain")
	} else {
		h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	a.w.WriteHeader(http.StatusOK)
	a.w.Flush()
}

// writeChunk sends one streamed chunk, already on one line and ending in a newline.
func (a *actionStream) writeChunk(line []byte) error {
	a.commit(oteltrace.SpanContext{})
	if _, err := a.w.Write(line); err != nil {
		return err
	}
	a.w.Flush()
	return nil
}

// finish sends the last line: the run's error as a Genkit Status, or its result with the trace
// id.
func (a *actionStream) finish(ctx context.Context, out json.RawMessage, err error) error {
	var final any
	if err != nil {
		final = map[string]any{"error": a.s.genkitRunError(ctx, err, a.traceID)}
	} else {
		telemetry := map[string]any{}
		if a.traceID != "" {
			telemetry["traceId"] = a.traceID
		}
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		final = map[string]any{"result": out, "telemetry": telemetry}
	}
	b, merr := json.Marshal(final)
	if merr != nil {
		return merr
	}
	a.commit(oteltrace.SpanContext{})
	_, werr := a.w.Write(b)
	return werr
}
