package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// startRun starts a demo run and waits until it reaches one of the statuses.
func (b *bundle) startRun(t testing.TB, action, input string, until ...string) *store.Run {
	t.Helper()
	run, err := b.runs.StartRun(context.Background(), runs.StartParams{Action: action, Input: json.RawMessage(input), CreatedBy: "test"})
	require.NoError(t, err)
	if len(until) == 0 {
		return run
	}
	var got *store.Run
	require.Eventually(t, func() bool {
		got, err = b.store.RunGet(context.Background(), run.ID)
		require.NoError(t, err)
		for _, s := range until {
			if got.Status == s {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "run %s never reached %v", run.ID, until)
	return got
}

func (b *bundle) pending(t testing.TB, runID uuid.UUID) *store.Interrupt {
	t.Helper()
	list, err := b.store.InterruptListByRun(context.Background(), runID)
	require.NoError(t, err)
	for _, i := range list {
		if i.Status == store.InterruptPending {
			return i
		}
	}
	t.Fatalf("run %s has no pending interrupt", runID)
	return nil
}

// flushSpans waits until the run's spans are in the database.
func (b *bundle) flushSpans(t testing.TB, runID uuid.UUID, atLeast int) {
	t.Helper()
	require.NoError(t, b.prov.ForceFlush(context.Background()))
	require.Eventually(t, func() bool {
		items, _, err := b.store.TraceList(context.Background(), store.TraceListParams{
			Filters: []store.TraceFilter{{Field: trace.AttrRunID, Op: store.FilterEq, Value: runID.String()}}})
		require.NoError(t, err)
		n := 0
		for _, it := range items {
			n += it.SpanCount
		}
		return n >= atLeast
	}, 10*time.Second, 20*time.Millisecond)
}

func postForm(t testing.TB, client *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestRunPageShowsHeaderTraceConversationAndLedger renders a finished research run: header facts,
// the span tree collapsed by turn, the conversation by part kind, and the tool ledger.
func TestRunPageShowsHeaderTraceConversationAndLedger(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/researchAgent", `{"topic":"durable","depth":3}`, store.RunSucceeded)
	b.flushSpans(t, run.ID, 20)

	resp, body := get(t, b.url+"/runs/"+run.ID.String(), "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, want := range []string{"/flow/researchAgent", `data-status="succeeded"`, "demo/research", "Tokens",
		`class="spantree"`, "turn 0", "turn 3", `data-testid="run-tabs"`} {
		require.Contains(t, body, want)
	}
	// The trace is the first tab; the conversation and the ledger are tabs of their own.
	require.NotContains(t, body, "← tool response")
	_, conv := get(t, b.url+"/runs/"+run.ID.String()+"?tab=conversation", "Accept", "text/html")
	require.Contains(t, conv, "→ tool request")
	require.Contains(t, conv, "← tool response")
	require.NotContains(t, conv, `class="spantree"`)
	_, ledger := get(t, b.url+"/runs/"+run.ID.String()+"?tab=ledger", "Accept", "text/html")
	require.Contains(t, ledger, "Tool ledger")
	require.Contains(t, ledger, "executed")
	// Collapsed by turn: the turn rows are there, the tool spans inside them are not.
	require.Regexp(t, `aria-expanded="false"`, body)
	require.NotContains(t, body, `data-select>search<span class="span-preview">`)

	// A deep link opens the span's turn and selects it.
	_, body = get(t, b.url+"/runs/"+run.ID.String()+"?tool=search&turn=1", "Accept", "text/html")
	require.Contains(t, body, `data-select>search<span class="span-preview">: durable, angle 2.`, "a tool's row says what it was asked")
	require.Contains(t, body, `class="span-panel"`)
	require.Contains(t, body, "genkit:input")
}

// TestTreeFragmentsLoadChildrenAndPayloads checks the lazy parts of the tree: a node's children,
// a span's panel, and a full payload.
func TestTreeFragmentsLoadChildrenAndPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/researchAgent", `{"topic":"x","depth":2}`, store.RunSucceeded)
	b.flushSpans(t, run.ID, 10)
	items, _, err := b.store.TraceList(context.Background(), store.TraceListParams{
		Filters: []store.TraceFilter{{Field: trace.AttrRunID, Op: store.FilterEq, Value: run.ID.String()}}})
	require.NoError(t, err)
	require.Len(t, items, 1)
	tid := items[0].TraceID
	facts, err := b.store.SpanTurnFactsByTrace(context.Background(), tid)
	require.NoError(t, err)
	sk := buildSkeleton(tid, facts, time.Now().UnixNano())
	var turn0 string
	for i := range facts {
		if sk.Turn[i] == 0 {
			turn0 = facts[i].SpanID
		}
	}
	require.NotEmpty(t, turn0)

	resp, body := get(t, b.url+"/traces/"+tid+"/children?parent="+turn0+"&depth=2")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `data-depth="2"`)
	require.Contains(t, body, "search")
	require.NotContains(t, body, "<html", "a fragment, not a page")

	resp, body = get(t, b.url+"/traces/"+tid+"/spans/"+turn0)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "genkit:output")

	resp, _ = get(t, b.url+"/traces/"+tid+"/spans/"+turn0+"/payload?key=genkit:output")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = get(t, b.url+"/traces/not-hex/children")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestSkeletonLiftsNestedTurnsAndPagesChildren: nested generate turns become siblings, a loop in
// parent links cannot hide spans, and children past a page get a "more" row.
func TestSkeletonLiftsNestedTurnsAndPagesChildren(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	facts := []store.SpanTurnFacts{
		{SpanID: "root", Name: "flow", StartTime: 1, EndTime: 100},
		{SpanID: "t0", ParentSpanID: s("root"), Name: "generate", StartTime: 2, EndTime: 90, TurnIndex: s("0"), Operation: s("invoke_agent")},
		{SpanID: "m0", ParentSpanID: s("t0"), Name: "model", StartTime: 3, EndTime: 4, Operation: s("chat")},
		{SpanID: "t1", ParentSpanID: s("t0"), Name: "generate", StartTime: 5, EndTime: 80, TurnIndex: s("1"), Operation: s("invoke_agent")},
		{SpanID: "a", ParentSpanID: s("b"), Name: "loop-a", StartTime: 6, EndTime: 7},
		{SpanID: "b", ParentSpanID: s("a"), Name: "loop-b", StartTime: 7, EndTime: 0},
	}
	sk := buildSkeleton("t", facts, 200)
	rows := sk.rows(-1, 0, 0, map[int32]bool{0: true}, -1)
	var names []string
	for _, r := range rows {
		names = append(names, fmt.Sprintf("%s@%d", r.Name, r.Depth))
	}
	require.Equal(t, []string{"flow@0", "generate@1", "generate@1", "loop-a@1", "loop-b@1"}, names, "t1 is lifted beside t0; the spans of a parent loop hang from the root")
	require.Equal(t, "turn 1", rows[2].Label)
	require.True(t, sk.Running)

	var many []store.SpanTurnFacts
	many = append(many, store.SpanTurnFacts{SpanID: "r", Name: "root", StartTime: 1, EndTime: 5000})
	for i := range 450 {
		many = append(many, store.SpanTurnFacts{SpanID: fmt.Sprint(i), ParentSpanID: s("r"), Name: "c", StartTime: int64(2 + i), EndTime: int64(3 + i)})
	}
	sk = buildSkeleton("t", many, 0)
	rows = sk.rows(-1, 0, 0, map[int32]bool{0: true}, -1)
	require.Len(t, rows, 1+childPage+1)
	require.Equal(t, childPage, rows[len(rows)-1].More)
	rows = sk.rows(0, 1, 400, nil, -1)
	require.Len(t, rows, 50)
}

// TestRunsListFiltersAndPages checks the filters and keyset paging of the runs table.
func TestRunsListFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true})
	ctx := context.Background()
	for i := range 5 {
		_, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a", Input: json.RawMessage(fmt.Sprintf(`{"n":"needle-%d"}`, i))})
		require.NoError(t, err)
	}
	_, err := b.store.RunCreate(ctx, store.RunCreateParams{Action: "/flow/b"})
	require.NoError(t, err)

	_, body := get(t, b.url+"/runs?limit=4", "Accept", "text/html")
	require.Equal(t, 4, strings.Count(body, "<tr data-run="))
	require.Contains(t, body, `rel="next"`)
	next := regexpFind(t, body, `href="(/runs\?[^"]+)" rel="next"`)
	_, body = get(t, b.url+strings.ReplaceAll(next, "&amp;", "&"), "Accept", "text/html")
	require.Equal(t, 2, strings.Count(body, "<tr data-run="))
	require.NotContains(t, body, `rel="next"`)

	_, body = get(t, b.url+"/runs?q=needle-3", "Accept", "text/html")
	require.Equal(t, 1, strings.Count(body, "<tr data-run="))
	_, body = get(t, b.url+"/runs?action=/flow/b&since=1h", "Accept", "text/html")
	require.Equal(t, 1, strings.Count(body, "<tr data-run="))
	resp, _ := get(t, b.url+"/runs?status=bogus", "Accept", "text/html")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestInboxResolveFormAndStaleForm resolves from the inbox form, then submits the same stale form
