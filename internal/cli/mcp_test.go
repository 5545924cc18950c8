package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/engine"
)

// TestMCPServeGivesTheProgramsFlowsAndToolsToAnMCPClient: a real MCP client (the official Go
// SDK's) starts `devui mcp serve` as MCP hosts do, on stdio, lists the demo program's flows and
// tools with their input schemas, and calls them: a tool's object answer comes back as structured
// content, a flow's string answer as text, a tool that interrupts to ask a person as an isError
// result that says so, and bad arguments as an isError result, never a broken session.
func TestMCPServeGivesTheProgramsFlowsAndToolsToAnMCPClient(t *testing.T) {
	t.Parallel()
	bin := buildDevui(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "serve")
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL=", "OPENAI_API_KEY=", "DATABASE_URL=")
	cmd.Stderr = os.Stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer session.Close()

	tools := map[string]*sdk.Tool{}
	for tool, err := range session.Tools(ctx, nil) {
		require.NoError(t, err)
		tools[tool.Name] = tool
	}
	for _, name := range []string{"getWeather", "bookFlight", "travelAgent", "countdown"} {
		require.Contains(t, tools, name)
	}
	schema, err := json.Marshal(tools["getWeather"].InputSchema)
	require.NoError(t, err)
	require.Contains(t, string(schema), `"city"`)
	require.Equal(t, "Looks up the current weather of a city.", tools["getWeather"].Description)

	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "getWeather", Arguments: map[string]any{"city": "Lisbon"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	structured, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var weather map[string]any
	require.NoError(t, json.Unmarshal(structured, &weather))
	require.Equal(t, "Lisbon", weather["city"])

	res, err = session.CallTool(ctx, &sdk.CallToolParams{Name: "countdown", Arguments: map[string]any{"from": 1}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, "liftoff", res.Content[0].(*sdk.TextContent).Text)

	res, err = session.CallTool(ctx, &sdk.CallToolParams{Name: "bookFlight", Arguments: map[string]any{"destination": "Oslo", "date": "2026-12-24", "class": "economy"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*sdk.TextContent).Text, "asks a person first")

	res, err = session.CallTool(ctx, &sdk.CallToolParams{Name: "countdown", Arguments: map[string]any{"from": "ten"}})
	require.NoError(t, err)
	require.True(t, res.IsError, "bad arguments are an error result")
	require.Contains(t, res.Content[0].(*sdk.TextContent).Text, "from")
	res, err = session.CallTool(ctx, &sdk.CallToolParams{Name: "getWeather", Arguments: map[string]any{"city": "Oslo"}})
	require.NoError(t, err, "the session goes on")
	require.False(t, res.IsError)
}

// TestMCPInputSchemaWrapsWhatIsNotAnObject: MCP tools take objects; an action whose input is
// another type (a flow of a string) takes it as the "input" property, and an object schema is
// kept as it is.
func TestMCPInputSchemaWrapsWhatIsNotAnObject(t *testing.T) {
	t.Parallel()
	obj, err := engine.NewSchema(json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`))
	require.NoError(t, err)
	got, wrapped := mcpInputSchema(obj)
	require.False(t, wrapped)
	require.JSONEq(t, `{"type":"object","properties":{"city":{"type":"string"}}}`, string(got))
	str, err := engine.NewSchema(json.RawMessage(`{"type":"string"}`))
	require.NoError(t, err)
	got, wrapped = mcpInputSchema(str)
	require.True(t, wrapped)
	require.JSONEq(t, `{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}`, string(got))
	got, wrapped = mcpInputSchema(nil)
	require.False(t, wrapped)
	require.JSONEq(t, `{"type":"object"}`, string(got))
}
