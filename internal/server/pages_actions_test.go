package server

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// peerAction stands for an action of a Genkit app another Loupe process attached to: its key is
// the app's name, a colon and Genkit's key.
type peerAction struct{ desc engine.ActionDesc }

func (a *peerAction) Desc() *engine.ActionDesc { return &a.desc }
func (a *peerAction) RunJSON(context.Context, json.RawMessage, engine.StreamFunc) (json.RawMessage, error) {
	return json.RawMessage(`"booked"`), nil
}

// oddKeys are keys whose names hold what a URL treats apart: slashes, colons, a space, "?", "#",
// "%", a colon followed by a slash inside this program's key.
var oddKeys = []string{
	"/flow/travelAgent",
	"genkit-js-peer:/tool/bookFlight",
	"/model/googleai/gemini-2.5-flash",
	"/tool/a:/b c?d#e%f",
	"shop:x:/flow/y",
	"/flow/ünïcode",
	"no-leading-slash",
}

// defineOddActions registers a Genkit app's tool and a tool of this program with an odd key.
func defineOddActions(r *engine.Registry) {
	for _, a := range []*peerAction{
		{engine.ActionDesc{Key: "genkit-js-peer:/tool/bookFlight", Name: "bookFlight", Type: engine.ActionTypeTool,
			Description: "Books a flight", Metadata: map[string]any{genkitapp.MetaApp: "genkit-js-peer"}}},
		{engine.ActionDesc{Key: "/tool/a:/b c?d#e%f", Name: "a:/b c?d#e%f", Type: engine.ActionTypeTool}},
	} {
		if err := r.Register(a); err != nil {
			panic(err)
		}
	}
}

// defineWhoAmI registers a flow that answers the action context it runs under.
func defineWhoAmI(r *engine.Registry) {
	type in struct {
		Note string `json:"note,omitempty"`
		// Approve is an optional boolean: left out, it is not the same as false.
		Approve bool `json:"approve,omitempty"`
	}
	engine.DefineFlow(r, "whoami", func(ctx context.Context, _ in) (map[string]any, error) {
		return loupe.FromContext(ctx), nil
	})
}

// TestActionURLRoundTripsKeys: an action page's address reads back as the key it was made from,
// whatever the key's name holds, and is a plain absolute path (no "//", nothing a browser takes
// for a query or a fragment).
func TestActionURLRoundTripsKeys(t *testing.T) {
	t.Parallel()
	for _, key := range oddKeys {
		u := actionURL(key)
		require.True(t, strings.HasPrefix(u, "/actions/"), u)
		require.NotContains(t, u, "//", u)
		require.NotContains(t, u, "?", u)
		require.NotContains(t, u, "#", u)
		parsed, err := url.Parse(u)
		require.NoError(t, err)
		got, err := actionKeyOf(strings.TrimPrefix(parsed.EscapedPath(), "/actions/"))
		require.NoError(t, err)
		require.Equal(t, key, got, u)
	}
	require.Equal(t, "/actions/flow/travelAgent", actionURL("/flow/travelAgent"))
	require.Equal(t, "/actions/genkit-js-peer:/tool/bookFlight", actionURL("genkit-js-peer:/tool/bookFlight"))
	require.Equal(t, "/actions/tool/a%3A/b%20c%3Fd%23e%25f", actionURL("/tool/a:/b c?d#e%f"))
}

// actionRows reads the actions list's rows: key to whether the row is shown.
func actionRows(t *testing.T, body string) map[string]bool {
	t.Helper()
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile(`<tr data-action="([^"]*)"[^>]*?( hidden)?>`).FindAllStringSubmatch(body, -1) {
		rows[html.UnescapeString(m[1])] = m[2] == ""
	}
	require.NotEmpty(t, rows, "the list has rows")
	return rows
}

