package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// TestBrowserRunsListGroupsBySession: runs whose traces name a conversation (Genkit's
// genkit:sessionId, the GenAI conventions' gen_ai.conversation.id) say so on the runs list, which
// groups them by session, as Langfuse groups sessions; a session's link lists its runs alone.
func TestBrowserRunsListGroupsBySession(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	svc, err := trace.NewService(trace.Config{Store: b.store})
	require.NoError(t, err)
	t.Cleanup(svc.Close)
	var ids []uuid.UUID
	for i, session := range []string{"chat-ada", "chat-bob", "chat-ada", ""} {
		run := b.startRun(t, "/flow/countdown", `{"from":1}`, store.RunSucceeded)
		ids = append(ids, run.ID)
		attrs := map[string]any{trace.AttrRunID: run.ID.String(), "genkit:name": "chat"}
		switch {
		case session != "" && i == 2:
			attrs["gen_ai.conversation.id"] = session // the GenAI conventions' name for it
		case session != "":
			attrs["genkit:sessionId"] = session
		}
		raw, err := json.Marshal(attrs)
		require.NoError(t, err)
		now := time.Now().UnixNano()
		_, err = svc.Ingest(ctx, store.SpanSourceGenkit, []store.Span{{TraceID: fmt.Sprintf("%032x", i+1), SpanID: fmt.Sprintf("%016x", i+1),
			Name: "chat", StartTime: now, EndTime: now + 1000, Attributes: raw, Resource: json.RawMessage(`{}`), RunID: &run.ID,
			Source: store.SpanSourceGenkit}})
		require.NoError(t, err)
	}
	br := browsertest.New(t)
	var groups []struct {
		Session string
		Runs    []string
	}
	var toggle string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs"),
		chromedp.WaitVisible(`[data-testid="group-toggle"]`, chromedp.ByQuery),
		chromedp.Text(`[data-testid="group-toggle"]`, &toggle, chromedp.ByQuery),
		chromedp.Click(`[data-testid="group-toggle"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`tbody.run-group`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("tbody.run-group")].map(g => ({Session: g.dataset.session, Runs: [...g.querySelectorAll("tr[data-run]")].map(r => r.dataset.run)}))`, &groups),
	))
	require.Equal(t, "group by session", toggle)
	require.Len(t, groups, 3, "chat-ada, chat-bob, and the run without a session: %+v", groups)
	bySession := map[string][]string{}
	for _, g := range groups {
		bySession[g.Session] = g.Runs
	}
	require.ElementsMatch(t, []string{ids[0].String(), ids[2].String()}, bySession["chat-ada"], "genkit:sessionId and gen_ai.conversation.id group alike")
	require.Equal(t, []string{ids[1].String()}, bySession["chat-bob"])
	require.Equal(t, []string{ids[3].String()}, bySession[""])

	var listed []string
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Click(`tbody.run-group[data-session="chat-ada"] .group-head a`, chromedp.ByQuery),
		chromedp.WaitVisible(`input[name="session"]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("tr[data-run]")].map(r => r.dataset.run)`, &listed),
	))
	require.ElementsMatch(t, []string{ids[0].String(), ids[2].String()}, listed, "a session's link lists its runs alone")
	require.Empty(t, br.Problems())
}
