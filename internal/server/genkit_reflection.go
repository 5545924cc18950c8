package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// Genkit's reflection API, as its runtimes serve it to the genkit CLI and the Dev UI server
// (js/core/src/reflection.ts, go/genkit/reflection.go; read by genkit-tools' RuntimeManager):
//
//   - POST /api/runAction[?stream=true] {key, input, context, telemetryLabels}: once the action's
//     root span starts, 200 with X-Genkit-Trace-Id and X-Genkit-Span-Id, flushed before any
//     chunk; with stream=true each chunk is a JSON line ending in "\n", and the last line, with
//     no newline after it, is {"result","telemetry":{"traceId"}} or {"error":{code,message,
//     details}}. Without stream, the body is that last line alone. The manager parses whatever
//     follows the last "\n" as the final object, which is why the last line must not end in one.
//   - POST /api/cancelAction {traceId}: cancels an action still running on this process.
//   - POST /api/notify {telemetryServerUrl, reflectionApiSpecVersion}: the CLI announces its
//     telemetry server; Loupe stores its own traces, so it only answers OK.
//
// Errors use Genkit's Status: a numeric gRPC code, a message and details (always an object: the
// manager reads details.stack). Runtime errors come back with 200, as Genkit's do.

// genkitReflectionAPISpecVersion is the version of the reflection API that Loupe speaks (Genkit's
// GENKIT_REFLECTION_API_SPEC_VERSION).
const genkitReflectionAPISpecVersion = 1

// genkitActions is Genkit's reflection API GET /api/actions: every action by key.
func (s *Server) genkitActions(c echo.Context) error {
	out := map[string]any{}
	for _, d := range s.deps.Runs.Registry().List() {
		out[d.Key] = d
	}
	// Flows run as durable runs, by whichever program announces them (devui start's program too);
	// a Genkit app's proxied actions ("app:/flow/x") are that app's to list.
	for _, d := range s.actions(c.Request().Context()) {
		if d.Type == engine.ActionTypeFlow && strings.HasPrefix(d.Key, "/") {
			out[d.Key] = d
		}
	}
	// Evaluators in Genkit's shapes (a program's own are registered with Loupe's case as input;
	// through this API they take Genkit's EvalRequest, as the built-ins do).
	if s.deps.Experiments != nil {
		for _, d := range s.deps.Experiments.GenkitEvaluators() {
			out[d.Key] = d
		}
	}
	return c.JSON(http.StatusOK, out)
}

// genkitNotify is POST /api/notify. Genkit's runtimes send their traces to the CLI's telemetry
// server from then on; Loupe's actions trace into Loupe, so it only acknowledges.
func (s *Server) genkitNotify(c echo.Context) error {
	var req struct {
		TelemetryServerURL       string `json:"telemetryServerUrl"`
		ReflectionAPISpecVersion int    `json:"reflectionApiSpecVersion"`
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return c.JSON(http.StatusBadRequest, genkitStatusBody(engine.StatusInvalidArgument, "invalid JSON body: "+err.Error(), nil))
		}
	}
	if req.ReflectionAPISpecVersion != 0 && req.ReflectionAPISpecVersion != genkitReflectionAPISpecVersion {
		s.log.Warn("the genkit CLI speaks another version of the reflection API",
			"cli_version", req.ReflectionAPISpecVersion, "loupe_version", genkitReflectionAPISpecVersion)
	}
	return c.String(http.StatusOK, "OK")
}

// genkitRunRequest is the body of POST /api/runAction. runtimeId is the Dev UI's choice of
// runtime, which it sends along; Loupe is the one runtime it names.
type genkitRunRequest struct {
	Key             string            `json:"key"`
	Input           json.RawMessage   `json:"input"`
	Context         json.RawMessage   `json:"context,omitempty"`
	TelemetryLabels map[string]string `json:"telemetryLabels,omitempty"`
	RuntimeID       string            `json:"runtimeId,omitempty"`
}