// TestActionsListSearchesAndFiltersWithoutJavaScript: the list has a compact row per action
// (name linking to its page, type, description, source app), a Genkit app's under its name; ?q=
// and ?type= leave out what does not match on the server, so a browser without JavaScript
// shows only what matches, and the type filter's links keep the query.
func TestActionsListSearchesAndFiltersWithoutJavaScript(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, define: []func(*engine.Registry){defineOddActions}})

	resp, body := get(t, b.url+"/actions", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	all := actionRows(t, body)
	for _, key := range []string{"/flow/travelAgent", "/flow/countdown", "/tool/search", "/model/demo/travel", "genkit-js-peer:/tool/bookFlight"} {
		require.True(t, all[key], "%s is listed and shown", key)
	}
	require.Contains(t, body, `href="/actions/flow/travelAgent"`, "a row links to the action's page")
	require.Contains(t, body, `href="/actions/genkit-js-peer:/tool/bookFlight"`)
	require.Regexp(t, `(?s)<section class="genkit-app action-source" data-app="genkit-js-peer".*?bookFlight.*?Books a flight.*?genkit-js-peer</td>`, body,
		"an app's action is listed under the app, with its description and source")
	require.NotContains(t, body, "<textarea", "the list is rows, not forms")

	_, body = get(t, b.url+"/actions?q=TRAVEL", "Accept", "text/html")
	rows := actionRows(t, body)
	require.True(t, rows["/flow/travelAgent"], "the query matches the name, case aside")
	require.True(t, rows["/model/demo/travel"], "and the key")
	require.False(t, rows["/flow/countdown"], "what does not match is hidden")
	require.False(t, rows["genkit-js-peer:/tool/bookFlight"])
	require.Equal(t, len(all), len(rows), "hidden, not dropped: the script can widen the search again")
	require.Regexp(t, `\d+ of \d+ actions`, body)
	require.Contains(t, body, `href="/actions?q=TRAVEL&amp;type=flow"`, "the type filter keeps the query")

	_, body = get(t, b.url+"/actions?q=flight", "Accept", "text/html")
	rows = actionRows(t, body)
	require.True(t, rows["genkit-js-peer:/tool/bookFlight"], "the description and app are searched")

	_, body = get(t, b.url+"/actions?type=tool", "Accept", "text/html")
	rows = actionRows(t, body)
	require.True(t, rows["/tool/search"])
	require.True(t, rows["genkit-js-peer:/tool/bookFlight"], "an app's tools are tools")
	require.False(t, rows["/flow/travelAgent"])
	require.False(t, rows["/model/demo/travel"])
	require.Contains(t, body, `aria-current="true">tool`)

	_, body = get(t, b.url+"/actions?q=nothing-is-called-this", "Accept", "text/html")
	require.Contains(t, body, `<p class="muted" data-actions-none>No action matches.</p>`)
}

// TestActionPagesRoundTripKeysWithSlashesAndColons: every action's page opens at the address its
// row links to, a Genkit app's key (a colon and slashes) and a name with a colon, a space, "?",
// "#" and "%" among them; an unknown key is a 404.
func TestActionPagesRoundTripKeysWithSlashesAndColons(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, define: []func(*engine.Registry){defineOddActions}})
	for _, key := range []string{"/flow/travelAgent", "genkit-js-peer:/tool/bookFlight", "/tool/a:/b c?d#e%f", "/model/demo/travel"} {
		resp, body := get(t, b.url+actionURL(key), "Accept", "text/html")
		require.Equal(t, http.StatusOK, resp.StatusCode, key)
		require.Contains(t, body, `data-action-page="`+html.EscapeString(key)+`"`, key)
	}
	_, body := get(t, b.url+actionURL("genkit-js-peer:/tool/bookFlight"), "Accept", "text/html")
	require.Contains(t, body, "Genkit app genkit-js-peer")
	require.Contains(t, body, `<input type="hidden" name="action" value="genkit-js-peer:/tool/bookFlight">`, "an app's action starts a run")

	resp, _ := get(t, b.url+"/actions/flow/noSuchFlow", "Accept", "text/html")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get(t, b.url+"/actions/tool/a:/b", "Accept", "text/html")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "an unescaped colon is an app's: no app a is attached")
}