// again and gets who resolved it and when; an edit that breaks the schema is refused by the
// server too.
func TestInboxResolveFormAndStaleForm(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	run := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	it := b.pending(t, run.ID)

	_, body := get(t, b.url+"/inbox", "Accept", "text/html")
	require.Contains(t, body, "Confirm transfer of ¥500 to bob?")
	require.Contains(t, body, `data-interrupt="`+it.ID.String()+`"`)

	form := url.Values{"action": {"edit"}, "version": {fmt.Sprint(it.Version)}, "input": {`{"to":"bob","amount":-1,"currency":"JPY"}`}}
	resp, body := postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/resolve", form)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "Not resolved: input/amount")

	form.Set("action", "approve")
	form.Del("input") // the refused edit is dropped: changed arguments would make Approve an edit
	form.Set("comment", "fine")
	// A transfer moves an amount: the first submit is the confirmation step, nothing applied yet.
	resp, body = postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/resolve", form)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Confirm approve")
	form.Set("confirm", "1")
	resp, _ = postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/resolve", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	resp, body = postForm(t, noRedirect, b.url+"/inbox/"+it.ID.String()+"/resolve", form)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Regexp(t, `Already resolved by local at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(approved\)`, body)

	// The run page shows the decision inline, with its audit entry.
	b.startRun(t, "/flow/countdown", `{"from":1}`) // unrelated traffic
	require.Eventually(t, func() bool {
		r, err := b.store.RunGet(context.Background(), run.ID)
		require.NoError(t, err)
		return r.Status == store.RunSucceeded
	}, 30*time.Second, 20*time.Millisecond)
	_, body = get(t, b.url+"/runs/"+run.ID.String()+"?tab=conversation", "Accept", "text/html")
	require.Contains(t, body, `data-status="approved"`)
	require.Contains(t, body, "interrupt.approve")
	require.Contains(t, body, "“fine”")
}

