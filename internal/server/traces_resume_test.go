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
	// The resumed trace links to the interrupted call itself, its span and turn, and numbers its
	// own turns on from there: confirmTransfer interrupted in turn 1, so the resume's first turn is 2.
	_, body := get(t, b.url+"/traces/136a00354a91cd4d12dab6967030ac50", "Accept", "text/html")
	require.Contains(t, body, `<a href="/traces/016017260409a9c3e70ee5c46e056d1a?span=4952a06fc4d2f440" data-resumed-span="4952a06fc4d2f440">confirmTransfer, interrupted in turn 1</a>`)
	require.Contains(t, body, `>turn 2<`, "the resume's first turn is numbered on")
	require.NotContains(t, body, `>turn 0<`)
	_, body = get(t, b.url+"/traces/016017260409a9c3e70ee5c46e056d1a?span=4952a06fc4d2f440", "Accept", "text/html")
	require.Contains(t, body, `class="span-row d`, "the link opens the interrupted span")
	require.Regexp(t, `class="span-row[^"]* selected[^"]*"[^>]*id="span-4952a06fc4d2f440"`, body)
	require.NotContains(t, body, `data-testid="resumed-from"`, "the first execution resumes nothing")
	// A trace with no resume in it links nowhere (the store's own test covers a trace that resumed
	// its own interrupt).
	_, body = get(t, b.url+"/traces/11073289c3bf9977075573ab4917251b", "Accept", "text/html")
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
	// add interrupted in turn 0: the respond's trace links to that span and numbers from 1, in the
	// tree and in the turns table.
	_, body = get(t, b.url+"/traces/9e5ddec4a84a9df0bb712a2e6e9ab35a", "Accept", "text/html")
	require.Contains(t, body, `<a href="/traces/`+interrupted+`?span=cd003e73e4d99ca9" data-resumed-span="cd003e73e4d99ca9">add, interrupted in turn 0</a>`)
	require.NotContains(t, body, `>turn 0<`)
	require.Contains(t, body, `>turn 1<`)
	require.Regexp(t, `<td><a href="/traces/9e5ddec4a84a9df0bb712a2e6e9ab35a\?span=[0-9a-f]{16}">3</a></td>`, body, "the turns table numbers on")
}

// TestResumedFromLinksStayOnTheRunPage: on a run page, the interrupted call is the run's earlier
// execution, opened within the run page; elsewhere on the interrupted trace's own page.
func TestResumedFromLinksStayOnTheRunPage(t *testing.T) {
	t.Parallel()
	o := &resumeOrigin{TraceID: "016017260409a9c3e70ee5c46e056d1a", SpanID: "4952a06fc4d2f440"}
	require.Equal(t, "/runs/r1?trace=016017260409a9c3e70ee5c46e056d1a&span=4952a06fc4d2f440", resumedFromURL("/runs/r1?trace=abc&span=", o))
	require.Equal(t, "/runs/r1?trace=016017260409a9c3e70ee5c46e056d1a&span=4952a06fc4d2f440", resumedFromURL("/runs/r1?span=", o))
	require.Equal(t, "/traces/016017260409a9c3e70ee5c46e056d1a?span=4952a06fc4d2f440", resumedFromURL("/traces/136a?span=", o))
}
