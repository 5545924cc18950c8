package trace

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// captureResumeFacts reads a capture's bodies and returns, as "<trace id's first 8> tool/ref", the
// tool requests that interrupted a generate and those a later generate resumes.
func captureResumeFacts(t *testing.T, name string) (interrupted, resumed map[string]bool) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "fixtures", name))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	interrupted, resumed = map[string]bool{}, map[string]bool{}
	for sc.Scan() {
		var req struct {
			Body json.RawMessage `json:"body"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &req))
		body := []byte(req.Body)
		var s string
		if json.Unmarshal(body, &s) == nil {
			body = []byte(s)
		}
		spans, err := DecodeGenkit(body)
		require.NoError(t, err)
		refs, resumes := resumeFactsOf(spans)
		for _, r := range refs {
			interrupted[r.TraceID[:8]+" "+r.Tool+"/"+r.Ref] = true
		}
		for _, r := range resumes {
			resumed[r.TraceID[:8]+" "+r.Tool+"/"+r.Ref] = true
		}
	}
	require.NoError(t, sc.Err())
	return interrupted, resumed
}

// TestResumeFactsFromTheGenkitJSCapture reads, from the real Genkit JS capture, the tool requests
// that interrupted a generate and those a later generate resumes.
func TestResumeFactsFromTheGenkitJSCapture(t *testing.T) {
	interrupted, resumed := captureResumeFacts(t, "genkit-js-1.42-dev.jsonl")
	// testdata's capture is a part of the shared one: these traces are in it.
	require.True(t, interrupted["01601726 confirmTransfer/t1"], "interrupted: %v", interrupted)
	require.True(t, resumed["136a0035 confirmTransfer/t1"], "resumed: %v", resumed)
}

// TestResumeFactsFromTheGenkitGoCapture: Genkit Go writes a resume differently from JS (the
// answered request marked resolvedInterrupt; a restart's answer in a tool message marked resumed
// as a whole): both the trace that responded to the interrupt of add/r0 and the one that
// restarted it are read as resuming it.
func TestResumeFactsFromTheGenkitGoCapture(t *testing.T) {
	interrupted, resumed := captureResumeFacts(t, "genkit-go-1.4.0-interrupt.jsonl")
	require.True(t, interrupted["7babc396 add/r0"], "interrupted: %v", interrupted)
	require.True(t, resumed["9e5ddec4 add/r0"], "the respond: %v", resumed)
	require.True(t, resumed["4d8c42e2 add/r0"], "the restart: %v", resumed)
}
