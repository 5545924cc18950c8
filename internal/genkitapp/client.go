// Package genkitapp makes Loupe the Dev UI of running Genkit apps (JS or Go). It discovers their
// reflection servers through the runtime files Genkit writes under a project's .genkit/runtimes/,
// announces each live app as a program of the action catalogue whose actions are the app's, and
// executes the runs of those actions in this process through proxies that call the app's
// POST /api/runAction: so a Genkit action's run is a durable Loupe run, with its status, chunks,
// trace and, for generate responses that end interrupted, its interrupts in the inbox, resumed
// through the app's own /util/generate.
package genkitapp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
)

// Client speaks Genkit's reflection API (the one genkit-tools' runtime manager uses) to one app.
type Client struct {
	// BaseURL is the app's reflectionServerUrl, such as http://localhost:3100.
	BaseURL string
	HTTP    *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// RemoteAction is one entry of GET /api/actions.
type RemoteAction struct {
	Key          string          `json:"key"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Metadata     map[string]any  `json:"metadata,omitempty"`
}

// Health asks GET /api/__health?id=: the app answers 200 while it runs, 503 when id is another
// runtime's (the port was reused).
func (c *Client) Health(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	u := c.BaseURL + "/api/__health"
	if id != "" {
		u += "?id=" + url.QueryEscape(id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check: %s", resp.Status)
	}
	return nil
}

// Actions lists the app's actions, by key.
func (c *Client) Actions(ctx context.Context) (map[string]*RemoteAction, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/api/actions", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list actions: %s: %s", resp.Status, firstLine(body))
	}
	if e := errorBody(body); e != nil {
		return nil, fmt.Errorf("list actions: %w", e)
	}
	var out map[string]*RemoteAction
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}

// Notify tells the app where the telemetry server is (POST /api/notify), as the genkit CLI does;
// an app started with GENKIT_TELEMETRY_SERVER keeps its own.
func (c *Client) Notify(ctx context.Context, telemetryServerURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"telemetryServerUrl": telemetryServerURL, "reflectionApiSpecVersion": 1})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/api/notify", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("notify: %s", resp.Status)
	}
	return nil
}

// RunRequest is the body of POST /api/runAction.
type RunRequest struct {
	Key             string            `json:"key"`
	Input           json.RawMessage   `json:"input,omitempty"`
	Context         map[string]any    `json:"context,omitempty"`
	TelemetryLabels map[string]string `json:"telemetryLabels,omitempty"`
	// OnTraceID, when set, gets the run's trace id as soon as the app's response headers name it
	// (X-Genkit-Trace-Id), before the run ends.
	OnTraceID func(traceID string) `json:"-"`
}

// RunResult is what a run of an action returned.
type RunResult struct {
	Result json.RawMessage
	// TraceID is the trace the app recorded the run in (telemetry.traceId, or the
	// X-Genkit-Trace-Id header when the run failed).
	TraceID string
}

// ActionError is an error a Genkit action returned: {code, message, details}, code being a gRPC
// status number (13 INTERNAL, 3 INVALID_ARGUMENT, …).
type ActionError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// TraceID is the failed run's trace, when the app reported it.
	TraceID string `json:"-"`
}

func (e *ActionError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("genkit action failed with code %d", e.Code)
	}
	return e.Message
}

// Unwrap gives the error's status to engine.StatusOf, which the run's stored error carries: the
// code read as Genkit JS (gRPC) or Genkit Go (HTTP) writes it.
func (e *ActionError) Unwrap() error {
	st := statusOfCode(e.Code)
	if st == engine.StatusOK {
		st = engine.StatusUnknown
	}
	return &engine.Error{Status: st, Message: e.Message}
}

// RunAction runs an action with POST /api/runAction?stream=true. Genkit writes each chunk as a
// JSON line ending in a newline and the outcome last, without one: {result, telemetry} or
// {error}. onChunk, when set, gets each chunk as it arrives.
func (c *Client) RunAction(ctx context.Context, r RunRequest, onChunk func(json.RawMessage) error) (*RunResult, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.Key, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/api/runAction?stream=true", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.Key, unreachable(err))
	}
	defer resp.Body.Close()
	traceID := resp.Header.Get("X-Genkit-Trace-Id")
	if traceID != "" && r.OnTraceID != nil {
		r.OnTraceID(traceID)
	}
	if traceID != "" {
		// A run cancelled here is cancelled in the app too: closing the connection does not stop
		// the action there.
		finished := make(chan struct{})
		defer close(finished)
		go func() {
			select {
			case <-finished:
			case <-ctx.Done():
			}
			// Cancelled, whether or not the read has ended meanwhile.
			if ctx.Err() != nil {
				c.cancel(traceID)
			}
		}()
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		code := 13
		if resp.StatusCode == http.StatusNotFound {
			code = 5
		}
		// Genkit Go answers a request it cannot read with the error itself, {code, message},
		// under the code as HTTP status.
		var re ActionError
		if json.Unmarshal(msg, &re) == nil && re.Message != "" {
			return nil, &ActionError{Code: resp.StatusCode, Message: fmt.Sprintf("run %s: %s", r.Key, re.Message), Details: re.Details, TraceID: traceID}
		}
		return nil, &ActionError{Code: code, Message: fmt.Sprintf("run %s: %s: %s", r.Key, resp.Status, firstLine(msg)), TraceID: traceID}
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var last, held []byte
	for {
		line, err := br.ReadBytes('\n')
		if err == nil {
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			// Genkit Go ends a cancelled run with its outcome and a newline: a line that reads as
			// an outcome waits for the next before it counts as a chunk.
			if held != nil && onChunk != nil {
				if cerr := onChunk(json.RawMessage(held)); cerr != nil {
					return nil, cerr
				}
			}
			held = nil
			if isOutcome(line) {
				held = line
				continue
			}
			if onChunk != nil {
				if cerr := onChunk(json.RawMessage(line)); cerr != nil {
					return nil, cerr
				}
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("run %s: read the response: %w", r.Key, err)
		}
		last = bytes.TrimSpace(line)
		if len(last) == 0 {
			last = held
		} else if held != nil && onChunk != nil {
			if cerr := onChunk(json.RawMessage(held)); cerr != nil {
				return nil, cerr
			}
		}
		break
	}
	if len(last) == 0 {
		return nil, &ActionError{Code: 13, Message: fmt.Sprintf("run %s: the app ended the response without an outcome", r.Key), TraceID: traceID}
	}
	var out struct {
		Result    json.RawMessage `json:"result"`
		Error     *ActionError    `json:"error"`
		Telemetry struct {
			TraceID string `json:"traceId"`
		} `json:"telemetry"`
	}
	if err := json.Unmarshal(last, &out); err != nil {
		return nil, fmt.Errorf("run %s: decode the outcome: %w", r.Key, err)
	}
	if out.Error != nil {
		out.Error.TraceID = traceID
		if id, ok := out.Error.Details["traceId"].(string); ok && id != "" {
			out.Error.TraceID = id
		}
		return nil, out.Error
	}
	if out.Telemetry.TraceID != "" {
		traceID = out.Telemetry.TraceID
	}
	if len(out.Result) == 0 {
		out.Result = json.RawMessage("null")
	}
	return &RunResult{Result: out.Result, TraceID: traceID}, nil
}

// cancel asks the app to cancel the run whose trace is traceID (POST /api/cancelAction).
func (c *Client) cancel(traceID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"traceId": traceID})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/api/cancelAction", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http().Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}

// unreachable marks the error of a request that never reached the app (no connection could be
// made: the app has exited, or is starting again) with runs.ErrUnreachable, so that its run
// waits for the app instead of failing. A request that reached the app is not marked: the app
// may have acted on it.
func unreachable(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w: %w", runs.ErrUnreachable, err)
	}
	return err
}

// isOutcome says whether a line of a stream reads as its outcome: {"error": …}, or
// {"result": …, "telemetry": …}.
func isOutcome(line []byte) bool {
	var o map[string]json.RawMessage
	if json.Unmarshal(line, &o) != nil {
		return false
	}
	_, e := o["error"]
	_, r := o["result"]
	_, t := o["telemetry"]
	return len(o) == 1 && e || len(o) == 2 && r && t
}

// errorBody is the {error} a reflection server answers a failed request with (status 200).
func errorBody(body []byte) error {
	var e struct {
		Error *ActionError `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Message != "" {
		return e.Error
	}
	return nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
