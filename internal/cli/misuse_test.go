package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/scripted"
)

// myagent is a program of a user's own, named with Program.Name (devui.WithName): a flow that
// relays its generate's chunks, a flow that sends chunks of its own, and one whose tool asks a
// person.
func myagent() *Program {
	app := loupe.New()
	scripted.DefineTurns(app, "teller", scripted.Text("once upon a time").WithChunks(
		[]*ai.Part{ai.NewTextPart("once ")}, []*ai.Part{ai.NewTextPart("upon a time")}))
	loupe.DefineStreamingFlow(app, "story", func(ctx context.Context, topic string, send ai.ModelStreamCallback) (string, error) {
		return loupe.GenerateText(ctx, app, ai.WithModelName("teller"), ai.WithPrompt("A story about %s", topic), ai.WithStreaming(send))
	})
	loupe.DefineStreamingFlow(app, "words", func(ctx context.Context, _ string, send func(context.Context, string) error) (string, error) {
		for _, w := range []string{"a", "b"} {
			if err := send(ctx, w); err != nil {
				return "", err
			}
		}
		return "done", nil
	})
	ask := loupe.DefineTool(app, "ask", "Asks a person.", func(tc *ai.ToolContext, _ struct{}) (string, error) {
		return "", tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{"message": "ok?"}})
	})
	scripted.Define(app, "asker", func(req *ai.ModelRequest) (scripted.Turn, error) {
		return scripted.Reply(scripted.ToolCall("ask", "a1", struct{}{})), nil
	})
	loupe.DefineFlow(app, "question", func(ctx context.Context, _ string) (string, error) {
		return loupe.GenerateText(ctx, app, ai.WithModelName("asker"), ai.WithPrompt("go"), ai.WithTools(ask))
	})
	return &Program{Name: "myagent", Registry: bridge.AppRegistry(app)}
}

func runMyagent(t *testing.T, dbURL string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(myagent())
	if dbURL != "" {
		args = append(args, "--database-url", dbURL)
	}
	cmd.SetArgs(append(args, "--log-level", "error"))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestMisusedCommandsPointAtTheMistake: an unknown action is named plainly and the user is told
// which command lists the actions, in the program's own name, as every hint is; the actions
// command lists them; a streaming flow's chunks and its output come on lines of their own.
func TestMisusedCommandsPointAtTheMistake(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewURL(t)

	_, _, err := runMyagent(t, dbURL, "run", "nosuch")
	require.EqualError(t, err, `action "nosuch" is not registered: run "myagent actions" to list this program's actions`)

	_, _, err = runMyagent(t, dbURL, "run")
	require.ErrorContains(t, err, "as in: myagent run travelAgent")

	out, _, err := runMyagent(t, "", "actions")
	require.NoError(t, err)
	for _, key := range []string{"/flow/story", "/flow/words", "/flow/question", "/tool/ask", "/model/teller"} {
		require.Contains(t, out, key)
	}
	require.NotContains(t, out, "/util/generate")

	help, _, err := runMyagent(t, "", "run", "--help")
	require.NoError(t, err)
	require.Contains(t, help, "myagent interrupts")
	require.NotContains(t, help, "devui ")

	out, _, err = runMyagent(t, dbURL, "run", "story", "--input", `"dragons"`, "--wait")
	require.NoError(t, err)
	require.Equal(t, "once upon a time\noutput: \"once upon a time\"\n", out, "the relayed chunks are not printed twice")

	out, _, err = runMyagent(t, dbURL, "run", "words", "--input", `"x"`, "--wait")
	require.NoError(t, err)
	require.Equal(t, "\"a\"\n\"b\"\noutput: \"done\"\n", out)

	_, info, err := runMyagent(t, dbURL, "run", "question", "--input", `"x"`, "--wait")
	require.Equal(t, 3, exitCode(err))
	require.Contains(t, info, "resolve with: myagent interrupts resolve ")
	require.False(t, strings.Contains(info, "devui "), info)
}