// genkitRunAction is Genkit's reflection API POST /api/runAction: it runs an action at once, not
// as a durable run, in Genkit's wire shapes (see the top of this file).
func (s *Server) genkitRunAction(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	var req genkitRunRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return c.JSON(http.StatusBadRequest, genkitStatusBody(engine.StatusInvalidArgument, "invalid JSON body: "+err.Error(), nil))
	}
	if err := unstorableJSON(store.CheckJSON("", body)); err != nil {
		return err
	}
	stream := c.QueryParam("stream") == "true"
	if strings.HasPrefix(req.Key, "/"+string(engine.ActionTypeEvaluator)+"/") && s.deps.Experiments != nil {
		return s.genkitRunEvaluator(c, req)
	}
	if strings.HasPrefix(req.Key, "/"+string(engine.ActionTypeFlow)+"/") {
		return s.genkitRunDurably(c, req, stream)
	}
	var actx map[string]any
	if t := bytes.TrimSpace(req.Context); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &actx); err != nil {
			return c.JSON(http.StatusBadRequest, genkitStatusBody(engine.StatusInvalidArgument, "context must be a JSON object", nil))
		}
	}
	reg := s.deps.Runs.Registry()
	if reg.Lookup(req.Key) == nil {
		return c.JSON(http.StatusNotFound, genkitStatusBody(engine.StatusNotFound, fmt.Sprintf("action %q not found", req.Key), nil))
	}
	ctx, out, done := s.startActionStream(c, stream, req.TelemetryLabels)
	defer done()
	if actx != nil {
		ctx = engine.WithActionContext(ctx, actx)
	}
	// A generate inside a flow that ends interrupted is seen here: a flow run this way is not
	// durable, so its interrupts cannot wait in the inbox, and its output is not its result. (A
	// generate, model or prompt run on its own answers its interrupted response: that is its
	// result, interrupts included, as in Genkit.)
	var interrupted *engine.ModelResponse
	ctx = engine.WithContextOptions(ctx, engine.WithHooks(&engine.Hooks{
		OnResponse: func(_ context.Context, resp *engine.ModelResponse) error {
			if resp.FinishReason == engine.FinishReasonInterrupted {
				interrupted = resp
			} else {
				interrupted = nil
			}
			return nil
		},
	}))

	var cb engine.StreamFunc
	if stream {
		var line bytes.Buffer
		cb = func(_ context.Context, chunk json.RawMessage) error {
			line.Reset()
			if err := json.Compact(&line, chunk); err != nil {
				return err
			}
			line.WriteByte('\n')
			return out.writeChunk(line.Bytes())
		}
	}
	result, err := reg.Run(ctx, req.Key, req.Input, cb)
	if err == nil && interrupted != nil && strings.HasPrefix(req.Key, "/flow/") {
		err = flowInterrupted(req.Key, interrupted)
	}
	return out.finish(ctx, result, err)
}

// genkitRunError is Genkit's Status for a failed action: CANCELLED with Genkit's message when
// cancelAction (or the caller) stopped it, otherwise the error's own status.
func (s *Server) genkitRunError(ctx context.Context, err error, traceID string) map[string]any {
	details := map[string]any{}
	if traceID != "" {
		details["traceId"] = traceID
	}
	var ie *engine.InterruptError
	var fi *flowInterruptError
	switch {
	case errors.As(err, &fi):
		details["interrupts"] = fi.interrupts
		return genkitStatusBody(engine.StatusFailedPrecondition, fi.Error(), details)
	case errors.As(err, &ie):
		// A tool run on its own has no generate loop to pause and nobody to ask: the call stops
		// at its interrupt, which is the caller's to handle.
		details["interrupt"] = ie.Metadata
		msg := "the tool interrupted to ask a person; run it from a flow to resolve the interrupt in the inbox"
		if q := interruptQuestion(ie.Metadata); q != "" {
			msg = "the tool interrupted to ask a person (" + q + "); run it from a flow to resolve the interrupt in the inbox"
		}
		return genkitStatusBody(engine.StatusFailedPrecondition, msg, details)
	case ctx.Err() != nil:
		return genkitStatus(engine.StatusCancelled, "Action was cancelled", details)
	}
	return genkitStatus(engine.StatusOf(err), err.Error(), details)
}

// flowInterruptError reports a flow whose generate ended interrupted.
type flowInterruptError struct {
	key        string
	interrupts []map[string]any
	questions  []string
}

