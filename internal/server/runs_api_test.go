package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// call sends a JSON request and decodes the JSON answer.
func call(t *testing.T, method, url, body string, out any, header ...string) int {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), string(raw))
	}
	return resp.StatusCode
}

type apiError struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func TestAPIRunLifecycleThroughInterruptResolution(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	var run store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
		`{"action":"transferMoney","input":{"to":"bob","amount":500,"currency":"CNY"}}`, &run))
	require.Equal(t, "/flow/transferMoney", run.Action)
	require.Equal(t, store.RunQueued, run.Status)

	var list struct {
		Interrupts []store.Interrupt `json:"interrupts"`
	}
	require.Eventually(t, func() bool {
		call(t, "GET", b.url+"/api/v1/interrupts?status=pending", "", &list)
		return len(list.Interrupts) == 1
	}, 30*time.Second, 20*time.Millisecond)
	it := list.Interrupts[0]
	require.Equal(t, run.ID, it.RunID)
	require.Equal(t, "transfer", it.Tool)
	require.JSONEq(t, `{"message":"Confirm transfer of ¥500 to bob?"}`, string(it.Metadata))

	var e apiError
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", b.url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"edit","input":{"to":"bob","amount":-1,"currency":"CNY"}}`, &e))
	require.Equal(t, "input/amount", e.Error.Details["field"])

	// Decisions that would lose or garble what the reviewer meant are refused, and write nothing.
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", b.url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"approve","input":{"to":"bob","amount":5,"currency":"CNY"}}`, &e))
	require.Equal(t, "input", e.Error.Details["field"])
	require.Contains(t, e.Error.Message, `use "edit" to change the arguments`)
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", b.url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"deny","output":12}`, &e))
	require.Equal(t, "output", e.Error.Details["field"])
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", b.url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"deny","comment":"`+strings.Repeat("x", 17<<10)+`"}`, &e))
	require.Equal(t, "comment", e.Error.Details["field"])
	require.Equal(t, http.StatusUnprocessableEntity, call(t, "POST", b.url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"approve","version":-1}`, &e), "no interrupt has a negative version: a bad request, not a stale one")
	require.Equal(t, "version", e.Error.Details["field"])
	require.Contains(t, e.Error.Message, "version: must be ≥ 1")

	var resolved store.Interrupt
	require.Equal(t, http.StatusOK, call(t, "POST", b.url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"approve","comment":"ok","version":1}`, &resolved))
	require.Equal(t, store.InterruptApproved, resolved.Status)
	require.Equal(t, http.StatusConflict, call(t, "POST", b.url+"/api/v1/interrupts/"+it.ID.String()+"/resolve",
		`{"action":"deny"}`, &e))
	require.Contains(t, e.Error.Message, "already approved by local")
	require.Equal(t, "local", e.Error.Details["resolved_by"])

	var detail struct {
		store.Run
		Messages   []store.RunMessage `json:"messages"`
		Interrupts []store.Interrupt  `json:"interrupts"`
		ToolCalls  []store.ToolCall   `json:"tool_calls"`
	}
	require.Eventually(t, func() bool {
		call(t, "GET", b.url+"/api/v1/runs/"+run.ID.String(), "", &detail)
		return detail.Status == store.RunSucceeded
	}, 30*time.Second, 20*time.Millisecond)
	require.Contains(t, string(detail.Output), "Done: sent 500 CNY to bob")
	require.Len(t, detail.ToolCalls, 1)
	require.Len(t, detail.Interrupts, 1)
	require.NotEmpty(t, detail.Messages)

	var chunks struct {
		Chunks []store.RunChunk `json:"chunks"`
	}
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+run.ID.String()+"/chunks?after=0", "", &chunks))
	require.NotEmpty(t, chunks.Chunks)
	last := chunks.Chunks[len(chunks.Chunks)-1].Seq
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs/"+run.ID.String()+"/chunks?after="+itoa(last), "", &chunks))
	require.Empty(t, chunks.Chunks, "nothing after the last sequence number")

	require.Equal(t, http.StatusConflict, call(t, "POST", b.url+"/api/v1/runs/"+run.ID.String()+"/cancel", "", &e),
		"a finished run cannot be cancelled")
}

func TestAPIRunListPagingAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	for i := range 5 {
		require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
			`{"action":"countdown","input":{"from":`+itoa(int64(i+1))+`}}`, nil))
	}
	var page struct {
		Runs       []store.Run `json:"runs"`
		NextCursor *string     `json:"next_cursor"`
	}
	seen := map[string]bool{}
	url := b.url + "/api/v1/runs?limit=2&action=/flow/countdown"
	for {
		require.Equal(t, http.StatusOK, call(t, "GET", url, "", &page))
		for _, r := range page.Runs {
			seen[r.ID.String()] = true
		}
		if page.NextCursor == nil {
			break
		}
		url = b.url + "/api/v1/runs?limit=2&action=/flow/countdown&cursor=" + *page.NextCursor
	}
	require.Len(t, seen, 5)
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs?q=%22from%22%3A+3&since=1h", "", &page))
	require.Len(t, page.Runs, 1)

	var e apiError
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs?limit=1", "", &page))
	require.NotNil(t, page.NextCursor)
	for bad, field := range map[string]string{"status=done": "status", "limit=0": "limit", "limit=x": "limit", "since=yesterday": "since",
		"cursor=!!": "cursor", "sort=speed": "sort", "dir=up": "dir", "sort=tokens&cursor=" + *page.NextCursor: "cursor"} {
		require.Equal(t, http.StatusBadRequest, call(t, "GET", b.url+"/api/v1/runs?"+bad, "", &e), bad)
		require.NotEmpty(t, e.Error.Message)
		require.Equal(t, field, e.Error.Details["field"], bad)
	}
	// A forged cursor of the right shape is a 400 too, never a database error.
	forged := base64.RawURLEncoding.EncodeToString([]byte("tokens|desc|" + uuid.NewString() + "|lots"))
	require.Equal(t, http.StatusBadRequest, call(t, "GET", b.url+"/api/v1/runs?sort=tokens&cursor="+forged, "", &e))
	require.Equal(t, "cursor", e.Error.Details["field"])

	// Sorted by tokens, largest first, paging through every run once.
	var sorted []store.Run
	url = b.url + "/api/v1/runs?limit=2&sort=tokens"
	for {
		require.Equal(t, http.StatusOK, call(t, "GET", url, "", &page))
		sorted = append(sorted, page.Runs...)
		if page.NextCursor == nil {
			break
		}
		url = b.url + "/api/v1/runs?limit=2&sort=tokens&cursor=" + *page.NextCursor
	}
	require.NotEmpty(t, sorted)
	for i := 1; i < len(sorted); i++ {
		require.GreaterOrEqual(t, sorted[i-1].InputTokens+sorted[i-1].OutputTokens, sorted[i].InputTokens+sorted[i].OutputTokens)
	}
}

func TestAPIClientMistakesAre4xxWithClearMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	cases := []struct {
		method, path, body string
		status             int
		contains           string
	}{
		{"POST", "/api/v1/runs", `{"action":"nope"}`, 400, "not registered"},
		{"POST", "/api/v1/runs", `{"action":"transferMoney","input":{"to":"bob"}}`, 422, "input"},
		{"POST", "/api/v1/runs", `{"action":"transferMoney","inputs":{}}`, 400, `unknown field "inputs"`},
		{"POST", "/api/v1/runs", `{"action":`, 400, "invalid JSON"},
		{"POST", "/api/v1/runs", ``, 400, "JSON body"},
		{"GET", "/api/v1/runs/not-a-uuid", ``, 400, "not a valid id"},
		{"GET", "/api/v1/runs/00000000-0000-0000-0000-000000000000", ``, 404, "not found"},
		{"POST", "/api/v1/interrupts/00000000-0000-0000-0000-000000000000/resolve", `{"action":"approve"}`, 404, "not found"},
		{"GET", "/api/v1/interrupts?status=weird", ``, 400, "status"},
		{"GET", "/api/v1/interrupts?limit=501", ``, 400, "limit"},
		{"GET", "/api/v1/interrupts?cursor=zzz", ``, 400, "cursor"},
		{"GET", "/api/v1/runs/00000000-0000-0000-0000-000000000000/chunks?after=-1", ``, 400, "after"},
	}
	for _, tc := range cases {
		var e apiError
		require.Equal(t, tc.status, call(t, tc.method, b.url+tc.path, tc.body, &e), "%s %s %s", tc.method, tc.path, tc.body)
		require.Contains(t, e.Error.Message, tc.contains, "%s %s", tc.method, tc.path)
	}
	var all struct {
		Runs []store.Run `json:"runs"`
	}
	call(t, "GET", b.url+"/api/v1/runs", "", &all)
	require.Empty(t, all.Runs, "rejected requests wrote nothing")
}

