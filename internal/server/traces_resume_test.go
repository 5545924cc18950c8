package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGenkitResumedTraceIsLinkedToTheInterruptedOne: Genkit JS resumes an interrupted generate in
// a trace of its own; Loupe links that trace to the one it resumes (the same tool and ref, the
// latest earlier interruption) and back, both ways on the trace pages.
func TestGenkitResumedTraceIsLinkedToTheInterruptedOne(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	replayFixture(t, b, "genkit-js-1.42-dev.jsonl")
	for resumed, interrupted := range map[string]string{
		"136a00354a91cd4d12dab6967030ac50": "016017260409a9c3e70ee5c46e056d1a", // confirmTransfer t1, answered with respond
	} {
		resp, body := get(t, b.url+"/traces/"+resumed, "Accept", "text/html")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `data-resumes="`+interrupted+`"`, "%s says which trace it resumes", resumed)
		_, body = get(t, b.url+"/traces/"+interrupted, "Accept", "text/html")
		require.Contains(t, body, `data-resumed-by="`+resumed+`"`, "%s says where it was resumed", interrupted)
	}
	// A trace with no resume in it links nowhere (the store's own test covers a trace that resumed
	// its own interrupt).
	_, body := get(t, b.url+"/traces/11073289c3bf9977075573ab4917251b", "Accept", "text/html")
	require.NotContains(t, body, `data-resumes=`)
}

// TestGenkitGoResumedTracesAreLinkedToTheInterruptedOne: the same from the real Genkit Go capture,
// whose resumes are written differently: a respond and a restart of one interrupt (add, r0), each
// linked to the trace that interrupted.
func TestGenkitGoResumedTracesAreLinkedToTheInterruptedOne(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	replayFixture(t, b, "genkit-go-1.4.0-interrupt.jsonl")
	const interrupted = "7babc39630e2a837ae4f71f8ea562e0b"
	for _, resumed := range []string{"9e5ddec4a84a9df0bb712a2e6e9ab35a", "4d8c42e255dcac2cc7bc9e1eb278f6d4"} {
		_, body := get(t, b.url+"/traces/"+resumed, "Accept", "text/html")
		require.Contains(t, body, `data-resumes="`+interrupted+`"`, "%s says which trace it resumes", resumed)
	}
	_, body := get(t, b.url+"/traces/"+interrupted, "Accept", "text/html")
	for _, resumed := range []string{"9e5ddec4a84a9df0bb712a2e6e9ab35a", "4d8c42e255dcac2cc7bc9e1eb278f6d4"} {
		require.Contains(t, body, resumed, "the interrupted trace says where it was resumed")
	}
}
