package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// TestEveryRouteReadsAnIDInEitherSpelling: a run's trace id is its run id's 32 hex digits, so a
// run id pasted into /traces/ (a UUID, in either case) opens the run's trace, as its hex digits
// open the run: one parser for every route's id. What is neither is a 400 naming the id.
func TestEveryRouteReadsAnIDInEitherSpelling(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, ingest: true})
	run := b.startRun(t, "countdown", `{"from":1}`, store.RunSucceeded)
	b.flushSpans(t, run.ID, 1)
	uuidForm := run.ID.String()
	hexForm := strings.ReplaceAll(uuidForm, "-", "")
	var list struct {
		Traces []struct {
			TraceID string `json:"trace_id"`
		} `json:"traces"`
	}
	require.Equal(t, http.StatusOK, call(t, http.MethodGet, b.url+"/api/v1/traces?run_id="+uuidForm, "", &list))
	require.Len(t, list.Traces, 1)
	require.Equal(t, hexForm, list.Traces[0].TraceID, "a run's trace id is its id's digits")
	for _, id := range []string{uuidForm, strings.ToUpper(uuidForm), hexForm, strings.ToUpper(hexForm)} {
		for _, path := range []string{"/runs/" + id, "/traces/" + id, "/api/v1/runs/" + id, "/api/v1/traces/" + id,
			"/api/v1/traces/" + id + "/turns", "/api/traces/" + id} {
			resp, body := get(t, b.url+path, "Accept", "text/html")
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %.300s", path, body)
		}
	}
	_, body := get(t, b.url+"/api/v1/traces/"+strings.ToUpper(uuidForm)+"/turns")
	require.Contains(t, body, `"trace_id":"`+hexForm+`"`, "the id is answered as stored")

	misplaced := hexForm[:7] + "-" + hexForm[7:11] + "-" + hexForm[11:15] + "-" + hexForm[15:19] + "-" + hexForm[19:]
	for _, path := range []string{"/runs/" + misplaced, "/traces/" + misplaced, "/api/v1/runs/" + hexForm[1:],
		"/api/v1/traces/" + hexForm + "0", "/traces/" + strings.Repeat("g", 32)} {
		resp, body := get(t, b.url+path, "Accept", "application/json")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, body)
		require.Equal(t, "bad_id", apiErrorOf(t, body).Error.Code, path)
	}
}

func TestParseIDTakesHexDigitsOrAUUID(t *testing.T) {
	t.Parallel()
	const want = "0f3a6c2e-9b1d-4e7a-8c5f-1a2b3c4d5e6f"
	for _, s := range []string{want, strings.ToUpper(want), "0f3a6c2e9b1d4e7a8c5f1a2b3c4d5e6f", "0F3A6C2E9B1D4E7A8C5F1A2B3C4D5E6F"} {
		id, ok := parseID(s)
		require.True(t, ok, s)
		require.Equal(t, want, id.String(), s)
	}
	for _, s := range []string{"", "xyz", want[:35], want + "0", "0f3a6c2e-9b1d-4e7a-8c5f1-a2b3c4d5e6f", "0f3a6c2e_9b1d_4e7a_8c5f_1a2b3c4d5e6f",
		"{" + want + "}", "urn:uuid:" + want, strings.Repeat("z", 32), "0f3a6c2e-9b1d-4e7a-8c5f-1a2b3c4d5e6+"} {
		_, ok := parseID(s)
		require.False(t, ok, s)
	}
}
