package server

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// A replay's page says whether it diverged from its original, and the original's page lists the
// runs derived from it.
func TestRunPageShowsDivergenceAndDerivedRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	ctx := context.Background()
	var orig store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"researchAgent","input":{"topic":"lineage","depth":2}}`, &orig))
	waitRun(t, b, orig.ID, store.RunSucceeded)

	replay := func(body string) store.Run {
		var r store.Run
		require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay", body, &r))
		return waitRun(t, b, r.ID, store.RunSucceeded)
	}
	same := replay(`{"mode":"exact"}`)
	diverged := replay(`{"mode":"exact"}`)
	fork := replay(`{"mode":"fork","turn":1}`)

	// An exact replay that found no difference matches its original.
	resp, body := get(t, b.url+"/runs/"+same.ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-testid="matches"`)
	require.Contains(t, body, "Matches the original")
	require.NotContains(t, body, `data-testid="divergence"`)

	// A stored divergence is shown with its turn, part, path and shortened values, and a link to
	// the comparison at that turn.
	long := strings.Repeat("x", 500)
	raw, err := json.Marshal(map[string]any{"turn": 1, "part": "tool_output", "ref": "r1-0", "tool": "search",
		"path": "/summary", "original": long, "replay": "short", "message": "the tool's output differs"})
	require.NoError(t, err)
	first, err := b.store.ReplayDiverge(ctx, store.Fence{RunID: diverged.ID}, raw)
	require.NoError(t, err)
	require.True(t, first)
	resp, body = get(t, b.url+"/runs/"+diverged.ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-testid="divergence"`)
	require.NotContains(t, body, `data-testid="matches"`)
	text := html.UnescapeString(body)
	require.Contains(t, text, "Diverged from the original at turn 1:")
	require.Contains(t, text, "tool_output")
	require.Contains(t, text, "/summary")
	require.Contains(t, text, `"short"`)
	require.Contains(t, text, `"`+strings.Repeat("x", 199)+"…")
	require.NotContains(t, text, strings.Repeat("x", 201))
	require.Contains(t, body, `href="/runs/`+orig.ID.String()+`/diff/`+diverged.ID.String()+`#turn-1"`)

	// The sections fragment the live script reloads carries the same notice.
	_, body = get(t, b.url+"/runs/"+diverged.ID.String()+"/sections", "Accept", "text/html")
	require.Contains(t, body, `data-testid="divergence"`)

	// A fork checks no divergence: neither notice.
	_, body = get(t, b.url+"/runs/"+fork.ID.String(), "Accept", "text/html")
	require.NotContains(t, body, `data-testid="divergence"`)
	require.NotContains(t, body, `data-testid="matches"`)
	require.NotContains(t, body, `data-testid="derived"`)

	// The original lists its replays and forks, oldest first, with links to the comparisons.
	resp, body = get(t, b.url+"/runs/"+orig.ID.String()+"?tab=lineage", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-testid="derived"`)
	require.NotContains(t, body, `data-testid="divergence"`)
	rows := map[string]string{}
	at := -1
	for i, r := range []store.Run{same, diverged, fork} {
		id := r.ID.String()
		pos := strings.Index(body, `<tr data-run="`+id+`"`)
		require.Greater(t, pos, at, "run %d is listed in order", i)
		at = pos
		end := strings.Index(body[pos:], "</tr>")
		require.Positive(t, end)
		rows[id] = body[pos : pos+end]
		require.Contains(t, rows[id], ">"+id[len(id)-8:]+"<")
		require.Contains(t, rows[id], `href="/runs/`+orig.ID.String()+`/diff/`+id+`"`)
		require.Contains(t, rows[id], "succeeded")
	}
	require.Contains(t, rows[same.ID.String()], "exact")
	require.Contains(t, rows[same.ID.String()], "matches")
	require.Contains(t, rows[diverged.ID.String()], "diverged at turn 1")
	require.Contains(t, rows[fork.ID.String()], "fork")
	require.Contains(t, rows[fork.ID.String()], "from turn 1")
	require.Contains(t, rows[fork.ID.String()], "not checked")
}

// The compare page names each run's action, model and mode, and shortens long values: a value of
// megabytes leaves a preview and its size, not the whole of it, in the page.
func TestDiffPageHeadersAndLongValues(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	ctx := context.Background()
	var orig store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"researchAgent","input":{"topic":"headers","depth":1}}`, &orig))
	waitRun(t, b, orig.ID, store.RunSucceeded)
	var rep store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs/"+orig.ID.String()+"/replay", `{"mode":"exact"}`, &rep))
	rep = waitRun(t, b, rep.ID, store.RunSucceeded)

	resp, body := get(t, b.url+"/runs/"+orig.ID.String()+"/diff/"+rep.ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for side, r := range map[string]store.Run{"A": orig, "B": rep} {
		i := strings.Index(body, `data-testid="diff-run-`+side+`"`)
		require.Positive(t, i, side)
		head := body[i : i+strings.Index(body[i:], "</dl>")]
		require.Contains(t, head, "researchAgent", side)
		stored, err := b.store.RunGet(ctx, r.ID)
		require.NoError(t, err)
		require.NotNil(t, stored.Model)
		require.Contains(t, head, "<dt>Model</dt><dd>"+*stored.Model+"</dd>", side)
	}
	for side, want := range map[string]string{`data-testid="diff-run-A"`: "original", `data-testid="diff-run-B"`: "exact"} {
		_, rest, ok := strings.Cut(body, side)
		require.True(t, ok, side)
		head, _, ok := strings.Cut(rest, "</dl>")
		require.True(t, ok, side)
		require.Contains(t, head, want, side)
	}

	// Two runs whose inputs hold a 3 MB and a 10 KB value.
	mk := func(big, mid string) *store.Run {
		in, err := json.Marshal(map[string]string{"big": big, "mid": mid})
		require.NoError(t, err)
		r, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "researchAgent", Input: in})
		require.NoError(t, err)
		return r
	}
	ra := mk(strings.Repeat("a", 3<<20), strings.Repeat("m", 10<<10))
	rb := mk(strings.Repeat("b", 3<<20), strings.Repeat("n", 10<<10))
	resp, body = get(t, b.url+"/runs/"+ra.ID.String()+"/diff/"+rb.ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Less(t, len(body), 512<<10, "the page holds no megabyte value")
	require.Contains(t, body, "3.0 MB")
	require.Contains(t, body, `data-testid="diff-too-large"`)
	require.Contains(t, body, `href="/api/v1/runs/`+ra.ID.String()+`/diff/`+rb.ID.String()+`"`)
	require.NotContains(t, body, strings.Repeat("a", 3<<10))
	// The 10 KB value: a preview, and the whole of it behind a <details>.
	require.Contains(t, body, "show all 10.0 KB")
	require.Contains(t, body, `<details class="diff-full">`)
	require.Contains(t, body, strings.Repeat("m", 10<<10))
}
