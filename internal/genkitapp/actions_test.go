package genkitapp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
)

// The files in testdata/go-* and genkit-go-1.4.0-actions.json were captured from the Genkit Go
// v1.4.0 app of compat/genkit-go (its stack traces trimmed).

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// TestRunActionReadsGenkitGoAnswers reads POST /api/runAction?stream=true as Genkit Go 1.4.0
// answers it: chunks and the outcome framed as Genkit JS frames them, an error outcome written
// as `{"error": {…} }` whose code is an HTTP status (400) where Genkit JS writes a gRPC one (3),
// and a request it cannot read answered with the bare error under that HTTP status. Each becomes
// the run's error status as Genkit names it.
func TestRunActionReadsGenkitGoAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req RunRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		switch req.Key {
		case "/flow/countdown":
			_, _ = w.Write(testdata(t, "go-stream-ok.txt"))
		case "/tool.v2/getWeather":
			_, _ = w.Write(testdata(t, "go-stream-error.txt"))
		case "/js/fails":
			_, _ = io.WriteString(w, `{"error":{"code":3,"message":"bad input","details":{"stack":"…"}}}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(testdata(t, "go-bad-request.txt"))
		}
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}

	var chunks []string
	res, err := c.RunAction(context.Background(), RunRequest{Key: "/flow/countdown"}, func(ch json.RawMessage) error {
		chunks = append(chunks, string(ch))
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":3}`, `{"n":2}`, `{"n":1}`}, chunks)
	require.JSONEq(t, `"liftoff"`, string(res.Result))
	require.Equal(t, "f2cc3dcb5d9f4780ed1596f09fbedd89", res.TraceID)

	_, err = c.RunAction(context.Background(), RunRequest{Key: "/tool.v2/getWeather"}, nil)
	var ae *ActionError
	require.True(t, errors.As(err, &ae))
	require.Equal(t, 400, ae.Code)
	require.Contains(t, ae.Message, "city is required")
	require.Equal(t, engine.StatusInvalidArgument, engine.StatusOf(err), "Go's HTTP 400 is INVALID_ARGUMENT")

	_, err = c.RunAction(context.Background(), RunRequest{Key: "/js/fails"}, nil)
	require.Equal(t, engine.StatusInvalidArgument, engine.StatusOf(err), "JS's gRPC 3 is INVALID_ARGUMENT")

	_, err = c.RunAction(context.Background(), RunRequest{Key: "/flow/unreadable"}, nil)
	require.True(t, errors.As(err, &ae))
	require.Equal(t, "run /flow/unreadable: unexpected EOF", ae.Message, "the message of Go's bare error body, not the JSON")
	require.Equal(t, engine.StatusInvalidArgument, engine.StatusOf(err))
}

// TestStatusOfCodeReadsGRPCAndHTTPCodes maps both numberings of Genkit's error codes.
func TestStatusOfCodeReadsGRPCAndHTTPCodes(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]engine.Status{
		1: engine.StatusCancelled, 3: engine.StatusInvalidArgument, 5: engine.StatusNotFound, 9: engine.StatusFailedPrecondition,
		13: engine.StatusInternal, 14: engine.StatusUnavailable, 99: engine.StatusUnknown,
		400: engine.StatusInvalidArgument, 404: engine.StatusNotFound, 409: engine.StatusAborted, 499: engine.StatusCancelled,
		500: engine.StatusInternal, 503: engine.StatusUnavailable, 504: engine.StatusDeadlineExceeded, 418: engine.StatusUnknown,
	} {
		require.Equal(t, want, statusOfCode(code), "code %d", code)
	}
	require.Equal(t, engine.StatusUnknown, engine.StatusOf(&ActionError{Code: 0, Message: "x"}), "an error is never OK")
}

