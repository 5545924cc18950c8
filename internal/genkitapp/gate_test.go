package genkitapp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/genkitapp/genkitapptest"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// outbox reads the lines the app's acting tools (sendEmail, postMemo) wrote, one per call.
func outbox(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestGatesHoldAnAppsToolsUntilDecided runs prompts of a real Genkit JS app durably, whose tools
// act in the app (each call appends a line to a file): a policy's gate rule on sendEmail, and
// postMemo's own loupe.requireApproval metadata, stop each call before the app runs it. While the
// interrupt waits nothing has run; approving runs it once, editing runs it once with the
// reviewer's arguments, denying never runs it and the model reads the denial. A prompt whose tool
// no gate matches runs it at once, while gates are in force, and one that interrupts by itself
// still interrupts.
func TestGatesHoldAnAppsToolsUntilDecided(t *testing.T) {
	t.Parallel()
	dir := genkitapptest.Project(t)
	box := filepath.Join(t.TempDir(), "outbox")
	genkitapptest.Start(t, dir, "gates", "OUTBOX="+box)
	b := setup(t, dir)
	ctx := context.Background()
	_, _, err := runs.SavePolicy(ctx, b.store, []byte(`rules:
  - name: mail-leaves
    gate: tool == "sendEmail" && !input.to.endsWith("@corp.example")
    reason: e-mail leaves the company
`), "test", "admin")
	require.NoError(t, err)
	b.waitLive(t, "gates")

	email := genkitapp.Key("gates", "/prompt/emailPrompt")
	approved := b.start(t, email, `{"to":"ann@out.example"}`)
	edited := b.start(t, email, `{"to":"bob@out.example"}`)
	denied := b.start(t, email, `{"to":"eve@out.example"}`)
	memo := b.start(t, genkitapp.Key("gates", "/prompt/memoPrompt"), `{"text":"lunch"}`)
	for _, r := range []*store.Run{approved, edited, denied, memo} {
		b.wait(t, r.ID, store.RunInterrupted)
	}
	require.Empty(t, outbox(t, box), "no gated tool ran while its interrupt waits")

	it := b.pending(t, approved.ID)
	require.Equal(t, "sendEmail", it.Tool)
	require.JSONEq(t, `{"to":"ann@out.example","subject":"hello"}`, string(it.Input))
	var md map[string]any
	require.NoError(t, json.Unmarshal(it.Metadata, &md))
	require.Equal(t, "required", md["approval"])
	require.Equal(t, "e-mail leaves the company", md["message"])
	require.Equal(t, "mail-leaves", md["policy"].(map[string]any)["rule"])
	memoIt := b.pending(t, memo.ID)
	require.Equal(t, "postMemo", memoIt.Tool)
	require.Contains(t, string(memoIt.Metadata), "asks for approval before it runs")

	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	b.wait(t, approved.ID, store.RunSucceeded)
	require.Equal(t, []string{"sendEmail ann@out.example hello"}, outbox(t, box), "approving ran the tool once")
	require.Equal(t, `Done: sendEmail={"sent":true,"to":"ann@out.example"}`, b.lastText(t, approved.ID))

	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, edited.ID).ID, Action: runs.ActionEdit,
		Input: json.RawMessage(`{"to":"bob@corp.example","subject":"edited"}`), Actor: "rita"})
	require.NoError(t, err)
	b.wait(t, edited.ID, store.RunSucceeded)
	require.Equal(t, []string{"sendEmail ann@out.example hello", "sendEmail bob@corp.example edited"}, outbox(t, box),
		"editing ran the tool once, with the reviewer's arguments")
	require.Equal(t, `Done: sendEmail={"sent":true,"to":"bob@corp.example"}`, b.lastText(t, edited.ID))

	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: b.pending(t, denied.ID).ID, Action: runs.ActionDeny, Comment: "not to them", Actor: "rita"})
	require.NoError(t, err)
	b.wait(t, denied.ID, store.RunSucceeded)
	require.Contains(t, b.lastText(t, denied.ID), `"denied":true`, "the model reads the denial")
	require.Contains(t, b.lastText(t, denied.ID), `"reason":"not to them"`)

	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: memoIt.ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	b.wait(t, memo.ID, store.RunSucceeded)
	require.Equal(t, `Done: postMemo={"posted":true}`, b.lastText(t, memo.ID))

	// An e-mail inside the company matches no gate: the app's tool runs at once, once.
	inside := b.start(t, email, `{"to":"cy@corp.example"}`)
	b.wait(t, inside.ID, store.RunSucceeded)
	require.Equal(t, `Done: sendEmail={"sent":true,"to":"cy@corp.example"}`, b.lastText(t, inside.ID))
	require.Equal(t, []string{"sendEmail ann@out.example hello", "sendEmail bob@corp.example edited",
		"postMemo Post this memo: lunch", "sendEmail cy@corp.example hello"}, outbox(t, box),
		"the denied call never ran, and each other call ran once")
	msgs, err := b.store.MessageList(ctx, inside.ID)
	require.NoError(t, err)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []string{"user", "model", "tool", "model"}, roles, "the run's history is the whole conversation")

	// While gates are in force, an app's tool that interrupts by itself (transferMoney, until it is
	// restarted) still stops the run when Loupe calls it, and approving it restarts it in the app.
	wire := b.start(t, genkitapp.Key("gates", "/prompt/wirePrompt"), `{"to":"Eve","amount":7}`)
	b.wait(t, wire.ID, store.RunInterrupted)
	wireIt := b.pending(t, wire.ID)
	require.Equal(t, "transferMoney", wireIt.Tool)
	_, err = b.runs.Resolve(ctx, runs.ResolveParams{InterruptID: wireIt.ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	b.wait(t, wire.ID, store.RunSucceeded)
	require.Equal(t, `Done: transferMoney={"done":true,"to":"Eve","amount":7}`, b.lastText(t, wire.ID))
}
