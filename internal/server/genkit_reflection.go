package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
)

// genkitActions is Genkit's reflection API GET /api/actions: every action by key.
func (s *Server) genkitActions(c echo.Context) error {
	out := map[string]any{}
	for _, d := range s.deps.Runs.Registry().List() {
		out[d.Key] = d
	}
	return c.JSON(http.StatusOK, out)
}

// genkitRunAction is Genkit's reflection API POST /api/runAction: it runs an action at once, not
// as a durable run. With ?stream=true it answers NDJSON: one line per chunk, then the result.
func (s *Server) genkitRunAction(c echo.Context) error {
	var req struct {
		Key     string          `json:"key"`
		Input   json.RawMessage `json:"input"`
		Context json.RawMessage `json:"context,omitempty"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	reg := s.deps.Runs.Registry()
	if reg.Lookup(req.Key) == nil {
		return Errorf(http.StatusNotFound, "not_found", "action %q is not registered", req.Key)
	}
	ctx := c.Request().Context()
	telemetry := func() map[string]any {
		if sc := oteltrace.SpanContextFromContext(ctx); sc.HasTraceID() {
			return map[string]any{"traceId": sc.TraceID().String()}
		}
		return map[string]any{}
	}
	if c.QueryParam("stream") != "true" {
		out, err := reg.Run(ctx, req.Key, req.Input, nil)
		if err != nil {
			return genkitError(c, err)
		}
		return c.JSON(http.StatusOK, map[string]any{"result": out, "telemetry": telemetry()})
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	out, err := reg.Run(ctx, req.Key, req.Input, func(_ context.Context, chunk json.RawMessage) error {
		if err := enc.Encode(chunk); err != nil {
			return err
		}
		w.Flush()
		return nil
	})
	if err != nil {
		return enc.Encode(map[string]any{"error": genkitStatus(err)})
	}
	return enc.Encode(map[string]any{"result": out, "telemetry": telemetry()})
}

// genkitStatus is Genkit's error shape: a status name, a message and details.
func genkitStatus(err error) map[string]any {
	return map[string]any{"status": string(engine.StatusOf(err)), "message": err.Error(), "details": map[string]any{}}
}

func genkitError(c echo.Context, err error) error {
	var ie *engine.InterruptError
	if errors.As(err, &ie) {
		// A tool run on its own has no generate loop to pause and nobody to ask: the call stops
		// at its interrupt, which is the caller's to handle, not a server failure.
		return c.JSON(http.StatusConflict, map[string]any{"error": map[string]any{"status": string(engine.StatusFailedPrecondition),
			"message": "the tool interrupted to ask a person; run it from a flow to resolve the interrupt in the inbox",
			"details": map[string]any{"interrupt": ie.Metadata}}})
	}
	status := http.StatusInternalServerError
	switch engine.StatusOf(err) {
	case engine.StatusInvalidArgument, engine.StatusFailedPrecondition:
		status = http.StatusBadRequest
	case engine.StatusNotFound:
		status = http.StatusNotFound
	case engine.StatusAborted:
		status = http.StatusConflict
	case engine.StatusCancelled:
		status = 499
	}
	return c.JSON(status, map[string]any{"error": genkitStatus(err)})
}
