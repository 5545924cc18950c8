package runs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// promptFileDesk is a .prompt file run durably: its front matter names the model and a refund
// tool that asks a reviewer first.
const promptFileDesk = `---
model: pf/desk
description: The refund desk.
input:
  schema:
    order: integer
tools: [pfRefund]
---
{{role "system"}}
You handle refunds.
{{role "user"}}
Refund order {{order}}.
`

// TestRunOfAPromptFileInterruptsAndResumes runs /prompt/pfDesk, loaded from a file, through the
// run service on PostgreSQL: its model (from the front matter) calls the file's tool, which
// interrupts; after the reviewer approves, the run resumes with the prompt's model and tool and
// succeeds, and the stored history starts with the file's rendered system and user messages.
func TestRunOfAPromptFileInterruptsAndResumes(t *testing.T) {
	t.Parallel()
	rb := &replayBundle{bundle: setup(t, 0)}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pfDesk.prompt"), []byte(promptFileDesk), 0o644))
	reg := engine.NewRegistry()
	var refunds atomic.Int64
	engine.DefineTool(reg, "pfRefund", "Refunds an order once a person approves.", func(tc *engine.ToolContext, in struct {
		Order int `json:"order"`
	}) (string, error) {
		if !tc.IsResumed() {
			return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": "refund?"}})
		}
		refunds.Add(1)
		return "refunded", nil
	})
	var seen atomic.Pointer[engine.ModelRequest]
	scripted.DefineFunc(reg, "pf/desk", func(req *engine.ModelRequest) (scripted.Turn, error) {
		seen.Store(req)
		last := req.Messages[len(req.Messages)-1]
		if last.Role == engine.RoleTool {
			return scripted.Text("order refunded"), nil
		}
		return scripted.Reply(scripted.ToolCall("pfRefund", "r1", map[string]any{"order": 42})), nil
	})
	_, err := engine.LoadPromptDir(reg, dir)
	require.NoError(t, err)
	svc, err := runs.New(runs.Config{Workers: 2, LeaseTTL: time.Second, Logger: testLogger()}, rb.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	rb.svc = svc

	run, err := svc.StartRun(context.Background(), runs.StartParams{Action: "/prompt/pfDesk", Input: json.RawMessage(`{"order":42}`)})
	require.NoError(t, err)
	run = rb.settle(t, run.ID, store.RunInterrupted)
	pending := rb.pending(t, run.ID)
	require.Len(t, pending, 1)
	require.Equal(t, "pfRefund", pending[0].Tool)
	require.Zero(t, refunds.Load(), "the tool waits for the reviewer")

	rb.resolve(t, pending[0], runs.ActionApprove, "")
	done := rb.settle(t, run.ID, store.RunSucceeded)
	var out struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(done.Output, &out))
	require.Equal(t, "order refunded", out.Text)
	require.EqualValues(t, 1, refunds.Load())

	msgs := rb.messages(t, run.ID)
	require.GreaterOrEqual(t, len(msgs), 4)
	var first, second engine.Message
	require.NoError(t, json.Unmarshal(msgs[0].Content, &first))
	require.NoError(t, json.Unmarshal(msgs[1].Content, &second))
	require.Equal(t, engine.RoleSystem, first.Role)
	require.Equal(t, "You handle refunds.", strings.TrimSpace(first.Text()))
	require.Equal(t, engine.RoleUser, second.Role)
	require.Equal(t, "Refund order 42.", strings.TrimSpace(second.Text()))
	req := seen.Load()
	require.Len(t, req.Tools, 1)
	require.Equal(t, "pfRefund", req.Tools[0].Name, "the resumed turn has the file's tools")

	_, err = svc.StartRun(context.Background(), runs.StartParams{Action: "/prompt/pfDesk", Input: json.RawMessage(`{"order":"x"}`)})
	require.Error(t, err, "input that breaks the file's schema is refused at start")
}
