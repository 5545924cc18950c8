package server

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestSessionsPageListsSessionsActiveLastFirst: /sessions has a row per session with runs (a run
// with two traces counted once), their turns, tokens and cost (— when a model has no price), first
// and last activity, the session active last first; each row links to the runs list of its runs;
// pages follow by keyset; /api/v1/sessions says the same in JSON.
func TestSessionsPageListsSessionsActiveLastFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	ctx := context.Background()
	dear, cheap, unpriced, _ := seedPricedRuns(t, b)
	n := 0
	trace := func(run uuid.UUID, session string) {
		n++
		_, err := b.store.Pool().Exec(ctx, `INSERT INTO traces (trace_id, display_name, run_id, session) VALUES ($1, 'chat', $2, $3)`,
			fmt.Sprintf("%032x", n), run, session)
		require.NoError(t, err)
	}
	trace(dear, "chat-ada")
	trace(dear, "chat-ada") // resumed: a second trace
	trace(cheap, "chat-ada")
	trace(unpriced, "chat-bob")
	_, err := b.store.Pool().Exec(ctx, `UPDATE runs SET turns = 2, input_tokens = 5, output_tokens = 1,
		updated_at = now() - CASE WHEN id = $1 THEN interval '1 h' ELSE interval '0' END`, dear)
	require.NoError(t, err)
	_, err = b.store.Pool().Exec(ctx, `UPDATE runs SET updated_at = now() - interval '2 h' WHERE id = $1`, cheap)
	require.NoError(t, err)

	resp, body := get(t, b.url+"/sessions", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `href="/sessions" aria-current="page">Sessions</a>`, "in the top navigation")
	rows := regexp.MustCompile(`(?s)<tr data-session="([^"]+)">.*?href="([^"]+)".*?data-stat="runs">(\d+)<.*?data-stat="turns">(\d+)<.*?data-stat="tokens">(\d+)<.*?data-stat="cost"[^>]*>([^<]*)<`).FindAllStringSubmatch(body, -1)
	require.Len(t, rows, 2)
	require.Equal(t, []string{"chat-bob", "/runs?session=chat-bob", "1", "2", "6", "—"}, rows[0][1:], "active last first; demo/travel has no price")
	require.Equal(t, []string{"chat-ada", "/runs?session=chat-ada", "2", "4", "12", "$3.50"}, rows[1][1:], "runs once each, cost per model")

	// The link lists the session's runs.
	_, body = get(t, b.url+"/runs?session=chat-ada", "Accept", "text/html")
	listed := regexp.MustCompile(`<tr data-run="([0-9a-f-]{36})"`).FindAllStringSubmatch(body, -1)
	require.Len(t, listed, 2)

	// Keyset pages, one session each.
	_, body = get(t, b.url+"/sessions?limit=1", "Accept", "text/html")
	require.Contains(t, body, `data-session="chat-bob"`)
	next := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(body)
	require.NotNil(t, next)
	_, body = get(t, b.url+html.UnescapeString(next[1]), "Accept", "text/html")
	require.Contains(t, body, `data-session="chat-ada"`)
	require.NotContains(t, body, `data-session="chat-bob"`)
	require.NotContains(t, body, `rel="next"`)

	var out struct {
		Sessions []struct {
			Session string   `json:"session"`
			Runs    int      `json:"runs"`
			CostUSD *float64 `json:"cost_usd"`
			RunsURL string   `json:"runs_url"`
		} `json:"sessions"`
		NextCursor *string `json:"next_cursor"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/sessions", &out))
	require.Len(t, out.Sessions, 2)
	require.Nil(t, out.NextCursor)
	require.Equal(t, "chat-bob", out.Sessions[0].Session)
	require.Nil(t, out.Sessions[0].CostUSD)
	require.InDelta(t, 3.5021, *out.Sessions[1].CostUSD, 1e-9)
	require.Equal(t, 2, out.Sessions[1].Runs)
	require.Equal(t, "/runs?session=chat-ada", out.Sessions[1].RunsURL)

	resp, _ = get(t, b.url+"/api/v1/sessions?cursor=nonsense", "Accept", "application/json")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestLoupeFlowsSetTheirSession: a durable run of a Loupe flow that calls loupe.SetSession is in
// that session: the sessions page counts it, and the runs list filtered on the session lists it.
func TestLoupeFlowsSetTheirSession(t *testing.T) {
	t.Parallel()
	define := func(reg *engine.Registry) {
		app := bridge.NewApp(reg).(*loupe.App)
		loupe.DefineFlow(app, "chatTurn", func(ctx context.Context, in struct{ Chat string }) (string, error) {
			loupe.SetSession(ctx, in.Chat)
			return "ok", nil
		})
	}
	b := setup(t, opts{dev: true, stack: true, workers: 2, define: []func(*engine.Registry){define}})
	var ids []uuid.UUID
	for _, chat := range []string{"c-1", "c-2", "c-1"} {
		run := b.startRun(t, "/flow/chatTurn", `{"Chat":"`+chat+`"}`, store.RunSucceeded)
		b.flushSpans(t, run.ID, 1)
		ids = append(ids, run.ID)
	}
	var out struct {
		Sessions []struct {
			Session string `json:"session"`
			Runs    int    `json:"runs"`
		} `json:"sessions"`
	}
	require.Eventually(t, func() bool {
		require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/sessions", &out))
		return len(out.Sessions) == 2 && out.Sessions[0].Runs+out.Sessions[1].Runs == 3
	}, 10*time.Second, 20*time.Millisecond, "sessions: %+v", out.Sessions)
	runsOf := map[string]int{}
	for _, s := range out.Sessions {
		runsOf[s.Session] = s.Runs
	}
	require.Equal(t, map[string]int{"c-1": 2, "c-2": 1}, runsOf)
	_, body := get(t, b.url+"/runs?session=c-1", "Accept", "text/html")
	require.Contains(t, body, `data-run="`+ids[0].String()+`"`)
	require.Contains(t, body, `data-run="`+ids[2].String()+`"`)
	require.NotContains(t, body, `data-run="`+ids[1].String()+`"`)
}
