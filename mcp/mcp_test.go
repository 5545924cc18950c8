package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/mcp"
	"github.com/loupe-dev/loupe/scripted"
)

// serverBin is testdata/mcpserver, a real MCP server written with the official Go SDK, built
// once for the package's tests.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loupe-mcp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "mcpserver")
	build := exec.Command("go", "build", "-o", serverBin, "./testdata/mcpserver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build testdata/mcpserver:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func connectStdio(t testing.TB) *mcp.Client {
	t.Helper()
	c, err := mcp.Connect(context.Background(), mcp.Server{Name: "calc", Command: serverBin})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startHTTPServer runs testdata/mcpserver on streamable HTTP and returns its endpoint.
func startHTTPServer(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(serverBin, "-http", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	require.True(t, ok, line)
	return url
}

// TestAStdioServersToolsRunInTheGenerateLoop: a real MCP server started as a command gives its
// tools to a Loupe program, named "<server>_<tool>" with the server's descriptions and input
// schemas; a model calls three of them in one turn, and reads the structured answer of one, the
// text of another, and the error a third reported (as {"error": …}, so that it can correct
// itself); an image comes back as a media part.
func TestAStdioServersToolsRunInTheGenerateLoop(t *testing.T) {
	ctx := context.Background()
	app := loupe.New()
	tools, err := mcp.Tools(ctx, app, connectStdio(t))
	require.NoError(t, err)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name())
	}
	require.ElementsMatch(t, []string{"calc_add", "calc_shout", "calc_weather_lookup", "calc_pixel", "calc_key"}, names)
	add := loupe.LookupTool(app, "calc_add")
	require.NotNil(t, add, "each tool is defined in the program")
	def := add.Definition()
	require.Equal(t, "Adds two numbers.", def.Description)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(def.InputSchema.Raw(), &schema))
	require.Contains(t, schema["properties"], "a")
	require.Contains(t, schema["properties"], "b")
	require.Equal(t, map[string]any{"server": "calc", "tool": "add"}, def.Metadata["mcp"])

	model := scripted.Define(app, "scripted/mcp", func(req *ai.ModelRequest) (scripted.Turn, error) {
		if len(req.Messages) > 1 {
			return scripted.Text("done"), nil
		}
		return scripted.Reply(
			scripted.ToolCall("calc_add", "c1", map[string]any{"a": 2, "b": 3}),
			scripted.ToolCall("calc_shout", "c2", map[string]any{"text": "hi"}),
			scripted.ToolCall("calc_weather_lookup", "c3", map[string]any{"text": "Atlantis"}),
		), nil
	})
	resp, err := loupe.Generate(ctx, app, ai.WithModel(model), ai.WithPrompt("go"), ai.WithTools(add, ai.ToolName("calc_shout"), ai.ToolName("calc_weather_lookup")))
	require.NoError(t, err)
	require.Equal(t, "done", resp.Text())
	outputs := map[string]string{}
	for _, m := range resp.History() {
		for _, p := range m.Content {
			if p.ToolResponse != nil {
				b, err := json.Marshal(p.ToolResponse.Output)
				require.NoError(t, err)
				outputs[p.ToolResponse.Ref] = string(b)
			}
		}
	}
	require.JSONEq(t, `{"sum":5}`, outputs["c1"], "the structured answer")
	require.JSONEq(t, `"HI"`, outputs["c2"], "the text answer")
	require.JSONEq(t, `{"error":"no such city: Atlantis"}`, outputs["c3"], "the error the server reported, for the model to read")

	pixel := loupe.LookupTool(app, "calc_pixel")
	out, err := pixel.RunTool(&ai.ToolContext{Context: ctx, Name: "calc_pixel"}, json.RawMessage(`{}`))
	require.NoError(t, err)
	require.JSONEq(t, `"one pixel"`, jsonOf(t, out.Output))
	require.Len(t, out.Content, 1)
	require.Equal(t, "data:image/png;base64,iVBORw==", out.Content[0].Media.URL)
}

// TestAStreamableHTTPServersToolsCarryTheIdempotencyKey: the same server on streamable HTTP,
// reached by URL; a call carries its idempotency key in _meta, which the server reads back.
func TestAStreamableHTTPServersToolsCarryTheIdempotencyKey(t *testing.T) {
	ctx := context.Background()
	c, err := mcp.Connect(ctx, mcp.Server{Name: "calc", URL: startHTTPServer(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	app := loupe.New()
	_, err = mcp.Tools(ctx, app, c)
	require.NoError(t, err)
	out, err := loupe.LookupTool(app, "calc_key").RunTool(&ai.ToolContext{Context: ctx, Name: "calc_key", IdempotencyKey: "run-7:c1"}, json.RawMessage(`{}`))
	require.NoError(t, err)
	require.JSONEq(t, `"run-7:c1"`, jsonOf(t, out.Output))
	out, err = loupe.LookupTool(app, "calc_add").RunTool(&ai.ToolContext{Context: ctx, Name: "calc_add"}, json.RawMessage(`{"a":1.5,"b":2}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"sum":3.5}`, jsonOf(t, out.Output))
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestMCPToolsAreGatedLikeAnyTool: the options given to Tools apply to every tool, so
// loupe.RequireApproval() marks each as one that asks a person before it runs, as it marks a
// tool of the program's own.
func TestMCPToolsAreGatedLikeAnyTool(t *testing.T) {
	ctx := context.Background()
	app := loupe.New()
	gated, err := mcp.Tools(ctx, app, connectStdio(t), loupe.RequireApproval())
	require.NoError(t, err)
	own := loupe.DefineTool(app, "own", "Own tool.", func(tc *ai.ToolContext, in struct{}) (string, error) { return "", nil }, loupe.RequireApproval())
	for _, tool := range gated {
		for k, v := range own.Definition().Metadata {
			require.Equal(t, v, tool.Definition().Metadata[k], "%s: %s", tool.Name(), k)
		}
	}
}

// TestConnectRefusesWhatCannotWork: a name a model would refuse in a tool name, neither or both
// of Command and URL, a command that does not exist, and a second definition of the same
// server's tools are each a clear error, not a panic.
func TestConnectRefusesWhatCannotWork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []mcp.Server{
		{Name: "calc/v2", Command: serverBin},
		{Name: "calc"},
		{Name: "calc", Command: serverBin, URL: "http://127.0.0.1:1/mcp"},
		{Name: "calc", Command: filepath.Join(t.TempDir(), "no-such-server")},
	} {
		_, err := mcp.Connect(ctx, s)
		require.Error(t, err, "%+v", s)
		require.Contains(t, err.Error(), "mcp:")
	}
	app := loupe.New()
	c := connectStdio(t)
	_, err := mcp.Tools(ctx, app, c)
	require.NoError(t, err)
	_, err = mcp.Tools(ctx, app, c)
	require.ErrorContains(t, err, "calc_")
}
