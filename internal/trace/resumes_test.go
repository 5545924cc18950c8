package trace

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResumeFactsFromTheGenkitJSCapture reads, from the real Genkit JS capture, the tool requests
// that interrupted a generate and those a later generate resumes.
func TestResumeFactsFromTheGenkitJSCapture(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "fixtures", "genkit-js-1.42-dev.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	interrupted, resumed := map[string]bool{}, map[string]bool{}
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
	// testdata's capture is a part of the shared one: these traces are in it.
	for _, want := range []string{"01601726 confirmTransfer/t1"} {
		require.True(t, interrupted[want], "%s interrupted: %v", want, interrupted)
	}
	for _, want := range []string{"136a0035 confirmTransfer/t1"} {
		require.True(t, resumed[want], "%s resumed: %v", want, resumed)
	}
}
