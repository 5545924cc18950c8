package mcp_test

import (
	"context"
	"log"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/mcp"
)

// The tools of an MCP server started as a command (here the reference filesystem server, run by
// npx), each asking a person before it runs, given to a generate.
func ExampleTools() {
	ctx := context.Background()
	app := loupe.New()
	fs, err := mcp.Connect(ctx, mcp.Server{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "."}})
	if err != nil {
		log.Fatal(err)
	}
	defer fs.Close()
	tools, err := mcp.Tools(ctx, app, fs, loupe.RequireApproval())
	if err != nil {
		log.Print(err)
		return
	}
	refs := make([]ai.ToolRef, len(tools))
	for i, t := range tools {
		refs[i] = t
	}
	_, err = loupe.GenerateText(ctx, app, ai.WithModelName("openai/gpt-4o-mini"), ai.WithTools(refs...),
		ai.WithPrompt("Summarise README.md"))
	if err != nil {
		log.Print(err)
	}
}