func TestAPIActionsListsSchemas(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	var out struct {
		Actions []struct {
			Key         string          `json:"key"`
			Type        string          `json:"type"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"actions"`
	}
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/actions", "", &out))
	keys := map[string]json.RawMessage{}
	for _, a := range out.Actions {
		keys[a.Key] = a.InputSchema
	}
	for _, k := range []string{"/flow/travelAgent", "/flow/transferMoney", "/flow/countdown", "/flow/researchAgent", "/tool/transfer", "/util/generate"} {
		require.Contains(t, keys, k)
	}
	require.Contains(t, string(keys["/flow/transferMoney"]), `"currency"`)
}

func TestAPIRolesEnforced(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: false, runs: true})
	viewer := b.userToken(t, "vic", store.RoleViewer)
	reviewer := b.userToken(t, "rev", store.RoleReviewer)
	var e apiError
	require.Equal(t, http.StatusForbidden, call(t, "POST", b.url+"/api/v1/runs", `{"action":"countdown","input":{"from":1}}`, &e,
		"Authorization", "Bearer "+viewer))
	require.Contains(t, e.Error.Message, "reviewer")
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/runs", "", nil, "Authorization", "Bearer "+viewer))
	var run store.Run
	require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs", `{"action":"countdown","input":{"from":1}}`, &run,
		"Authorization", "Bearer "+reviewer))
	require.Equal(t, "rev", *run.CreatedBy)
}

func TestGenkitReflectionRunAction(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	var actions map[string]json.RawMessage
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/actions", "", &actions))
	require.Contains(t, actions, "/flow/countdown")

	var res struct {
		Result json.RawMessage `json:"result"`
	}
	require.Equal(t, http.StatusOK, call(t, "POST", b.url+"/api/runAction", `{"key":"/flow/countdown","input":{"from":2}}`, &res))
	require.JSONEq(t, `"liftoff"`, string(res.Result))

	req, err := http.NewRequest("POST", b.url+"/api/runAction?stream=true", strings.NewReader(`{"key":"/flow/countdown","input":{"from":2}}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	require.Equal(t, []string{`{"n":2}`, `{"n":1}`}, lines[:2], "chunks stream as NDJSON")
	require.Contains(t, lines[2], `"result":"liftoff"`)
}

// TestAPIInterruptListPages: the interrupt list pages by cursor, so that no pending interrupt is
// out of reach however many wait.
func TestAPIInterruptListPages(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	for i := range 3 {
		require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
			fmt.Sprintf(`{"action":"transferMoney","input":{"to":"p%d","amount":5,"currency":"EUR"}}`, i), nil))
	}
	type page struct {
		Interrupts []store.Interrupt `json:"interrupts"`
		NextCursor *string           `json:"next_cursor"`
	}
	var all page
	require.Eventually(t, func() bool {
		call(t, "GET", b.url+"/api/v1/interrupts?status=pending", "", &all)
		return len(all.Interrupts) == 3
	}, 30*time.Second, 20*time.Millisecond)
	require.Nil(t, all.NextCursor)
	var p1, p2 page
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/interrupts?status=pending&limit=2", "", &p1))
	require.Len(t, p1.Interrupts, 2)
	require.NotNil(t, p1.NextCursor)
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/interrupts?status=pending&limit=2&cursor="+*p1.NextCursor, "", &p2))
	require.Len(t, p2.Interrupts, 1)
	require.Nil(t, p2.NextCursor)
	require.Equal(t, all.Interrupts[2].ID, p2.Interrupts[0].ID)
}

// TestAPIInterruptListDefaultsToPending: without status the list is the pending interrupts, as
// `devui interrupts list` is; status=all and an empty status= list every status.
func TestAPIInterruptListDefaultsToPending(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, runs: true})
	for i := range 2 {
		require.Equal(t, http.StatusCreated, call(t, "POST", b.url+"/api/v1/runs",
			fmt.Sprintf(`{"action":"transferMoney","input":{"to":"p%d","amount":5,"currency":"EUR"}}`, i), nil))
	}
	var list struct {
		Interrupts []store.Interrupt `json:"interrupts"`
	}
	require.Eventually(t, func() bool {
		call(t, "GET", b.url+"/api/v1/interrupts?status=pending", "", &list)
		return len(list.Interrupts) == 2
	}, 30*time.Second, 20*time.Millisecond)
	first := list.Interrupts[0]
	require.Equal(t, http.StatusOK, call(t, "POST", b.url+"/api/v1/interrupts/"+first.ID.String()+"/resolve", `{"action":"approve"}`, nil))
	for q, want := range map[string]int{"": 1, "?status=all": 2, "?status=": 2, "?status=approved": 1} {
		require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/interrupts"+q, "", &list), q)
		require.Len(t, list.Interrupts, want, q)
	}
	require.Equal(t, http.StatusOK, call(t, "GET", b.url+"/api/v1/interrupts", "", &list))
	require.Equal(t, store.InterruptPending, list.Interrupts[0].Status)
	require.NotEqual(t, first.ID, list.Interrupts[0].ID, "a resolved interrupt is not in the default list")
}