// TestGenkitGoActionsReadAsGenkitJSs reads the action list of a Genkit Go 1.4.0 app: each prompt,
// which Go registers only as /executable-prompt/<name>, also gets a /prompt/<name> that renders
// and generates (so it is resumable); a tool, listed only as /tool.v2/<name> whose output schema
// is {output, content}, is answered by reviewers against its own output schema (the metadata's
// originalOutputSchema); and the app's only model is its default model, which Go does not serve.
func TestGenkitGoActionsReadAsGenkitJSs(t *testing.T) {
	t.Parallel()
	var actions map[string]*RemoteAction
	require.NoError(t, json.Unmarshal(testdata(t, "genkit-go-1.4.0-actions.json"), &actions))
	require.Nil(t, actions["/prompt/transferPrompt"])
	require.Nil(t, actions["/tool/approveTransfer"])
	normalizeActions(actions)

	p := actions["/prompt/transferPrompt"]
	require.NotNil(t, p)
	require.Equal(t, "transferPrompt", p.Name)
	require.Equal(t, "Transfers money after a person approves it", p.Description)
	require.JSONEq(t, string(actions["/executable-prompt/transferPrompt"].InputSchema), string(p.InputSchema))

	c := &conn{name: "gk", actions: actions, defaultModel: soleModel(actions), goApp: true}
	require.Equal(t, "scripted", c.defaultModel)
	var prompt *proxy
	for _, px := range c.proxies() {
		if px.desc.Key == "gk:/prompt/transferPrompt" {
			prompt = px
		}
	}
	require.NotNil(t, prompt, "the Go prompt is in the catalogue as a prompt")
	require.Equal(t, engine.ActionType("prompt"), prompt.desc.Type)
	require.Contains(t, prompt.desc.Metadata["loupe:runs"], "resumable")

	schemas := c.toolSchemas([]string{"approveTransfer"})
	require.JSONEq(t, `{"additionalProperties":false,"properties":{"approved":{"type":"boolean"},"note":{"type":"string"}},"required":["approved"],"type":"object"}`,
		string(schemas["approveTransfer"].Output))

	actions["/model/other"] = &RemoteAction{Key: "/model/other"}
	require.Equal(t, "", soleModel(actions), "with two models, none is the default")
}

