package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// waitRun polls the API until the run reaches status.
func waitRun(t *testing.T, b *bundle, id uuid.UUID, status string, header ...string) store.Run {
	t.Helper()
	var run store.Run
	require.Eventually(t, func() bool {
		require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+id.String(), "", &run, header...))
		return run.Status == status
	}, 60*time.Second, 20*time.Millisecond, "run %s never became %s (last %s)", id, status, run.Status)
	return run
}

func TestAPIReplayForkDiffAndLineage(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	var orig store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"researchAgent","input":{"topic":"replay","depth":3}}`, &orig))
	waitRun(t, b, orig.ID, store.RunSucceeded)

	var rep store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay", `{"mode":"exact"}`, &rep))
	require.Equal(t, store.RunQueued, rep.Status)
	require.Equal(t, orig.ID, *rep.ReplayOf)
	waitRun(t, b, rep.ID, store.RunSucceeded)

	var d runs.RunDiff
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/diff/"+rep.ID.String(), "", &d))
	require.True(t, d.Equal, "%+v", d.First)
	require.Len(t, d.Turns, 4)
	require.Len(t, d.Turns[0].ToolCalls, 6, "the research agent searches six queries per turn")

	var fork store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay",
		`{"mode":"fork","turn":1,"edits":[{"turn":0,"ref":"r0-0","output":{"query":"q","source":"edited","summary":"s"}}]}`, &fork))
	require.Equal(t, 1, *fork.ForkTurn)
	waitRun(t, b, fork.ID, store.RunSucceeded)
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/diff/"+fork.ID.String(), "", &d))
	require.False(t, d.Equal)
	require.Equal(t, 0, d.First.Turn)
	require.Equal(t, "tool_output", d.First.Part)
	require.Equal(t, "r0-0", d.First.Ref)

	var info runs.ReplayInfo
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/lineage", "", &info))
	require.Nil(t, info.Of)
	require.Len(t, info.Derived, 2)
	require.Equal(t, "replay", info.Derived[0].Relation)
	require.Equal(t, "fork", info.Derived[1].Relation)
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+fork.ID.String()+"/lineage", "", &info))
	require.Equal(t, orig.ID, info.Of.RunID)
	require.Equal(t, store.ReplayFork, info.Replay.Mode)
	require.NotEmpty(t, info.Replay.Edits)
	// The fork's page says what was edited at the fork point; the original's says nothing of it.
	_, page := get(t, b.url+"/runs/"+fork.ID.String(), "Accept", "text/html")
	i := strings.Index(page, `data-testid="fork-edits"`)
	require.GreaterOrEqual(t, i, 0, "the fork's header lists its edits")
	edits := page[i : i+strings.Index(page[i:], "</dd>")]
	require.Contains(t, edits, "tool output of r0-0 in turn 0 set to")
	require.Contains(t, edits, "edited")
	_, page = get(t, b.url+"/runs/"+orig.ID.String(), "Accept", "text/html")
	require.NotContains(t, page, `data-testid="fork-edits"`)

	var self runs.RunDiff
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/diff/"+orig.ID.String(), "", &self))
	require.True(t, self.Equal)
	require.Nil(t, self.First)
}

func TestAPIReplayRejectsBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	var orig store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"researchAgent","input":{"topic":"x","depth":1}}`, &orig))
	waitRun(t, b, orig.ID, store.RunSucceeded)
	replayURL := b.url + "/api/v1/runs/" + orig.ID.String() + "/replay"
	cases := []struct {
		url, body string
		status    int
		code      string
		field     string
	}{
		{replayURL, ``, http.StatusBadRequest, "bad_request", ""},
		{replayURL, `{"mode":`, http.StatusBadRequest, "bad_json", ""},
		{replayURL, `{"mode":"exact","speed":2}`, http.StatusBadRequest, "bad_json", ""},
		{replayURL, `{}`, http.StatusBadRequest, "bad_request", "mode"},
		{b.url + "/api/v1/runs/nope/replay", `{"mode":"exact"}`, http.StatusBadRequest, "bad_id", ""},
		{b.url + "/api/v1/runs/" + uuid.NewString() + "/replay", `{"mode":"exact"}`, http.StatusNotFound, "not_found", ""},
		{replayURL, `{"mode":"again"}`, http.StatusUnprocessableEntity, "invalid", "mode"},
		{replayURL, `{"mode":"fork"}`, http.StatusUnprocessableEntity, "invalid", "turn"},
		{replayURL, `{"mode":"fork","turn":7}`, http.StatusUnprocessableEntity, "invalid", "turn"},
		{replayURL, `{"mode":"rerun","tools":"cassette"}`, http.StatusUnprocessableEntity, "invalid", "tools"},
		{replayURL, `{"mode":"rerun","apply_resolutions":true}`, http.StatusUnprocessableEntity, "invalid", "apply_resolutions"},
		{replayURL, `{"mode":"rerun","overrides":{"model":"nope"}}`, http.StatusUnprocessableEntity, "invalid", "overrides/model"},
		{replayURL, `{"mode":"exact","overrides":{"max_turns":2}}`, http.StatusUnprocessableEntity, "invalid", "overrides"},
		{replayURL, `{"mode":"fork","turn":1,"edits":[{"seq":9,"message":{"role":"user","content":[]}}]}`, http.StatusUnprocessableEntity, "invalid", "edits/0/seq"},
	}
	for _, tc := range cases {
		var e apiError
		require.Equal(t, tc.status, call(t, "POST", tc.url, tc.body, &e), "%s %s", tc.url, tc.body)
		require.Equal(t, tc.code, e.Error.Code, "%s: %s", tc.body, e.Error.Message)
		if tc.field != "" {
			require.Equal(t, tc.field, e.Error.Details["field"], "%s: %s", tc.body, e.Error.Message)
		}
	}

	var e apiError
	require.Equal(t, http.StatusNotFound, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/diff/"+uuid.NewString(), "", &e))
	require.Equal(t, http.StatusBadRequest, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/diff/zzz", "", &e))
	require.Equal(t, http.StatusNotFound, call(t, "GET", b.url+"/api/v1/runs/"+uuid.NewString()+"/lineage", "", &e))

	queued, err := b.store.RunCreate(context.Background(), store.RunCreateParams{Action: "/flow/researchAgent", Input: orig.Input})
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, call(t, "POST", b.url+"/api/v1/runs/"+queued.ID.String()+"/replay", `{"mode":"exact"}`, &e))

	var info runs.ReplayInfo
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/lineage", "", &info))
	require.Empty(t, info.Derived, "no rejected request created a run")
}

