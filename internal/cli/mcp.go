package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/engine"
)

func newMCPCommand(cfg *config) *cobra.Command {
	cmd := groupCommand("mcp", "Serve this program's flows and tools to MCP clients")
	var (
		addr string
		eng  engineOptions
	)
	serve := &cobra.Command{
		Use:   "serve [--http ADDR]",
		Short: "Serve this program's flows and tools as an MCP server, on stdio or streamable HTTP",
		Long: `Serve this program's flows and tools to MCP clients (an IDE, a desktop assistant, another
agent) as MCP tools, each under its own name with its input schema. On standard input and output
by default, as MCP hosts start a server; with --http ADDR on streamable HTTP at http://ADDR/mcp.

A call runs the flow or tool in this process, as devui run --local would: it needs no database.
An answer that is a JSON object is the call's structured content (and its text); a failure is a
result marked isError with the error's message, which the client's model reads. A tool that
interrupts to ask a person cannot be answered here: the call fails with the question.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := cfg.logger()
			if err != nil {
				return err
			}
			reg, err := newRegistry(cfg.program, eng, nil, log)
			if err != nil {
				return err
			}
			server, n, err := mcpServer(reg, cfg.program.name(), log)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if addr == "" {
				log.Info("serving MCP on stdio", "tools", n)
				return server.Run(ctx, &sdk.StdioTransport{})
			}
			return serveMCPHTTP(ctx, server, addr, n, log)
		},
	}
	serve.Flags().StringVar(&addr, "http", "", "serve streamable HTTP on this address (http://ADDR/mcp) instead of stdio")
	serve.Flags().BoolVar(&eng.noDemo, "no-demo", false, "do not serve the demo agents")
	cmd.AddCommand(serve)
	return cmd
}

func serveMCPHTTP(ctx context.Context, server *sdk.Server, addr string, n int, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp serve --http: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving MCP on streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp", "tools", n)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

var mcpUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// mcpServer makes an MCP server of reg's flows and tools, and says how many it serves. A flow
// and a tool of the same name would be ambiguous: that is an error.
func mcpServer(reg *engine.Registry, program string, log *slog.Logger) (*sdk.Server, int, error) {
	server := sdk.NewServer(&sdk.Implementation{Name: program, Version: "1"}, nil)
	seen := map[string]string{}
	n := 0
	for _, d := range reg.List() {
		if d.Type != engine.ActionTypeFlow && d.Type != engine.ActionTypeTool {
			continue
		}
		name := mcpUnsafe.ReplaceAllString(d.Name, "_")
		if other, ok := seen[name]; ok {
			return nil, 0, fmt.Errorf("mcp serve: %s and %s would both be the MCP tool %q", other, d.Key, name)
		}
		seen[name] = d.Key
		action := reg.Lookup(d.Key)
		schema, wrapped := mcpInputSchema(d.InputSchema)
		tool := &sdk.Tool{Name: name, Description: d.Description, InputSchema: schema}
		server.AddTool(tool, mcpHandler(action, wrapped, log))
		n++
	}
	return server, n, nil
}

// mcpInputSchema is an action's input schema as MCP wants it, an object; an input of another
// type (a flow that takes a string) is wrapped as the object's "input" property.
func mcpInputSchema(s *engine.Schema) (json.RawMessage, bool) {
	if s == nil {
		return json.RawMessage(`{"type":"object"}`), false
	}
	raw := s.Raw()
	var probe struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &probe) == nil && probe.Type == "object" {
		return raw, false
	}
	wrapped, _ := json.Marshal(map[string]any{
		"type": "object", "properties": map[string]json.RawMessage{"input": raw}, "required": []string{"input"},
	})
	return wrapped, true
}

func mcpHandler(action engine.Action, wrapped bool, log *slog.Logger) sdk.ToolHandler {
	key := action.Desc().Key
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		input := req.Params.Arguments
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		if wrapped {
			var args struct {
				Input json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(input, &args); err != nil || len(args.Input) == 0 {
				return mcpError(fmt.Sprintf("%s takes its input as the argument \"input\"", key)), nil
			}
			input = args.Input
		}
		out, err := action.RunJSON(ctx, input, nil)
		if err != nil {
			var interrupt *engine.InterruptError
			if errors.As(err, &interrupt) {
				return mcpError(fmt.Sprintf("%s asks a person first, which an MCP call cannot wait for: %v", key, err)), nil
			}
			log.Debug("mcp call failed", "action", key, "err", err)
			return mcpError(err.Error()), nil
		}
		res := &sdk.CallToolResult{}
		var text string
		switch {
		case json.Unmarshal(out, &text) == nil:
			res.Content = []sdk.Content{&sdk.TextContent{Text: text}}
		default:
			res.Content = []sdk.Content{&sdk.TextContent{Text: string(out)}}
			if len(out) > 0 && out[0] == '{' {
				res.StructuredContent = json.RawMessage(out)
			}
		}
		return res, nil
	}
}

func mcpError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}
