package genkitapp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunActionReadsGenkitsFraming reads streams as Genkit JS and Go write them: chunks are lines
// ending in a newline and the outcome comes last without one, or, from Genkit Go when a run is
// cancelled, with one; an error outcome keeps its code, message and trace id.
func TestRunActionReadsGenkitsFraming(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"/flow/ok":        "{\"n\":1}\n{\"n\":2}\n{\"result\":\"done\",\"telemetry\":{\"traceId\":\"t1\"}}",
		"/flow/goCancel":  "{\"n\":1}\n{\"error\":{\"code\":1,\"message\":\"Action was cancelled\",\"details\":{\"traceId\":\"t2\"}}}\n",
		"/flow/fails":     "{\"error\":{\"code\":3,\"message\":\"bad input\",\"details\":{\"stack\":\"…\"}}}",
		"/flow/chunkLike": "{\"result\":1,\"telemetry\":{}}\n{\"result\":\"done\",\"telemetry\":{\"traceId\":\"t3\"}}",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "true", r.URL.Query().Get("stream"))
		var req RunRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		w.Header().Set("X-Genkit-Trace-Id", "header-trace")
		_, _ = io.WriteString(w, bodies[req.Key])
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	run := func(key string) (*RunResult, []string, error) {
		var chunks []string
		res, err := c.RunAction(context.Background(), RunRequest{Key: key}, func(ch json.RawMessage) error {
			chunks = append(chunks, string(ch))
			return nil
		})
		return res, chunks, err
	}

	res, chunks, err := run("/flow/ok")
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":1}`, `{"n":2}`}, chunks)
	require.JSONEq(t, `"done"`, string(res.Result))
	require.Equal(t, "t1", res.TraceID)

	_, chunks, err = run("/flow/goCancel")
	var ae *ActionError
	require.True(t, errors.As(err, &ae))
	require.Equal(t, 1, ae.Code)
	require.Equal(t, "t2", ae.TraceID)
	require.Equal(t, []string{`{"n":1}`}, chunks)

	_, _, err = run("/flow/fails")
	require.True(t, errors.As(err, &ae))
	require.Equal(t, 3, ae.Code)
	require.Equal(t, "bad input", ae.Message)
	require.Equal(t, "header-trace", ae.TraceID)

	res, chunks, err = run("/flow/chunkLike")
	require.NoError(t, err)
	require.Equal(t, []string{`{"result":1,"telemetry":{}}`}, chunks, "a chunk that looks like an outcome is still a chunk when another line follows")
	require.Equal(t, "t3", res.TraceID)
}

// TestCancelledRunIsCancelledInTheApp cancels a run while the app works on it: the app is asked
// to cancel the action of that trace (POST /api/cancelAction), since a closed connection does not
// stop it.
func TestCancelledRunIsCancelledInTheApp(t *testing.T) {
	t.Parallel()
	cancelled := make(chan string, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/runAction":
			w.Header().Set("X-Genkit-Trace-Id", "slow-trace")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "{\"n\":1}\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		case "/api/cancelAction":
			var body struct {
				TraceID string `json:"traceId"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			cancelled <- body.TraceID
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		// The run is cancelled once it has streamed its first chunk.
		_, err := (&Client{BaseURL: srv.URL}).RunAction(ctx, RunRequest{Key: "/flow/slow"}, func(json.RawMessage) error {
			cancel()
			return nil
		})
		errc <- err
	}()
	select {
	case id := <-cancelled:
		require.Equal(t, "slow-trace", id)
	case <-time.After(5 * time.Second):
		t.Fatal("the app was not asked to cancel")
	}
	require.Error(t, <-errc)
}
