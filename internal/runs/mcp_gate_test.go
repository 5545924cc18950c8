package runs_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/mcp"
	"github.com/loupe-dev/loupe/scripted"
)

// TestAnMCPToolGatedByApprovalActsOnlyOnceApproved: the tool of a real MCP server process
// (mcp/testdata/mcpserver), taken with mcp.Tools and loupe.RequireApproval, in a durable run:
// the model's call stops the run at an interrupt before the server is called at all; once a
// reviewer approves, the server is called once, with the call's idempotency key, and the run
// succeeds with the server's answer.
func TestAnMCPToolGatedByApprovalActsOnlyOnceApproved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpserver")
	out, err := exec.Command("go", "build", "-o", bin, "../../mcp/testdata/mcpserver").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	calls := filepath.Join(dir, "calls")

	app := loupe.New()
	c, err := mcp.Connect(ctx, mcp.Server{Name: "calc", Command: bin, Env: []string{"MCPSERVER_CALLS=" + calls}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = mcp.Tools(ctx, app, c, loupe.RequireApproval())
	require.NoError(t, err)
	scripted.Define(app, "scripted/calc", func(req *ai.ModelRequest) (scripted.Turn, error) {
		last := req.Messages[len(req.Messages)-1]
		for _, p := range last.Content {
			if p.ToolResponse != nil {
				b, err := json.Marshal(p.ToolResponse.Output)
				return scripted.Text("the server says " + string(b)), err
			}
		}
		return scripted.Reply(scripted.ToolCall("calc_add", "add-1", map[string]any{"a": 2, "b": 3})), nil
	})
	loupe.DefineFlow(app, "sum", func(ctx context.Context, _ struct{}) (string, error) {
		return loupe.GenerateText(ctx, app, ai.WithModelName("scripted/calc"), ai.WithPrompt("add 2 and 3"),
			ai.WithTools(ai.ToolName("calc_add")))
	})

	st, _ := catalogueStore(t)
	svc, err := runs.New(runs.Config{Workers: 2, LeaseTTL: time.Second, Program: "mcpgate", Logger: testLogger()}, st, bridge.AppRegistry(app))
	require.NoError(t, err)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(svc.Stop)
	run, err := svc.StartRun(ctx, runs.StartParams{Action: "/flow/sum", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)

	var it *store.Interrupt
	require.Eventually(t, func() bool {
		list, err := st.InterruptListByRun(ctx, run.ID)
		require.NoError(t, err)
		if len(list) == 1 && list[0].Status == store.InterruptPending {
			it = list[0]
		}
		return it != nil
	}, 2*time.Minute, 20*time.Millisecond, "the run stops at the approval")
	require.Equal(t, "calc_add", it.Tool)
	_, err = os.Stat(calls)
	require.ErrorIs(t, err, os.ErrNotExist, "the MCP server was not called before the approval")

	_, err = svc.Resolve(ctx, runs.ResolveParams{InterruptID: it.ID, Action: runs.ActionApprove, Actor: "rita"})
	require.NoError(t, err)
	done := waitStatus(t, st, run, store.RunSucceeded)
	var text string
	require.NoError(t, json.Unmarshal(done.Output, &text))
	require.Equal(t, `the server says {"sum":5}`, text)
	log, err := os.ReadFile(calls)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	require.Len(t, lines, 1, "called once: %q", log)
	require.True(t, strings.HasPrefix(lines[0], "add "+run.ID.String()+":"), "with the call's idempotency key: %q", lines[0])
}