// TestActionPageLeadsWithItsFormAndListsItsLastRuns: an action's page has its run form first,
// its optional fields left out of the input, a context input, its schemas folded below, and its
// ten newest runs, each linked to its run page; a run that waits for a reviewer is shown
// waiting, not failed, with a link to its interrupt in the inbox.
func TestActionPageLeadsWithItsFormAndListsItsLastRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, define: []func(*engine.Registry){defineWhoAmI}})

	_, body := get(t, b.url+"/actions/flow/whoami", "Accept", "text/html")
	input := regexp.MustCompile(`(?s)<textarea name="input"[^>]*>(.*?)</textarea>`).FindStringSubmatch(body)
	require.NotNil(t, input)
	require.JSONEq(t, `{}`, html.UnescapeString(input[1]), "optional fields are left out: approve is not sent as false")
	require.Contains(t, body, `<input type="checkbox" data-pointer="/approve">`, "its box is unticked")

	_, body = get(t, b.url+"/actions/flow/travelAgent", "Accept", "text/html")
	form := strings.Index(body, `<form method="post" action="/actions/run"`)
	schemas := strings.Index(body, `<h2>Schemas</h2>`)
	require.Positive(t, form)
	require.Greater(t, schemas, form, "the form comes before the schemas")
	require.Regexp(t, `(?s)<details class="json"><summary>Input schema</summary><pre>\{.*?&#34;destination&#34;`, body, "the input schema is folded")
	input = regexp.MustCompile(`(?s)<textarea name="input"[^>]*>(.*?)</textarea>`).FindStringSubmatch(body)
	require.NotNil(t, input)
	var start map[string]any
	require.NoError(t, json.Unmarshal([]byte(html.UnescapeString(input[1])), &start))
	require.Equal(t, map[string]any{"destination": "Lisbon"}, start, "the required field, from the schema's example")
	require.Contains(t, body, `<textarea name="context"`)
	require.Contains(t, body, "No runs of this action yet.")

	var ids []string
	for i := 0; i < 12; i++ {
		ids = append(ids, b.startRun(t, "/flow/countdown", fmt.Sprintf(`{"from":%d}`, i+1)).ID.String())
	}
	waiting := b.startRun(t, "/flow/travelAgent", `{"destination":"Lisbon"}`, store.RunInterrupted)
	question := b.pending(t, waiting.ID)

	_, body = get(t, b.url+"/actions/flow/countdown", "Accept", "text/html")
	listed := regexp.MustCompile(`<tr data-run="([0-9a-f-]{36})">`).FindAllStringSubmatch(body, -1)
	require.Len(t, listed, actionLastRuns, "the newest ten")
	for i, m := range listed {
		require.Equal(t, ids[len(ids)-1-i], m[1], "newest first")
		require.Contains(t, body, `href="/runs/`+m[1]+`"`)
	}
	require.NotContains(t, body, `data-run="`+ids[0]+`"`, "the oldest is not listed")
	require.Contains(t, body, `href="/runs?action=%2Fflow%2Fcountdown"`, "and a link to all of them")

	_, body = get(t, b.url+"/actions/flow/travelAgent", "Accept", "text/html")
	require.Contains(t, body, `<tr data-run="`+waiting.ID.String()+`">`)
	require.Contains(t, body, `<span class="badge interrupted" data-status="interrupted">waiting for a reviewer</span>`)
	require.Contains(t, body, `<a class="small" href="/inbox?sel=`+question.ID.String()+`">answer it in the inbox</a>`)
	require.NotContains(t, body, "FAILED_PRECONDITION")
	require.NotContains(t, body, `data-status="failed"`)
}

// TestActionContextReachesTheFlow: the context given on an action's form (or to the API, or to
// Genkit's runAction) is the run's action context: stored with the run, read by the flow with
// loupe.FromContext, kept by its replay; a context that is not a JSON object comes back on the
// form with the reason, and no run is started.
func TestActionContextReachesTheFlow(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true, define: []func(*engine.Registry){defineWhoAmI}})
	ctx := context.Background()

	resp, _ := postForm(t, noRedirect, b.url+"/actions/run", url.Values{"action": {"/flow/whoami"}, "input": {`{}`},
		"context": {`{"auth":{"uid":"ann","admin":true}}`}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	id := strings.TrimPrefix(resp.Header.Get("Location"), "/runs/")
	var run struct {
		ID      string          `json:"id"`
		Context json.RawMessage `json:"context"`
	}
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+id, "", &run))
	require.JSONEq(t, `{"auth":{"uid":"ann","admin":true}}`, string(run.Context), "stored with the run")
	done := b.waitStatus(t, mustUUID(t, id), store.RunSucceeded)
	require.JSONEq(t, `{"auth":{"uid":"ann","admin":true}}`, string(done.Output), "the flow read it")

	resp, body := postForm(t, noRedirect, b.url+"/actions/run", url.Values{"action": {"/flow/whoami"}, "input": {`{}`}, "context": {`["ann"]`}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "The context is not a JSON object.")
	require.Contains(t, body, `[&#34;ann&#34;]</textarea>`, "the form comes back with what was typed")

	// The API and Genkit's reflection API take it too.
	var started struct {
		ID string `json:"id"`
	}
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs", `{"action":"/flow/whoami","input":{},"context":{"auth":{"uid":"bob"}}}`, &started))
	done = b.waitStatus(t, mustUUID(t, started.ID), store.RunSucceeded)
	require.JSONEq(t, `{"auth":{"uid":"bob"}}`, string(done.Output))
	status, out := send(t, http.MethodPost, b.url+"/api/v1/runs", "application/json", `{"action":"/flow/whoami","input":{},"context":"bob"}`)
	require.Equal(t, http.StatusUnprocessableEntity, status, out)
	require.Contains(t, out, "context: must be a JSON object")

	status, out = send(t, http.MethodPost, b.url+"/api/runAction", "application/json", `{"key":"/flow/whoami","input":{},"context":{"auth":{"uid":"cy"}}}`)
	require.Equal(t, http.StatusOK, status)
	var final struct {
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &final), out)
	require.JSONEq(t, `{"auth":{"uid":"cy"}}`, string(final.Result))

	// A replay runs under its original's context.
	replay, err := b.runs.Replay(ctx, runs.ReplayParams{RunID: done.ID, Mode: store.ReplayRerun})
	require.NoError(t, err)
	done = b.waitStatus(t, replay.ID, store.RunSucceeded)
	require.JSONEq(t, `{"auth":{"uid":"bob"}}`, string(done.Output))
}