// TestGoPromptRendersThenGenerates runs a Go prompt's /prompt/<name>: the app renders it with
// /executable-prompt/<name> and generates with the rendering through /util/generate.
func TestGoPromptRendersThenGenerates(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []RunRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/__health" {
			return // the runtime is the one asked about
		}
		var req RunRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		mu.Lock()
		calls = append(calls, req)
		mu.Unlock()
		switch req.Key {
		case "/executable-prompt/transferPrompt":
			_, _ = io.WriteString(w, `{"result":`+strings.TrimSpace(string(testdata(t, "go-rendered-prompt.json")))+`,"telemetry":{"traceId":"t1"}}`)
		case "/util/generate":
			_, _ = io.WriteString(w, `{"result":{"finishReason":"stop","message":{"role":"model","content":[{"text":"ok"}]}},"telemetry":{"traceId":"t2"}}`)
		}
	}))
	defer srv.Close()
	var actions map[string]*RemoteAction
	require.NoError(t, json.Unmarshal(testdata(t, "genkit-go-1.4.0-actions.json"), &actions))
	normalizeActions(actions)
	c := &conn{name: "gk", client: &Client{BaseURL: srv.URL}, runtime: &Runtime{ID: "gk-1", GenkitVersion: "go/1.4.0"}, actions: actions, goApp: true}
	var prompt *proxy
	for _, px := range c.proxies() {
		if px.desc.Key == "gk:/prompt/transferPrompt" {
			prompt = px
		}
	}
	require.NotNil(t, prompt)
	out, err := prompt.RunJSON(context.Background(), json.RawMessage(`{"to":"Bob","amount":50}`), nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"finishReason":"stop","message":{"role":"model","content":[{"text":"ok"}]}}`, string(out))
	require.Len(t, calls, 2)
	require.Equal(t, "/executable-prompt/transferPrompt", calls[0].Key)
	require.JSONEq(t, `{"to":"Bob","amount":50}`, string(calls[0].Input))
	require.Equal(t, "/util/generate", calls[1].Key)
	require.JSONEq(t, string(testdata(t, "go-rendered-prompt.json")), string(calls[1].Input))
}

// TestGoDenialIsGivenAsPendingOutput denies an interrupted call of a Genkit Go app: the denial
// goes on the call in the history as metadata.pendingOutput, which Genkit Go takes as the tool's
// answer unchecked (a resume.respond output must fit the tool's output schema there); the other
// calls and the stored history are left as they were.
func TestGoDenialIsGivenAsPendingOutput(t *testing.T) {
	t.Parallel()
	denial := map[string]any{"denied": true, "reason": "not today"}
	interrupted := &engine.Message{Role: engine.RoleModel, Content: []*engine.Part{
		{Kind: engine.PartToolRequest, ToolRequest: &engine.ToolRequest{Name: "approveTransfer", Ref: "r1"}, Metadata: map[string]any{"interrupt": map[string]any{"message": "Send 5?"}}},
		{Kind: engine.PartToolRequest, ToolRequest: &engine.ToolRequest{Name: "transferMoney", Ref: "r2"}, Metadata: map[string]any{"interrupt": true}},
	}}
	history := []*engine.Message{{Role: engine.RoleUser, Content: []*engine.Part{{Kind: engine.PartText, Text: "send 5"}}}, interrupted}
	respond := []*engine.Part{engine.DenyPart("approveTransfer", "r1", denial), engine.RespondPart("transferMoney", "r2", map[string]any{"done": true})}

	got := pendingDenials(history, respond)
	require.Len(t, got, 2)
	require.Same(t, history[0], got[0])
	require.Equal(t, denial, got[1].Content[0].Metadata["pendingOutput"])
	require.Equal(t, map[string]any{"message": "Send 5?"}, got[1].Content[0].Metadata["interrupt"])
	require.NotContains(t, got[1].Content[1].Metadata, "pendingOutput", "an answered call is answered through resume.respond")
	require.NotContains(t, interrupted.Content[0].Metadata, "pendingOutput", "the stored history is not changed")
	plain := pendingDenials(history, respond[1:])
	require.Same(t, interrupted, plain[len(plain)-1], "without a denial the history goes as it is")
}

// TestGoRuntimeWithItsOwnIDIsHealthy checks a Genkit Go app started with GENKIT_RUNTIME_ID: its
// runtime file has that id, but its health check answers 200 only for <pid>-<port> (as Genkit Go
// 1.4.0 does). It is live; another runtime at the same URL (the port reused) is not, nor is a
// Genkit JS runtime whose id is refused.
func TestGoRuntimeWithItsOwnIDIsHealthy(t *testing.T) {
	t.Parallel()
	var port string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.URL.Query().Get("id"); id != "" && id != "42-"+port {
			http.Error(w, "Invalid runtime ID", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	port = srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	c := &Client{BaseURL: srv.URL}
	ctx := context.Background()
	require.NoError(t, health(ctx, c, &Runtime{ID: "42-" + port, PID: 42, ReflectionServerURL: srv.URL, GenkitVersion: "go/1.4.0"}))
	require.NoError(t, health(ctx, c, &Runtime{ID: "myapp", PID: 42, ReflectionServerURL: srv.URL, GenkitVersion: "go/1.4.0"}))
	require.Error(t, health(ctx, c, &Runtime{ID: "myapp", PID: 43, ReflectionServerURL: srv.URL, GenkitVersion: "go/1.4.0"}))
	require.Error(t, health(ctx, c, &Runtime{ID: "myapp", PID: 42, ReflectionServerURL: srv.URL, GenkitVersion: "1.42.0"}))
}

// TestAppActionsGetTheCallersContext: an app's action run under an action context (a run's, or
// runAction's) sends it to the app as Genkit's own runAction context, on each call it makes (a
// prompt's render and its generate).
func TestAppActionsGetTheCallersContext(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []RunRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/__health" {
			return
		}
		var req RunRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		mu.Lock()
		calls = append(calls, req)
		mu.Unlock()
		switch req.Key {
		case "/executable-prompt/transferPrompt":
			_, _ = io.WriteString(w, `{"result":`+strings.TrimSpace(string(testdata(t, "go-rendered-prompt.json")))+`,"telemetry":{"traceId":"t1"}}`)
		case "/util/generate":
			_, _ = io.WriteString(w, `{"result":{"finishReason":"stop","message":{"role":"model","content":[{"text":"ok"}]}},"telemetry":{"traceId":"t2"}}`)
		}
	}))
	defer srv.Close()
	var actions map[string]*RemoteAction
	require.NoError(t, json.Unmarshal(testdata(t, "genkit-go-1.4.0-actions.json"), &actions))
	normalizeActions(actions)
	c := &conn{name: "gk", client: &Client{BaseURL: srv.URL}, runtime: &Runtime{ID: "gk-1", GenkitVersion: "go/1.4.0"}, actions: actions, goApp: true}
	var prompt *proxy
	for _, px := range c.proxies() {
		if px.desc.Key == "gk:/prompt/transferPrompt" {
			prompt = px
		}
	}
	require.NotNil(t, prompt)
	ctx := engine.WithActionContext(context.Background(), map[string]any{"auth": map[string]any{"uid": "ann"}})
	_, err := prompt.RunJSON(ctx, json.RawMessage(`{"to":"Bob","amount":50}`), nil)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	for _, call := range calls {
		require.Equal(t, map[string]any{"auth": map[string]any{"uid": "ann"}}, call.Context, call.Key)
	}
	calls = nil
	_, err = prompt.RunJSON(context.Background(), json.RawMessage(`{"to":"Bob","amount":50}`), nil)
	require.NoError(t, err)
	require.Nil(t, calls[0].Context, "no context, none sent")
}
