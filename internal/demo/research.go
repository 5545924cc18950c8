package demo

import (
	"context"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/scripted"
)

// ResearchInput is the research agent's input.
type ResearchInput struct {
	Topic string `json:"topic" jsonschema:"minLength=1,example=durable execution"`
	Depth int    `json:"depth" jsonschema:"minimum=1,maximum=40,example=12"`
}

// Finding is what one search returns.
type Finding struct {
	Query   string `json:"query"`
	Source  string `json:"source"`
	Summary string `json:"summary"`
}

// researchFanout is how many searches the scripted researcher runs in parallel each turn.
const researchFanout = 6

func defineResearch(app *loupe.App, model string, fx *effects) {
	search := loupe.DefineTool(app, "search", "Searches the library for a query.",
		func(tc *ai.ToolContext, in struct {
			Query string `json:"query"`
		}) (Finding, error) {
			defer fx.act(tc)()
			return Finding{Query: in.Query, Source: fmt.Sprintf("doc-%04d", hash(in.Query)%10000),
				Summary: "Notes on " + in.Query + ": " + strings.Repeat("evidence ", 8)}, nil
		})
	loupe.DefineFlow(app, "researchAgent", func(ctx context.Context, in ResearchInput) (string, error) {
		resp, err := loupe.Generate(ctx, app,
			ai.WithModelName(model),
			ai.WithSystem("You are a researcher. Search in rounds, then write a summary."),
			ai.WithPrompt(fmt.Sprintf("Research %q in %d rounds.", in.Topic, in.Depth)),
			ai.WithTools(search),
			ai.WithMaxTurns(in.Depth+1),
		)
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// researchScript searches researchFanout queries in parallel for depth rounds, then summarises.
func researchScript(req *ai.ModelRequest) (scripted.Turn, error) {
	var topic string
	var depth int
	if _, err := fmt.Sscanf(firstUserText(req), "Research %q in %d rounds.", &topic, &depth); err != nil {
		return scripted.Turn{}, fmt.Errorf("demo research script: unexpected prompt %q", firstUserText(req))
	}
	turn := scripted.ModelTurns(req.Messages)
	if turn < depth {
		parts := []*ai.Part{ai.NewTextPart(fmt.Sprintf("Round %d: searching.", turn+1))}
		for i := range researchFanout {
			parts = append(parts, scripted.ToolCall("search", fmt.Sprintf("r%d-%d", turn, i),
				map[string]any{"query": fmt.Sprintf("%s, angle %d.%d", topic, turn+1, i+1)}))
		}
		return scripted.Reply(parts...).WithUsage(400+turn*150, 60), nil
	}
	return say(fmt.Sprintf("Summary of %q after %d rounds and %d searches: the evidence converges.", topic, depth, depth*researchFanout)), nil
}
