package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/experiments"
)

// genkitRunEvaluator is POST /api/runAction for an evaluator, /evaluator/<name>: Genkit's eval
// tools (genkit eval:run, eval:flow) send an EvalRequest {dataset, evalRunId, options} and read
// one EvalResponse per datapoint. The evaluation runs at once, in an evaluator span whose trace
// is answered in X-Genkit-Trace-Id and telemetry.traceId, and its scores are recorded as the
// evalRunId's experiment (internal/experiments' genkit.go). A mistake in the request is answered
// before anything runs, with 400 (404 for an unknown evaluator) and Genkit's Status; with
// stream=true the answer is the same single line, an evaluator having no chunks.
func (s *Server) genkitRunEvaluator(c echo.Context, req genkitRunRequest) error {
	name := strings.TrimPrefix(req.Key, "/"+string(engine.ActionTypeEvaluator)+"/")
	er, err := experiments.DecodeGenkitEvalRequest(req.Input)
	if err != nil {
		return c.JSON(http.StatusBadRequest, genkitStatusBody(engine.StatusInvalidArgument, err.Error(), nil))
	}
	spec, err := s.deps.Experiments.GenkitEvaluator(name, er)
	switch {
	case errors.Is(err, experiments.ErrNoEvaluator):
		return c.JSON(http.StatusNotFound, genkitStatusBody(engine.StatusNotFound, err.Error(), nil))
	case err != nil:
		return c.JSON(http.StatusBadRequest, genkitStatusBody(engine.StatusInvalidArgument, err.Error(), nil))
	}
	w := c.Response()
	var traceID string
	ctx := engine.WithRootSpan(c.Request().Context(), req.TelemetryLabels, func(sc oteltrace.SpanContext) {
		if sc.IsValid() {
			traceID = sc.TraceID().String()
			w.Header().Set("X-Genkit-Trace-Id", traceID)
			w.Header().Set("X-Genkit-Span-Id", sc.SpanID().String())
		}
	})
	out, err := s.deps.Runs.Registry().RunEvaluatorSpan(ctx, name, req.Input, func(ctx context.Context) (json.RawMessage, error) {
		res, err := s.deps.Experiments.GenkitEvaluate(ctx, spec, er)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	})
	w.Header().Set("X-Genkit-Version", "loupe/"+s.cfg.Version)
	if errors.Is(err, experiments.ErrInvalid) {
		details := map[string]any{}
		if traceID != "" {
			details["traceId"] = traceID
		}
		return c.JSON(http.StatusBadRequest, genkitStatusBody(engine.StatusInvalidArgument, err.Error(), details))
	}
	if err != nil {
		return genkitAnswer(c, map[string]any{"error": s.genkitRunError(ctx, err, traceID)})
	}
	telemetry := map[string]any{}
	if traceID != "" {
		telemetry["traceId"] = traceID
	}
	return genkitAnswer(c, map[string]any{"result": out, "telemetry": telemetry})
}

// genkitAnswer writes runAction's last line with 200 and no newline after it: the runtime manager
// reads what follows the last newline of a stream as the final object.
func genkitAnswer(c echo.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}
