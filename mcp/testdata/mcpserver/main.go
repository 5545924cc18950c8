// mcpserver is a real MCP server written with the official Go SDK, for the mcp package's tests:
// on stdio by default, on streamable HTTP with -http ADDR (it prints "listening on URL").
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	A float64 `json:"a" jsonschema:"the first number"`
	B float64 `json:"b" jsonschema:"the second number"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type textIn struct {
	Text string `json:"text"`
}

// logCall appends the call (the tool and the idempotency key it carried) to the file that
// MCPSERVER_CALLS names, when it is set: what a test reads to know whether and how often the
// server acted.
func logCall(req *mcp.CallToolRequest, tool string) {
	path := os.Getenv("MCPSERVER_CALLS")
	if path == "" {
		return
	}
	key, _ := req.Params.Meta["dev.loupe/idempotencyKey"].(string)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(f, "%s %s\n", tool, key)
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			logCall(req, "add")
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Says the text louder."},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "weather.lookup", Description: "Fails for unknown cities."},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such city: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pixel", Description: "A one-pixel image."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "one pixel"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG")},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "key", Description: "Answers the idempotency key the call carried."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			key, _ := req.Params.Meta["dev.loupe/idempotencyKey"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: key}}}, nil, nil
		})
	return s
}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	flag.Parse()
	if *addr == "" {
		if err := newServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "listening on http://%s/mcp\n", ln.Addr())
	s := newServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	log.Fatal(http.Serve(ln, mux))
}