func (e *flowInterruptError) Error() string {
	msg := fmt.Sprintf("%s stopped at an interrupt", e.key)
	if len(e.questions) > 0 {
		msg += ": " + strings.Join(e.questions, "; ")
	}
	return msg + ". An action run through the reflection API is not durable, so nobody can answer it: " +
		"start a durable run (devui run, POST /api/v1/runs, or the Actions page) to answer it in Loupe's inbox"
}

func flowInterrupted(key string, resp *engine.ModelResponse) error {
	e := &flowInterruptError{key: key, interrupts: []map[string]any{}}
	for _, p := range resp.Interrupts() {
		md := p.Metadata["interrupt"]
		e.interrupts = append(e.interrupts, map[string]any{
			"name": p.ToolRequest.Name, "ref": p.ToolRequest.Ref, "input": p.ToolRequest.Input, "interrupt": md,
		})
		q := p.ToolRequest.Name + " asks"
		if m, ok := md.(map[string]any); ok && interruptQuestion(m) != "" {
			q += " " + interruptQuestion(m)
		} else {
			q += " for a person"
		}
		e.questions = append(e.questions, q)
	}
	return e
}

// interruptQuestion is the interrupt metadata's message, the question the inbox asks.
func interruptQuestion(md map[string]any) string {
	if q, ok := md["message"].(string); ok {
		return fmt.Sprintf("%q", q)
	}
	return ""
}

// genkitCodes are gRPC's numeric status codes, which Genkit's Status carries.
var genkitCodes = map[engine.Status]int{
	engine.StatusOK: 0, engine.StatusCancelled: 1, engine.StatusUnknown: 2, engine.StatusInvalidArgument: 3,
	engine.StatusDeadlineExceeded: 4, engine.StatusNotFound: 5, engine.StatusAlreadyExists: 6,
	engine.StatusPermissionDenied: 7, engine.StatusResourceExhausted: 8, engine.StatusFailedPrecondition: 9,
	engine.StatusAborted: 10, engine.StatusUnimplemented: 12, engine.StatusInternal: 13, engine.StatusUnavailable: 14,
}

// genkitStatus is Genkit's Status: {code, message, details}, details never null.
func genkitStatus(st engine.Status, message string, details map[string]any) map[string]any {
	code, ok := genkitCodes[st]
	if !ok {
		code = genkitCodes[engine.StatusInternal]
	}
	if details == nil {
		details = map[string]any{}
	}
	return map[string]any{"code": code, "message": message, "details": details}
}

// genkitStatusBody is a Status whose message starts with its status name, as engine errors and
// Genkit's own GenkitError messages do ("NOT_FOUND: …").
func genkitStatusBody(st engine.Status, message string, details map[string]any) map[string]any {
	return genkitStatus(st, string(st)+": "+message, details)
}

// genkitCancelAction is POST /api/cancelAction {traceId}: it cancels an action that this process
// runs for /api/runAction, which then answers CANCELLED.
func (s *Server) genkitCancelAction(c echo.Context) error {
	var req struct {
		TraceID string `json:"traceId"`
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	if json.Unmarshal(body, &req) != nil || req.TraceID == "" {
		return c.JSON(http.StatusBadRequest, map[string]string{"error": "traceId is required"})
	}
	if !s.active.cancel(strings.ToLower(req.TraceID)) {
		return c.JSON(http.StatusNotFound, map[string]string{"message": "Action not found or already completed"})
	}
	return c.JSON(http.StatusOK, map[string]string{"message": "Action cancelled"})
}

// errActionCancelled is the cause of an action stopped by POST /api/cancelAction.
var errActionCancelled = errors.New("cancelled through the reflection API's cancelAction")

// activeActions are the actions that /api/runAction runs, by trace id, for cancelAction.
type activeActions struct {
	mu sync.Mutex
	m  map[string]context.CancelCauseFunc
}

func (a *activeActions) add(traceID string, cancel context.CancelCauseFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]context.CancelCauseFunc{}
	}
	a.m[traceID] = cancel
}

func (a *activeActions) remove(traceID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, traceID)
}

// cancel cancels the action of traceID and forgets it; false when none runs.
func (a *activeActions) cancel(traceID string) bool {
	a.mu.Lock()
	cancel, ok := a.m[traceID]
	delete(a.m, traceID)
	a.mu.Unlock()
	if ok {
		cancel(errActionCancelled)
	}
	return ok
}
