package genkitpeer

import (
	"context"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
)

// TestGenkitToolResponseOrder documents (it does not enforce) how Genkit
// v1.4.0 orders tool responses when one model turn requests several tools:
// handleToolRequests runs each request in its own goroutine and appends the
// responses as they arrive on a channel, so the tool message follows
// completion order, not request order. Run with -v to see the order.
func TestGenkitToolResponseOrder(t *testing.T) {
	g := genkit.Init(context.Background())

	type in struct {
		Delay int `json:"delayMs"`
	}
	sleep := genkit.DefineTool(g, "sleep", "Sleeps for delayMs.",
		func(_ *ai.ToolContext, x in) (int, error) {
			time.Sleep(time.Duration(x.Delay) * time.Millisecond)
			return x.Delay, nil
		})

	var seen []string
	m := genkit.DefineModel(g, "scripted/parallel",
		&ai.ModelOptions{Supports: &ai.ModelSupports{Multiturn: true, Tools: true}},
		func(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			last := req.Messages[len(req.Messages)-1]
			if last.Role == ai.RoleTool {
				for _, p := range last.Content {
					seen = append(seen, p.ToolResponse.Ref)
				}
				return &ai.ModelResponse{Message: ai.NewModelTextMessage("done"), Request: req}, nil
			}
			return &ai.ModelResponse{Request: req, Message: &ai.Message{Role: ai.RoleModel, Content: []*ai.Part{
				ai.NewToolRequestPart(&ai.ToolRequest{Name: "sleep", Ref: "first-slow", Input: map[string]any{"delayMs": 50}}),
				ai.NewToolRequestPart(&ai.ToolRequest{Name: "sleep", Ref: "second-fast", Input: map[string]any{"delayMs": 0}}),
			}}}, nil
		})

	resp, err := genkit.Generate(context.Background(), g,
		ai.WithModel(m), ai.WithPrompt("go"), ai.WithTools(sleep), ai.WithMaxTurns(5))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "done" || len(seen) != 2 {
		t.Fatalf("unexpected result: text=%q seen=%v", resp.Text(), seen)
	}
	order := "request order"
	if seen[0] != "first-slow" {
		order = "completion order"
	}
	t.Logf("requested [first-slow second-fast], tool message holds %v (%s)", seen, order)
}