// TestActionsPageStartsRuns: an action's page pre-fills its input from schema examples, starts a
// run and redirects to its page; invalid input comes back on the action's page with the reason.
func TestActionsPageStartsRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	_, body := get(t, b.url+"/actions/flow/countdown", "Accept", "text/html")
	require.Contains(t, body, "/flow/countdown")
	require.Contains(t, body, "&#34;from&#34;: 10", "the input is pre-filled from the schema's example")

	resp, body := postForm(t, noRedirect, b.url+"/actions/run", url.Values{"action": {"/flow/countdown"}, "input": {`{"from":0}`}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "Invalid input: input/from: must be ≥ 1", "the schema's bound in words")
	require.Contains(t, body, `data-action-page="/flow/countdown"`, "on the action's own page")

	// Without JavaScript the server's answer is the one a person reads: in words, not the
	// validator's "minLength: got 0, want 1".
	resp, body = postForm(t, noRedirect, b.url+"/actions/run", url.Values{"action": {"/flow/travelAgent"}, "input": {`{"destination":""}`}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "Invalid input: input/destination: must not be empty")
	require.Contains(t, body, `<div class="field-error" data-error-for="/destination">must not be empty</div>`, "and at the field it names")
	require.NotContains(t, body, "got 0, want 1")
	status, out := send(t, http.MethodPost, b.url+"/api/v1/runs", "application/json", `{"action":"/flow/travelAgent","input":{"destination":""}}`)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Equal(t, "input/destination: must not be empty", apiErrorOf(t, out).Error.Message)

	resp, _ = postForm(t, noRedirect, b.url+"/actions/run", url.Values{"action": {"/flow/countdown"}, "input": {`{"from":2}`}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Regexp(t, `^/runs/[0-9a-f-]{36}$`, resp.Header.Get("Location"))
}

// TestUsersPageIsAdminOnly: viewers and reviewers get 403, an admin creates a user, changes its
// role and disables it, and cannot demote themselves.
func TestUsersPageIsAdminOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false})
	ctx := context.Background()
	a := auth.New(b.store)
	_, err := a.AddUser(ctx, "root", "correct horse battery", store.RoleAdmin)
	require.NoError(t, err)
	_, err = a.AddUser(ctx, "rita", "correct horse battery", store.RoleReviewer)
	require.NoError(t, err)
	adminTok, err := a.CreateToken(ctx, "root", "t")
	require.NoError(t, err)
	ritaTok, err := a.CreateToken(ctx, "rita", "t")
	require.NoError(t, err)

	resp, _ := get(t, b.url+"/users", "Authorization", "Bearer "+ritaTok, "Accept", "text/html")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = get(t, b.url+"/users", "Accept", "text/html")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a sign-in page")
	require.Contains(t, resp.Request.URL.Path, "/login")

	bearer := &http.Client{Transport: bearerTransport(adminTok)}
	resp, body := postForm(t, bearer, b.url+"/users", url.Values{"username": {"vic"}, "role": {"viewer"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Added vic as viewer")
	require.Contains(t, body, `id="new-password"`)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), "no cache keeps the password")
	vic, err := b.store.UserGetByUsername(ctx, "vic")
	require.NoError(t, err)

	resp, body = postForm(t, bearer, b.url+"/users/"+vic.ID.String(), url.Values{"role": {"reviewer"}, "disabled": {"true"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	vic, err = b.store.UserGetByUsername(ctx, "vic")
	require.NoError(t, err)
	require.Equal(t, store.RoleReviewer, vic.Role)
	require.True(t, vic.Disabled)

	root, err := b.store.UserGetByUsername(ctx, "root")
	require.NoError(t, err)
	resp, body = postForm(t, bearer, b.url+"/users/"+root.ID.String(), url.Values{"role": {"viewer"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "cannot demote or disable yourself")
	resp, _ = postForm(t, &http.Client{Transport: bearerTransport(ritaTok)}, b.url+"/users", url.Values{"username": {"x"}, "role": {"admin"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r.Header.Set("Authorization", "Bearer "+string(b))
	r.Header.Set("Accept", "text/html")
	return http.DefaultTransport.RoundTrip(r)
}

// TestWebSocketNeedsSignInAndSameOrigin: /ws is behind the same authentication as the pages, and
// refuses another site's page.
func TestWebSocketNeedsSignInAndSameOrigin(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false, stack: true})
	req, err := http.NewRequest(http.MethodGet, b.url+"/ws", nil)
	require.NoError(t, err)
	for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.NotEqual(t, http.StatusSwitchingProtocols, resp.StatusCode)
	require.Contains(t, []int{http.StatusSeeOther, http.StatusUnauthorized}, resp.StatusCode)

	ctx := context.Background()
	_, err = auth.New(b.store).AddUser(ctx, "v", "correct horse battery", store.RoleViewer)
	require.NoError(t, err)
	tok, err := auth.New(b.store).CreateToken(ctx, "v", "t")
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Origin", "http://evil.example")
	resp, err = noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	req.Header.Set("Origin", b.url)
	resp, err = noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
}

func regexpFind(t *testing.T, s, expr string) string {
	t.Helper()
	m := regexpMust(expr).FindStringSubmatch(s)
	require.NotNil(t, m, "no match for %s", expr)
	return m[1]
}

func regexpMust(expr string) *regexp.Regexp { return regexp.MustCompile(expr) }

// waitStatus waits until a run reaches status, and returns it.
func (b *bundle) waitStatus(t testing.TB, runID uuid.UUID, status string) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = b.store.RunGet(context.Background(), runID)
		require.NoError(t, err)
		return run.Status == status
	}, 30*time.Second, 20*time.Millisecond, "run %s never reached %s", runID, status)
	return run
}
