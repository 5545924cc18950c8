package genkitapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/loupe-dev/loupe/internal/engine"
)

// Genkit JS and Genkit Go describe the same things with different action lists. These read
// either as one.

// metaRendersWith is the metadata field of a prompt action Loupe added for a Genkit Go prompt,
// naming the app's action that renders it.
const metaRendersWith = "loupe:rendersWith"

// normalizeActions completes an app's action list where Genkit Go's differs from Genkit JS's, in
// place. Genkit Go 1.4.0 registers a prompt only as /executable-prompt/<name> (which renders it):
// a /prompt/<name> is added, which Loupe runs by rendering the prompt and generating with it, as
// for a Genkit JS prompt, so that a Go prompt's run is resumable too.
func normalizeActions(actions map[string]*RemoteAction) {
	for k, a := range actions {
		if !strings.HasPrefix(k, executablePrefix) {
			continue
		}
		name := strings.TrimPrefix(k, executablePrefix)
		if _, ok := actions[promptPrefix+name]; ok {
			continue
		}
		md := map[string]any{}
		for mk, mv := range a.Metadata {
			md[mk] = mv
		}
		md["type"] = "prompt"
		md[metaRendersWith] = k
		desc := a.Description
		if p, ok := a.Metadata["prompt"].(map[string]any); ok && desc == "" {
			desc, _ = p["description"].(string)
		}
		actions[promptPrefix+name] = &RemoteAction{Key: promptPrefix + name, Name: a.Name, Description: desc,
			InputSchema: a.InputSchema, Metadata: md}
	}
}

// toolOutputSchema is the schema of what a tool returns, as a reviewer answers it: a /tool.v2/
// action (Genkit Go 1.4.0 lists its tools only so) returns {output, content}, and keeps the tool's
// own output schema in its metadata's originalOutputSchema.
func toolOutputSchema(a *RemoteAction) json.RawMessage {
	if orig, ok := a.Metadata["originalOutputSchema"]; ok && orig != nil {
		if raw, err := json.Marshal(orig); err == nil {
			return raw
		}
	}
	return a.OutputSchema
}

// soleModel is the name of the app's only model, "" when it has none or several. Genkit Go has no
// GET /api/values, so an app's default model is unknown; a flow's interrupted response that names
// no model is resumed with the app's only model, the one it can have used.
func soleModel(actions map[string]*RemoteAction) string {
	name := ""
	for k := range actions {
		if !strings.HasPrefix(k, "/model/") {
			continue
		}
		if name != "" {
			return ""
		}
		name = strings.TrimPrefix(k, "/model/")
	}
	return name
}

// statusOfCode reads the code of a Genkit error: Genkit JS sends a gRPC status number (3
// INVALID_ARGUMENT), Genkit Go 1.4.0 the HTTP status its status name maps to (400), except for a
// cancelled run (1).
func statusOfCode(code int) engine.Status {
	if code >= 100 {
		switch code {
		case 400:
			return engine.StatusInvalidArgument
		case 401, 403:
			return engine.StatusPermissionDenied
		case 404:
			return engine.StatusNotFound
		case 409:
			return engine.StatusAborted
		case 429:
			return engine.StatusResourceExhausted
		case 499:
			return engine.StatusCancelled
		case 501:
			return engine.StatusUnimplemented
		case 503:
			return engine.StatusUnavailable
		case 504:
			return engine.StatusDeadlineExceeded
		case 500:
			return engine.StatusInternal
		}
		return engine.StatusUnknown
	}
	grpc := []engine.Status{engine.StatusOK, engine.StatusCancelled, engine.StatusUnknown, engine.StatusInvalidArgument,
		engine.StatusDeadlineExceeded, engine.StatusNotFound, engine.StatusAlreadyExists, engine.StatusPermissionDenied,
		engine.StatusResourceExhausted, engine.StatusFailedPrecondition, engine.StatusAborted, engine.StatusInvalidArgument, // 11 OUT_OF_RANGE
		engine.StatusUnimplemented, engine.StatusInternal, engine.StatusUnavailable, engine.StatusInternal, // 15 DATA_LOSS
		engine.StatusPermissionDenied} // 16 UNAUTHENTICATED
	if code >= 0 && code < len(grpc) {
		return grpc[code]
	}
	return engine.StatusUnknown
}

// health checks that the runtime is the app answering at its URL. Genkit Go 1.4.0 compares the
// id it is asked about with <pid>-<port>, not with the runtime file's id, which GENKIT_RUNTIME_ID
// sets: such an app, asked about its own id, answers 503, and is asked about <pid>-<port> too.
func health(ctx context.Context, c *Client, rt *Runtime) error {
	err := c.Health(ctx, rt.ID)
	if err == nil || !strings.HasPrefix(rt.GenkitVersion, "go/") {
		return err
	}
	u, perr := url.Parse(rt.ReflectionServerURL)
	if perr != nil || u.Port() == "" {
		return err
	}
	if goID := fmt.Sprintf("%d-%s", rt.PID, u.Port()); goID != rt.ID && c.Health(ctx, goID) == nil {
		return nil
	}
	return err
}
