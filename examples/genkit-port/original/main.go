// Command original is a Genkit Go 1.4 program.
//
// It is a support desk whose refund tool asks a person first, with a step, structured output and
// streaming. examples/genkit-port/main.go is its port to Loupe, made by renaming the imports and
// the package name genkit to loupe; examples/genkit-port/check.sh shows that, builds and runs
// both, and compares what they print.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
)

// Order is what the tools take.
type Order struct {
	ID     int `json:"id"`
	Amount int `json:"amount"`
}

// Verdict is the structured output of the verdict flow.
type Verdict struct {
	Approve bool   `json:"approve"`
	Reason  string `json:"reason"`
}

// deskModel is a model of the program's own: it calls the tools its prompt asks for, one turn
// each, then answers from their outputs; it streams its answers word by word.
func deskModel(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	var prompt string
	var outputs []string
	for _, m := range req.Messages {
		for _, p := range m.Content {
			switch {
			case m.Role == ai.RoleUser && p.IsText() && prompt == "":
				prompt = p.Text
			case p.IsToolResponse():
				var v any // the output as JSON, its keys in order
				b, _ := json.Marshal(p.ToolResponse.Output)
				_ = json.Unmarshal(b, &v)
				b, _ = json.Marshal(v)
				outputs = append(outputs, string(b))
			}
		}
	}
	call := func(name string, in any) (*ai.ModelResponse, error) {
		return &ai.ModelResponse{
			Message:      ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: name, Ref: name + "-1", Input: in})),
			FinishReason: ai.FinishReasonStop,
			Request:      req, // Genkit's History reads the conversation from here, as its plugins set it
		}, nil
	}
	var text string
	switch {
	case strings.HasPrefix(prompt, "refund") && len(outputs) == 0:
		return call("lookupOrder", Order{ID: 7})
	case strings.HasPrefix(prompt, "refund") && len(outputs) == 1:
		return call("refund", Order{ID: 7, Amount: 40})
	case strings.HasPrefix(prompt, "refund"):
		text = "Done: " + strings.Join(outputs, ", ")
	case strings.HasPrefix(prompt, "judge"):
		text = `{"approve": true, "reason": "40 is under the limit"}`
	default:
		text = "Once upon a time a refund was approved."
	}
	if cb != nil {
		for i, w := range strings.SplitAfter(text, " ") {
			if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Index: i, Content: []*ai.Part{ai.NewTextPart(w)}}); err != nil {
				return nil, err
			}
		}
	}
	return &ai.ModelResponse{Message: ai.NewModelTextMessage(text), FinishReason: ai.FinishReasonStop, Request: req}, nil
}

func main() {
	ctx := context.Background()
	g := genkit.Init(ctx, genkit.WithDefaultModel("desk"))
	genkit.DefineModel(g, "desk", &ai.ModelOptions{Label: "Desk", Supports: &ai.ModelSupports{Multiturn: true, Tools: true}}, deskModel)

	lookup := genkit.DefineTool(g, "lookupOrder", "Looks an order up.",
		func(tc *ai.ToolContext, in Order) (Order, error) {
			return Order{ID: in.ID, Amount: 40}, nil
		})
	refund := genkit.DefineTool(g, "refund", "Refunds an order, once a person approves.",
		func(tc *ai.ToolContext, in Order) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{
					"message": fmt.Sprintf("Refund %d EUR on order %d?", in.Amount, in.ID),
				}})
			}
			return fmt.Sprintf("refunded %d EUR on order %d", in.Amount, in.ID), nil
		})

	// support asks for a refund and, in this process, approves what the refund asks itself.
	support := genkit.DefineFlow(g, "support", func(ctx context.Context, order int) (string, error) {
		ticket, err := genkit.Run(ctx, "ticket", func() (string, error) {
			return fmt.Sprintf("T-%d", order), nil
		})
		if err != nil {
			return "", err
		}
		tools := ai.WithTools(lookup, refund)
		resp, err := genkit.Generate(ctx, g, ai.WithPrompt("refund order %d", order), tools)
		if err != nil {
			return "", err
		}
		for resp.FinishReason == ai.FinishReasonInterrupted {
			var approved []*ai.Part
			for _, p := range resp.Interrupts() {
				fmt.Println("asks:", p.Metadata["interrupt"].(map[string]any)["message"])
				approved = append(approved, refund.Restart(p, nil))
			}
			resp, err = genkit.Generate(ctx, g, ai.WithMessages(resp.History()...), tools, ai.WithToolRestarts(approved...))
			if err != nil {
				return "", err
			}
		}
		return ticket + ": " + resp.Text(), nil
	})

	verdict := genkit.DefineFlow(g, "verdict", func(ctx context.Context, order int) (*Verdict, error) {
		v, _, err := genkit.GenerateData[Verdict](ctx, g, ai.WithPrompt("judge a refund of order %d", order))
		return v, err
	})

	story := genkit.DefineStreamingFlow(g, "story", func(ctx context.Context, topic string, send ai.ModelStreamCallback) (string, error) {
		return genkit.GenerateText(ctx, g, ai.WithPrompt("tell a story about %s", topic), ai.WithStreaming(send))
	})

	out, err := support.Run(ctx, 7)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)

	v, err := verdict.Run(ctx, 7)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("verdict: %+v\n", *v)

	for val, err := range story.Stream(ctx, "refunds") {
		if err != nil {
			log.Fatal(err)
		}
		if val.Done {
			fmt.Println("\nstory:", val.Output)
		} else {
			fmt.Print("[", val.Stream.Text(), "]")
		}
	}

	for val, err := range genkit.GenerateStream(ctx, g, ai.WithPrompt("tell a story about streams")) {
		if err != nil {
			log.Fatal(err)
		}
		if val.Done {
			fmt.Println("\nstream:", val.Response.Text())
		} else {
			fmt.Print("<", val.Chunk.Text(), ">")
		}
	}
}
