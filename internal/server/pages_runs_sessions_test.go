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
		browsertest.Click(`[data-testid="group-toggle"]`),
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
		browsertest.Click(`tbody.run-group[data-session="chat-ada"] .group-head a`),
		chromedp.WaitVisible(`input[name="session"]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("tr[data-run]")].map(r => r.dataset.run)`, &listed),
	))
	require.ElementsMatch(t, []string{ids[0].String(), ids[2].String()}, listed, "a session's link lists its runs alone")
	require.Empty(t, br.Problems())
}

// TestBrowserRunsListGroupsAGenkitSessionByThread: a Genkit session holds chat threads
// (genkit:threadName beside genkit:sessionId), each its own conversation: grouped, the runs of one
// session in threads "main" and "other" are two groups, each saying its thread, and a group's link
// lists its thread's runs alone, while the session's filter without a thread lists them all.
func TestBrowserRunsListGroupsAGenkitSessionByThread(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{dev: true, stack: true})
	ctx := context.Background()
	svc, err := trace.NewService(trace.Config{Store: b.store})
	require.NoError(t, err)
	t.Cleanup(svc.Close)
	type conv struct{ session, thread string }
	var ids []uuid.UUID
	for i, c := range []conv{{"chat-ada", "main"}, {"chat-ada", "other"}, {"chat-ada", "main"}, {"chat-bob", ""}} {
		run := b.startRun(t, "/flow/countdown", `{"from":1}`, store.RunSucceeded)
		ids = append(ids, run.ID)
		attrs := map[string]any{trace.AttrRunID: run.ID.String(), "genkit:name": "send", "genkit:sessionId": c.session}
		if c.thread != "" {
			attrs["genkit:threadName"] = c.thread
		}
		raw, err := json.Marshal(attrs)
		require.NoError(t, err)
		now := time.Now().UnixNano()
		_, err = svc.Ingest(ctx, store.SpanSourceGenkit, []store.Span{{TraceID: fmt.Sprintf("%032x", i+1), SpanID: fmt.Sprintf("%016x", i+1),
			Name: "send", StartTime: now, EndTime: now + 1000, Attributes: raw, Resource: json.RawMessage(`{}`), RunID: &run.ID,
			Source: store.SpanSourceGenkit}})
		require.NoError(t, err)
	}
	type group struct {
		Session, Thread, Label string
		Runs                   []string
	}
	var groups []group
	br := browsertest.New(t)
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs?group=session"),
		chromedp.WaitVisible(`tbody.run-group`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("tbody.run-group")].map(g => ({Session: g.dataset.session, Thread: g.dataset.thread,
			Label: (g.querySelector('[data-testid="group-thread"]') || {}).textContent || "",
			Runs: [...g.querySelectorAll("tr[data-run]")].map(r => r.dataset.run)}))`, &groups),
	))
	byConv := map[conv]group{}
	for _, g := range groups {
		byConv[conv{g.Session, g.Thread}] = g
	}
	require.Len(t, byConv, 3, "chat-ada's two threads and chat-bob: %+v", groups)
	require.ElementsMatch(t, []string{ids[0].String(), ids[2].String()}, byConv[conv{"chat-ada", "main"}].Runs)
	require.Equal(t, "main", byConv[conv{"chat-ada", "main"}].Label, "the group says its thread")
	require.Equal(t, []string{ids[1].String()}, byConv[conv{"chat-ada", "other"}].Runs)
	require.Equal(t, "other", byConv[conv{"chat-ada", "other"}].Label)
	require.Equal(t, []string{ids[3].String()}, byConv[conv{"chat-bob", ""}].Runs)
	require.Empty(t, byConv[conv{"chat-bob", ""}].Label, "a session without threads names none")

	var listed []string
	var thread string
	require.NoError(t, chromedp.Run(br.Ctx,
		browsertest.Click(`tbody.run-group[data-session="chat-ada"][data-thread="other"] .group-head a`),
		chromedp.WaitVisible(`input[name="thread"]`, chromedp.ByQuery),
		chromedp.Value(`input[name="thread"]`, &thread, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("tr[data-run]")].map(r => r.dataset.run)`, &listed),
	))
	require.Equal(t, "other", thread, "the thread is kept in the form")
	require.Equal(t, []string{ids[1].String()}, listed, "a thread's link lists its runs alone")
	require.NoError(t, chromedp.Run(br.Ctx,
		chromedp.Navigate(b.url+"/runs?session=chat-ada"),
		chromedp.WaitVisible(`input[name="session"]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("tr[data-run]")].map(r => r.dataset.run)`, &listed),
	))
	require.ElementsMatch(t, []string{ids[0].String(), ids[1].String(), ids[2].String()}, listed, "the session, every thread of it")
	// A conversation's list does not follow new runs live: they are not of that conversation (the
	// live list prepends every new run).
	for _, u := range []string{"/runs?session=chat-ada", "/runs?session=chat-ada&thread=other"} {
		_, body := get(t, b.url+u, "Accept", "text/html")
		require.NotContains(t, body, `data-topic="runs"`, u)
	}
	_, body := get(t, b.url+"/runs", "Accept", "text/html")
	require.Contains(t, body, `data-topic="runs"`, "the whole list follows new runs")
	require.Empty(t, br.Problems())
}
