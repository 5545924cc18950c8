package devui_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// chatCompletions is an OpenAI-compatible endpoint on loopback that plays a travel agent: asked
// without a tool result, it calls bookFlight for Lisbon; given the result, it answers. It speaks the
// chat completions protocol as the real service does, streamed (server-sent events) or not.
func chatCompletions(t *testing.T) (*httptest.Server, func() int) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
			return
		}
		var body struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
			Stream bool `json:"stream"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls++
		mu.Unlock()
		answered := body.Messages[len(body.Messages)-1].Role == "tool"
		if !body.Stream {
			w.Header().Set("Content-Type", "application/json")
			if answered {
				fmt.Fprint(w, `{"id":"c2","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Booked: Lisbon."},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":4,"total_tokens":44}}`)
				return
			}
			fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bookFlight","arguments":"{\"city\":\"Lisbon\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(s string) { fmt.Fprintf(w, "data: %s\n\n", s) }
		if answered {
			chunk(`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Booked: "}}]}`)
			chunk(`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Lisbon."},"finish_reason":"stop"}]}`)
			chunk(`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":4,"total_tokens":44}}`)
		} else {
			chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bookFlight","arguments":"{\"city\":"}}]}}]}`)
			chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Lisbon\"}"}}]},"finish_reason":"tool_calls"}]}`)
			chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}}`)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return calls }
}

// TestQuickstartModuleRunsItsOwnAgentDurably builds examples/quickstart, a module outside this
// repository's path that can only use Loupe's public API, and uses it as its README says: it
// serves the UI and executes its own flow on the test database, its model an OpenAI-compatible
// endpoint on loopback. The flow's booking tool interrupts, the interrupt is in the inbox's API,
// a reviewer approves it, and the run succeeds with the model's answer.
func TestQuickstartModuleRunsItsOwnAgentDurably(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "examples", "quickstart")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the quickstart module: %s", out)

	model, modelCalls := chatCompletions(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", "--dev", "--addr", addr, "--data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "DATABASE_URL="+storetest.NewURL(t), "OPENAI_BASE_URL="+model.URL+"/v1", "OPENAI_API_KEY=sk-test")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("quickstart's log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "the quickstart server never became ready")

	var run struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Output json.RawMessage
	}
	status := apiJSON(t, http.MethodPost, base+"/api/v1/runs", `{"action":"/flow/trip","input":"Lisbon"}`, &run)
	require.Equal(t, http.StatusCreated, status)

	var list struct {
		Interrupts []struct {
			ID       string          `json:"id"`
			RunID    string          `json:"run_id"`
			Tool     string          `json:"tool"`
			Input    json.RawMessage `json:"input"`
			Metadata json.RawMessage `json:"metadata"`
			Version  int64           `json:"version"`
		} `json:"interrupts"`
	}
	require.Eventually(t, func() bool {
		apiJSON(t, http.MethodGet, base+"/api/v1/interrupts?status=pending", "", &list)
		return len(list.Interrupts) == 1
	}, 60*time.Second, 50*time.Millisecond, "the booking never reached the inbox")
	it := list.Interrupts[0]
	require.Equal(t, run.ID, it.RunID)
	require.Equal(t, "bookFlight", it.Tool)
	require.JSONEq(t, `{"city":"Lisbon"}`, string(it.Input))
	require.Contains(t, string(it.Metadata), "Book a flight to Lisbon?")

	status = apiJSON(t, http.MethodPost, base+"/api/v1/interrupts/"+it.ID+"/resolve",
		fmt.Sprintf(`{"action":"approve","comment":"ok","version":%d}`, it.Version), nil)
	require.Equal(t, http.StatusOK, status)
	require.Eventually(t, func() bool {
		apiJSON(t, http.MethodGet, base+"/api/v1/runs/"+run.ID, "", &run)
		return run.Status == "succeeded"
	}, 60*time.Second, 50*time.Millisecond, "the run never succeeded")
	require.JSONEq(t, `"Booked: Lisbon."`, string(run.Output))
	require.Equal(t, 2, modelCalls(), "one model call per turn, none repeated")
}

func apiJSON(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode
}
