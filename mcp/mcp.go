// Package mcp gives a Loupe program the tools of Model Context Protocol servers, built on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk). Connect reaches a server (a command
// that speaks MCP on its standard input and output, or a streamable HTTP endpoint), and Tools
// defines each of its tools in the program as a Loupe tool: with the server's input schema, run
// in the generate loop like any tool (its span, its ledger entry, its idempotency key), and
// gateable as any tool is (loupe.RequireApproval, or a policy's gate rule).
//
// The other direction, a Loupe program's own flows and tools served to MCP clients, is the
// program's `mcp serve` command (devui.Main).
package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
)

// Server says how to reach an MCP server: by Command (stdio) or by URL (streamable HTTP).
type Server struct {
	// Name names the server; its tools are defined as "<Name>_<tool>". Letters, digits, '_' and
	// '-' only, as model APIs accept in a tool's name.
	Name string
	// Command starts a server that speaks MCP on its standard input and output, with Args.
	Command string
	// Args are the command's arguments.
	Args []string
	// Env is added to the command's environment (KEY=value).
	Env []string
	// URL is a streamable HTTP endpoint, for a server that runs on its own.
	URL string
	// HTTPClient calls URL; http.DefaultClient when nil.
	HTTPClient *http.Client
}

// Client is a connection to an MCP server. It is safe for concurrent use: tools defined from it
// may run in parallel.
type Client struct {
	name    string
	session *sdk.ClientSession
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Connect starts or reaches the server and opens an MCP session with it. Close ends it (and the
// command, for a stdio server).
func Connect(ctx context.Context, s Server) (*Client, error) {
	if !validName.MatchString(s.Name) {
		return nil, fmt.Errorf("mcp: server name %q: want letters, digits, '_' or '-'", s.Name)
	}
	var t sdk.Transport
	switch {
	case s.Command != "" && s.URL != "":
		return nil, fmt.Errorf("mcp: server %s: give Command or URL, not both", s.Name)
	case s.Command != "":
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Env = append(os.Environ(), s.Env...)
		cmd.Stderr = os.Stderr
		t = &sdk.CommandTransport{Command: cmd}
	case s.URL != "":
		t = &sdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: s.HTTPClient}
	default:
		return nil, fmt.Errorf("mcp: server %s: give Command or URL", s.Name)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "loupe", Version: "1"}, nil)
	session, err := c.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp: connect to %s: %w", s.Name, err)
	}
	return &Client{name: s.Name, session: session}, nil
}

// Close ends the session; a stdio server's command is stopped.
func (c *Client) Close() error { return c.session.Close() }

// MetaIdempotencyKey is the key under which a tool call's _meta carries the call's idempotency
// key (ai.ToolContext.IdempotencyKey), the same across crashes and resumes, so that a server can
// refuse a repeat.
const MetaIdempotencyKey = "dev.loupe/idempotencyKey"

// Tools lists the server's tools and defines each in app as "<server>_<tool>" (characters other
// than letters, digits, '_' and '-' in the tool's name become '_'), with the server's
// description and input schema, and returns them in the server's order. opts apply to every
// tool: loupe.RequireApproval() makes each ask a person before it runs.
//
// A call's answer is the result's structured content when the server gives one, else its text
// (the text blocks joined), with images and audio as media parts. A result the server marks as
// an error (isError) is what the model reads, {"error": text}, so that it can correct itself, as
// MCP means it; a failed connection or protocol error fails the tool.
func Tools(ctx context.Context, app *loupe.App, c *Client, opts ...ai.ToolOption) ([]ai.Tool, error) {
	var tools []ai.Tool
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp: list the tools of %s: %w", c.name, err)
		}
		tool, err := define(app, c, t, opts)
		if err != nil {
			return nil, err
		}
		tools = append(tools, tool)
	}
	return tools, nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

func define(app *loupe.App, c *Client, t *sdk.Tool, opts []ai.ToolOption) (tool ai.Tool, err error) {
	name := c.name + "_" + unsafeChars.ReplaceAllString(t.Name, "_")
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("mcp: tool %s of %s: input schema: %w", t.Name, c.name, err)
	}
	remote := t.Name
	call := func(tc *ai.ToolContext, in map[string]any) (*ai.MultipartToolResponse, error) {
		params := &sdk.CallToolParams{Name: remote, Arguments: in}
		if tc.IdempotencyKey != "" {
			params.Meta = sdk.Meta{MetaIdempotencyKey: tc.IdempotencyKey}
		}
		res, err := c.session.CallTool(tc, params)
		if err != nil {
			return nil, fmt.Errorf("mcp: call %s on %s: %w", remote, c.name, err)
		}
		return answer(res)
	}
	all := append([]ai.ToolOption{
		ai.WithToolInputSchema(json.RawMessage(schema)),
		ai.WithToolMetadata(map[string]any{"mcp": map[string]any{"server": c.name, "tool": remote}}),
	}, opts...)
	defer func() {
		// Defining a tool whose name is taken panics, as defining any action twice does.
		if r := recover(); r != nil {
			tool, err = nil, fmt.Errorf("mcp: define tool %s: %v", name, r)
		}
	}()
	return loupe.DefineMultipartTool(app, name, t.Description, call, all...), nil
}

// answer turns a tool's result into what the model reads.
func answer(res *sdk.CallToolResult) (*ai.MultipartToolResponse, error) {
	var (
		text  []string
		parts []*ai.Part
	)
	for _, content := range res.Content {
		switch b := content.(type) {
		case *sdk.TextContent:
			text = append(text, b.Text)
		case *sdk.ImageContent:
			parts = append(parts, ai.NewMediaPart(b.MIMEType, dataURL(b.MIMEType, b.Data)))
		case *sdk.AudioContent:
			parts = append(parts, ai.NewMediaPart(b.MIMEType, dataURL(b.MIMEType, b.Data)))
		case *sdk.ResourceLink:
			text = append(text, b.URI)
		case *sdk.EmbeddedResource:
			if b.Resource != nil && b.Resource.Text != "" {
				text = append(text, b.Resource.Text)
			}
		}
	}
	joined := strings.Join(text, "\n")
	if res.IsError {
		if joined == "" {
			joined = "the tool failed"
		}
		return &ai.MultipartToolResponse{Output: map[string]any{"error": joined}}, nil
	}
	out := &ai.MultipartToolResponse{Content: parts}
	switch {
	case res.StructuredContent != nil:
		out.Output = res.StructuredContent
	case len(text) > 0:
		out.Output = joined
	case len(parts) == 0:
		return nil, errors.New("mcp: the tool answered nothing")
	}
	return out, nil
}

func dataURL(mime string, data []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
}
