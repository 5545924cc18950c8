package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// setupRunsWithBrokenAgent is setup with the demo agents' runs (dev mode) and one more flow, brokenAgent, whose model
// fails at once: a run that fails in its first turn, before any model response.
func setupRunsWithBrokenAgent(t *testing.T) *bundle {
	t.Helper()
	return setup(t, opts{dev: true, runs: true, define: []func(*engine.Registry){func(reg *engine.Registry) {
		scripted.DefineFunc(reg, "test/broken", func(*engine.ModelRequest) (scripted.Turn, error) {
			return scripted.Turn{}, errors.New("the model is down")
		})
		engine.DefineFlow(reg, "brokenAgent", func(ctx context.Context, in struct {
			Topic string `json:"topic"`
		}) (string, error) {
			resp, err := engine.Generate(ctx, reg, engine.WithModelName("test/broken"), engine.WithPrompt(in.Topic))
			if err != nil {
				return "", err
			}
			return resp.Text(), nil
		})
	}}})
}

var forkOption = regexp.MustCompile(`<option value="(-?\d+)"`)

// forkTurnsOffered returns the turns the run page's fork form offers, nil when it shows none.
func forkTurnsOffered(t *testing.T, b *bundle, id string) []int {
	t.Helper()
	resp, body := get(t, b.url+"/runs/"+id, "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-testid="replay-exact"`)
	start := strings.Index(body, `data-testid="replay-fork"`)
	if start < 0 {
		return nil
	}
	form, _, ok := strings.Cut(body[start:], "</form>")
	require.True(t, ok, "the fork form ends")
	var turns []int
	for _, m := range forkOption.FindAllStringSubmatch(form, -1) {
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		turns = append(turns, n)
	}
	require.NotEmpty(t, turns, "a fork form offers a turn")
	return turns
}

// TestRunPageOffersExactlyTheTurnsAForkAccepts: for a run that succeeded, one the turn limit
// aborted, one whose first model call failed and one waiting for a reviewer, the run page's fork
// form offers the turns the replay API accepts, and no others; with none, no fork form.
func TestRunPageOffersExactlyTheTurnsAForkAccepts(t *testing.T) {
	t.Parallel()
	b := setupRunsWithBrokenAgent(t)
	start := func(body, status string) store.Run {
		t.Helper()
		var run store.Run
		require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs", body, &run))
		return waitRun(t, b, run.ID, status)
	}
	succeeded := start(`{"action":"researchAgent","input":{"topic":"forks","depth":3}}`, store.RunSucceeded)
	var aborted store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+succeeded.ID.String()+"/replay",
		`{"mode":"rerun","overrides":{"max_turns":2}}`, &aborted))
	aborted = waitRun(t, b, aborted.ID, store.RunAborted)
	failed := start(`{"action":"brokenAgent","input":{"topic":"x"}}`, store.RunFailed)
	interrupted := start(`{"action":"transferMoney","input":{"to":"bob","amount":5,"currency":"EUR"}}`, store.RunInterrupted)

	for _, tc := range []struct {
		name string
		run  store.Run
		want []int
	}{
		{"succeeded", succeeded, []int{0, 1, 2, 3}},
		{"aborted by the turn limit", aborted, []int{0, 1}},
		{"failed before any model response", failed, nil},
		{"waiting for a reviewer", interrupted, []int{0}},
	} {
		offered := forkTurnsOffered(t, b, tc.run.ID.String())
		require.Equal(t, tc.want, offered, "%s (%d turns)", tc.name, tc.run.Turns)
		for turn := -1; turn <= tc.run.Turns+1; turn++ {
			var e apiError
			status := call(t, "POST", b.url+"/api/v1/runs/"+tc.run.ID.String()+"/replay", fmt.Sprintf(`{"mode":"fork","turn":%d}`, turn), &e)
			if slices.Contains(offered, turn) {
				require.Equal(t, http.StatusCreated, status, "%s: turn %d is offered: %s", tc.name, turn, e.Error.Message)
			} else {
				require.Equal(t, http.StatusUnprocessableEntity, status, "%s: turn %d is not offered", tc.name, turn)
				require.Equal(t, "turn", e.Error.Details["field"])
			}
		}
	}
	require.Greater(t, aborted.Turns, 2, "the aborted run counts a turn it cannot be forked from")
	require.Equal(t, 1, failed.Turns, "the failed run counts a turn it cannot be forked from")
}