func TestAPIReplayNeedsTheReviewerRole(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false, runs: true})
	viewer := b.userToken(t, "vic", store.RoleViewer)
	reviewer := b.userToken(t, "rev", store.RoleReviewer)
	var orig store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs", `{"action":"countdown","input":{"from":1}}`, &orig,
		"Authorization", "Bearer "+reviewer))
	waitRun(t, b, orig.ID, store.RunSucceeded, "Authorization", "Bearer "+viewer)
	var e apiError
	require.Equal(t, http.StatusForbidden, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay", `{"mode":"exact"}`, &e,
		"Authorization", "Bearer "+viewer))
	require.Contains(t, e.Error.Message, "reviewer")
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/diff/"+orig.ID.String(), "", nil,
		"Authorization", "Bearer "+viewer), "reading a diff needs no more than a viewer")
	var rep store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay", `{"mode":"exact"}`, &rep,
		"Authorization", "Bearer "+reviewer))
	require.Equal(t, "rev", *rep.CreatedBy)
}

// TestAPIInterruptsCarryAReplaysSuggestedResolution: an interrupt a replay raises again carries the
// original reviewer's decision as suggested_resolution in the interrupt list and the interrupt
// itself, still pending; an interrupt no replay raised has no such field.
func TestAPIInterruptsCarryAReplaysSuggestedResolution(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	var orig store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"transferMoney","input":{"to":"bob","amount":500,"currency":"CNY"}}`, &orig))
	waitRun(t, b, orig.ID, store.RunInterrupted)
	first := pendingOf(t, b, orig.ID)
	require.NotContains(t, first, "suggested_resolution", "an original run's interrupt offers nothing")
	var resolved store.Interrupt
	require.Equal(t, http.StatusOK, call(t, "POST", b.url+"/api/v1/interrupts/"+first["id"].(string)+"/resolve",
		`{"action":"approve","comment":"looks right"}`, &resolved))
	waitRun(t, b, orig.ID, store.RunSucceeded)

	var rep store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay", `{"mode":"exact"}`, &rep))
	waitRun(t, b, rep.ID, store.RunInterrupted)
	var other store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"transferMoney","input":{"to":"ann","amount":7,"currency":"EUR"}}`, &other))
	waitRun(t, b, other.ID, store.RunInterrupted)

	again := pendingOf(t, b, rep.ID)
	require.Equal(t, store.InterruptPending, again["status"], "offered, never applied")
	wantSuggestion := func(raw any) {
		t.Helper()
		s, ok := raw.(map[string]any)
		require.True(t, ok, "suggested_resolution is an object: %v", raw)
		require.Equal(t, orig.ID.String(), s["source_run_id"])
		require.Equal(t, resolved.ID.String(), s["source_interrupt_id"])
		require.Equal(t, store.InterruptApproved, s["status"])
		require.Equal(t, "local", s["resolved_by"])
		require.Equal(t, "looks right", s["comment"])
		require.Equal(t, map[string]any{"action": "approve"}, s["resolution"])
	}
	wantSuggestion(again["suggested_resolution"])
	require.NotContains(t, pendingOf(t, b, other.ID), "suggested_resolution")

	type oneInterrupt struct {
		Interrupt map[string]any `json:"interrupt"`
	}
	var offered, original oneInterrupt
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/interrupts/"+again["id"].(string), "", &offered))
	wantSuggestion(offered.Interrupt["suggested_resolution"])
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/interrupts/"+first["id"].(string), "", &original))
	require.Equal(t, store.InterruptApproved, original.Interrupt["status"])
	require.NotContains(t, original.Interrupt, "suggested_resolution")

	// The inbox offers the original decision on the replay's interrupt, and on no other.
	card := func(id string) string {
		t.Helper()
		_, inbox := get(t, b.url+"/inbox?sel="+id, "Accept", "text/html")
		start := strings.Index(inbox, `id="d-`+id+`"`)
		require.NotEqual(t, -1, start, "interrupt %s is shown in full in the inbox", id)
		rest := inbox[start:]
		if end := strings.Index(rest, `</article>`); end >= 0 {
			rest = rest[:end]
		}
		return rest
	}
	offeredCard := card(again["id"].(string))
	require.Contains(t, offeredCard, "data-suggested")
	require.Contains(t, offeredCard, `href="/runs/`+orig.ID.String()+`"`)
	require.Contains(t, offeredCard, "looks right")
	require.Contains(t, offeredCard, "offered as a default, not applied")
	require.Regexp(t, `this was <span[^>]*>\w+</span>\s+by\s+<strong>[^<]+</strong>\s+at\s+<time[^>]*>[^<]+</time>\s+<span class="muted">`, offeredCard,
		"words and elements are spaced")
	require.NotContains(t, card(pendingOf(t, b, other.ID)["id"].(string)), "data-suggested")
}

// pendingOf returns, as raw JSON fields, the one pending interrupt of a run that
// GET /api/v1/interrupts lists.
func pendingOf(t *testing.T, b *bundle, runID uuid.UUID) map[string]any {
	t.Helper()
	var list struct {
		Interrupts []map[string]any `json:"interrupts"`
	}
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/interrupts?status=pending", "", &list))
	var found []map[string]any
	for _, it := range list.Interrupts {
		if it["run_id"] == runID.String() {
			found = append(found, it)
		}
	}
	require.Len(t, found, 1, "run %s has one pending interrupt: %v", runID, list.Interrupts)
	return found[0]
}
