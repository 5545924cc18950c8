package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// TestRunPageQueriesDoNotGrowWithInterrupts: the run page shows each interrupt with its own audit
// entries, in order, and costs as many queries for a run with four interrupts as for a run with one.
func TestRunPageQueriesDoNotGrowWithInterrupts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, log, _ := tracedStore(t)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: true, Version: "test"}, Deps{Store: st})
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	url := "http://" + srv.Addr()

	type interrupt struct {
		id      uuid.UUID
		actions []string
	}
	// seed creates a run with one interrupt per entry of audits, each with that many audit entries.
	seed := func(n int, audits ...int) (uuid.UUID, []interrupt) {
		run, err := st.RunCreate(ctx, store.RunCreateParams{Action: fmt.Sprintf("/flow/run%d", n)})
		require.NoError(t, err)
		var out []interrupt
		for i := range audits {
			created, err := st.InterruptCreate(ctx, []store.InterruptCreateParams{{RunID: run.ID, Turn: 0,
				Tool: fmt.Sprintf("tool%d", i), Ref: fmt.Sprintf("ref%d", i), Input: json.RawMessage(`{}`)}})
			require.NoError(t, err)
			out = append(out, interrupt{id: created[0].ID})
		}
		// Entries are written round-robin so that each interrupt's entries interleave with others'.
		for j := range 3 {
			for i, count := range audits {
				if j >= count {
					continue
				}
				action := fmt.Sprintf("interrupt.step-%d-%d-%d", n, i, j)
				require.NoError(t, st.AuditInsert(ctx, "ann", action, "interrupt", out[i].id.String(), map[string]any{"step": j}))
				out[i].actions = append(out[i].actions, action)
			}
		}
		return run.ID, out
	}
	page := func(path string) (string, int) {
		t.Helper()
		log.take()
		resp, body := get(t, url+path, "Accept", "text/html")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return body, len(log.take())
	}
	requireCard := func(body string, it interrupt) {
		t.Helper()
		start := strings.Index(body, `id="interrupt-`+it.id.String()+`"`)
		require.NotEqual(t, -1, start, "interrupt %s is shown", it.id)
		card := body[start+1:]
		if end := strings.Index(card, `class="interrupt-card"`); end >= 0 {
			card = card[:end]
		}
		if len(it.actions) == 0 {
			require.NotContains(t, card, "audit log", "interrupt %s has no audit entries", it.id)
			return
		}
		require.Contains(t, card, fmt.Sprintf("audit log (%d)", len(it.actions)))
		require.Equal(t, len(it.actions), strings.Count(card, "<code>interrupt.step-"), "only its own entries")
		last := -1
		for _, action := range it.actions {
			at := strings.Index(card, "<code>"+action+"</code>")
			require.Greater(t, at, last, "entry %s is shown, oldest first", action)
			last = at
		}
	}

	oneRun, one := seed(0, 2)
	manyRun, many := seed(1, 1, 0, 3, 2)
	for _, path := range []string{"?tab=conversation", "/sections?tab=conversation"} {
		body, oneCount := page("/runs/" + oneRun.String() + path)
		requireCard(body, one[0])
		body, manyCount := page("/runs/" + manyRun.String() + path)
		for _, it := range many {
			requireCard(body, it)
		}
		require.Equal(t, oneCount, manyCount, "the queries of /runs/{id}%s must not grow with its interrupts", path)
	}
}

// TestLedgerShowsAReviewersDenialNotACompletedCall: a transfer that the reviewer denied did not
// run; its row in the run page's tool ledger says so ("denied by alice: the tool did not run",
// badge "denied"), instead of the ledger's raw "completed" (answered by a reviewer), and a call
// run after an approval says who approved it.
func TestLedgerShowsAReviewersDenialNotACompletedCall(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	ledgerRowHTML := func(body, ref string) string {
		t.Helper()
		i := strings.Index(body, `<tr data-ref="`+ref+`">`)
		require.GreaterOrEqual(t, i, 0, "no ledger row for %s", ref)
		j := strings.Index(body[i:], "</tr>")
		require.Greater(t, j, 0)
		return body[i : i+j]
	}

	denied := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	it := b.pending(t, denied.ID)
	_, err := b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionDeny, Actor: "alice", Comment: "not today"})
	require.NoError(t, err)
	b.waitStatus(t, denied.ID, store.RunSucceeded)
	_, body := get(t, b.url+"/runs/"+denied.ID.String()+"?tab=ledger", "Accept", "text/html")
	row := ledgerRowHTML(body, it.Ref)
	require.Contains(t, row, `data-status="denied"`)
	require.Contains(t, row, "denied by alice: the tool did not run")
	require.NotContains(t, row, `data-status="completed"`)

	approved := b.startRun(t, "/flow/transferMoney", `{"to":"bob","amount":500,"currency":"JPY"}`, store.RunInterrupted)
	it = b.pending(t, approved.ID)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "alice"})
	require.NoError(t, err)
	b.waitStatus(t, approved.ID, store.RunSucceeded)
	_, body = get(t, b.url+"/runs/"+approved.ID.String()+"?tab=ledger", "Accept", "text/html")
	row = ledgerRowHTML(body, it.Ref)
	require.Contains(t, row, `data-status="completed"`)
	require.Contains(t, row, "executed, approved by alice")
}