// TestAPIReplayRefusesInvalidOverrides: an override value that cannot mean anything is refused
// with 422 naming the field, never accepted and ignored.
func TestAPIReplayRefusesInvalidOverrides(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	var orig store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"researchAgent","input":{"topic":"x","depth":1}}`, &orig))
	waitRun(t, b, orig.ID, store.RunSucceeded)
	replayURL := b.url + "/api/v1/runs/" + orig.ID.String() + "/replay"
	cases := []struct{ body, field, message string }{
		{`{"mode":"rerun","overrides":{"config":"hot"}}`, "overrides/config", "JSON object"},
		{`{"mode":"rerun","overrides":{"config":[1,2]}}`, "overrides/config", "JSON object"},
		{`{"mode":"fork","turn":0,"overrides":{"config":3}}`, "overrides/config", "JSON object"},
		{`{"mode":"rerun","overrides":{"max_turns":0}}`, "overrides/max_turns", "must be 1 or more"},
		{`{"mode":"rerun","overrides":{"max_turns":-1}}`, "overrides/max_turns", "must be 1 or more"},
		{`{"mode":"rerun","overrides":{"system":""}}`, "overrides/system", "omit"},
	}
	for _, tc := range cases {
		var e apiError
		require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", replayURL, tc.body, &e), tc.body)
		require.Equal(t, "invalid", e.Error.Code, tc.body)
		require.Equal(t, tc.field, e.Error.Details["field"], "%s: %s", tc.body, e.Error.Message)
		require.Contains(t, e.Error.Message, tc.message, tc.body)
	}
	var info runs.ReplayInfo
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+orig.ID.String()+"/lineage", "", &info))
	require.Empty(t, info.Derived, "no refused request created a run")

	// Valid values are still accepted; a null config is no override.
	for _, body := range []string{
		`{"mode":"rerun","overrides":{"config":{"temperature":0.2},"max_turns":1,"system":"Be brief."}}`,
		`{"mode":"rerun","overrides":{"config":null}}`,
	} {
		var rep store.Run
		require.Equal(t, http.StatusCreated, call(t, "POST", replayURL, body, &rep), body)
	}
}

// TestRunPageReplaysDerivedRunsWithTheirSettings: the run page's "Replay exactly" of a fork with
// an edit, and of a re-run that the turn limit stopped, reproduces the run it replays.
func TestRunPageReplaysDerivedRunsWithTheirSettings(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	var orig store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"researchAgent","input":{"topic":"derived","depth":3}}`, &orig))
	waitRun(t, b, orig.ID, store.RunSucceeded)
	var fork, limited store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay",
		`{"mode":"fork","turn":1,"edits":[{"turn":0,"ref":"r0-0","output":{"query":"q","source":"edited","summary":"s"}}]}`, &fork))
	fork = waitRun(t, b, fork.ID, store.RunSucceeded)
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay",
		`{"mode":"rerun","overrides":{"max_turns":2}}`, &limited))
	limited = waitRun(t, b, limited.ID, store.RunAborted)

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, src := range []store.Run{fork, limited} {
		req, err := http.NewRequest("POST", b.url+"/runs/"+src.ID.String()+"/replay", strings.NewReader("mode=exact"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		id := strings.TrimPrefix(resp.Header.Get("Location"), "/runs/")
		repID, err := uuid.Parse(id)
		require.NoError(t, err)
		rep := waitRun(t, b, repID, src.Status)
		require.Equal(t, src.Turns, rep.Turns)
		var info runs.ReplayInfo
		require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+id+"/lineage", "", &info))
		require.Empty(t, info.Replay.Divergence, "an exact replay of %s run %s: %s", src.Status, src.ID, info.Replay.Divergence)
		var d runs.RunDiff
		require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+src.ID.String()+"/diff/"+id, "", &d))
		require.True(t, d.Equal, "%+v", d.First)
		_, body := get(t, b.url+"/runs/"+id, "Accept", "text/html")
		require.Contains(t, body, "exact replay of")
		if src.ID == fork.ID {
			require.Contains(t, body, "from turn 1", "the page says the fork's history was copied")
		}
	}
}
