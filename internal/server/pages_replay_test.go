package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

func TestRunPageReplaysAndForks(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	ctx := context.Background()
	var run store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"researchAgent","input":{"topic":"forks","depth":2}}`, &run))
	require.Eventually(t, func() bool {
		r, err := b.store.RunGet(ctx, run.ID)
		return err == nil && r.Status == store.RunSucceeded
	}, 30*time.Second, 20*time.Millisecond)

	resp, body := get(t, b.url+"/runs/"+run.ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, id := range []string{"replay-exact", "replay-rerun", "replay-fork"} {
		require.Contains(t, body, `data-testid="`+id+`"`)
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(form url.Values) string {
		req, err := http.NewRequest("POST", b.url+"/runs/"+run.ID.String()+"/replay", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		return strings.TrimPrefix(resp.Header.Get("Location"), "/runs/")
	}
	fork, err := uuid.Parse(post(url.Values{"mode": {"fork"}, "turn": {"1"}, "confirm": {"yes"}}))
	require.NoError(t, err)
	exact, err := uuid.Parse(post(url.Values{"mode": {"exact"}}))
	require.NoError(t, err)
	for _, id := range []uuid.UUID{fork, exact} {
		require.Eventually(t, func() bool {
			r, err := b.store.RunGet(ctx, id)
			return err == nil && r.Status == store.RunSucceeded
		}, 30*time.Second, 20*time.Millisecond)
	}
	f, err := b.store.RunGet(ctx, fork)
	require.NoError(t, err)
	require.Equal(t, run.ID, *f.ForkOf)
	require.Equal(t, 1, *f.ForkTurn)
	e, err := b.store.RunGet(ctx, exact)
	require.NoError(t, err)
	require.Equal(t, run.ID, *e.ReplayOf)

	// The page's exact replay serves tools from the recording unless asked for live ones, so that
	// nothing a tool did happens twice by a click.
	require.Contains(t, body, `<option value="cassette" selected>give their recorded results (nothing happens twice)</option>`)
	taped, err := uuid.Parse(post(url.Values{"mode": {"exact"}, "tools": {"cassette"}}))
	require.NoError(t, err)
	settings, err := b.store.ReplayGet(ctx, taped)
	require.NoError(t, err)
	require.Equal(t, store.ReplayToolsCassette, settings.Tools)
	require.Eventually(t, func() bool {
		r, err := b.store.RunGet(ctx, taped)
		return err == nil && r.Status == store.RunSucceeded
	}, 30*time.Second, 20*time.Millisecond)

	_, body = get(t, b.url+"/runs/"+fork.String(), "Accept", "text/html")
	require.Contains(t, body, "fork of")
	require.Contains(t, body, `data-testid="compare"`)

	// The comparison page: an exact replay matches its original; the fork differs from turn 1 on
	// (a fork's model calls are live, and its run ids differ), and a run matches itself.
	resp, body = get(t, b.url+"/runs/"+run.ID.String()+"/diff/"+exact.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-testid="diff-equal"`)
	resp, body = get(t, b.url+"/runs/"+run.ID.String()+"/diff/"+run.ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-testid="diff-equal"`)
	resp, _ = get(t, b.url+"/runs/"+run.ID.String()+"/diff/nope", "Accept", "text/html")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
