// Command quickstart is a travel agent of your own in Loupe: a flow that asks a model to book a
// flight, and a booking tool that waits for a person's approval in Loupe's inbox.
//
//	go run . serve --dev     # the UI at http://127.0.0.1:4000, your flow under Actions
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/devui"
	"github.com/loupe-dev/loupe/openai"
	"github.com/loupe-dev/loupe/scripted"
)

type Booking struct {
	City string `json:"city"`
}

func main() {
	app := loupe.New()
	book := loupe.DefineTool(app, "bookFlight", "Books a flight to a city.",
		func(tc *ai.ToolContext, in Booking) (string, error) {
			if !tc.IsResumed() { // ask a person first; the run waits in the inbox
				return "", tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{"message": "Book a flight to " + in.City + "?"}})
			}
			return "booked " + in.City, nil
		})
	model := "offline"
	if cfg, ok := openai.FromEnv(); ok { // OPENAI_BASE_URL / OPENAI_API_KEY: any compatible endpoint
		m, err := openai.Define(app, cfg, "gpt-4o-mini")
		if err != nil {
			log.Fatal(err)
		}
		model = m.Name()
	} else {
		scripted.Define(app, model, func(req *ai.ModelRequest) (scripted.Turn, error) {
			if scripted.ModelTurns(req.Messages) == 0 {
				return scripted.Reply(scripted.ToolCall("bookFlight", "b1", Booking{City: "Lisbon"})), nil
			}
			return scripted.Text("Your flight is booked."), nil
		})
	}
	loupe.DefineFlow(app, "trip", func(ctx context.Context, city string) (string, error) {
		return loupe.GenerateText(ctx, app, ai.WithModelName(model), ai.WithTools(book),
			ai.WithPrompt(fmt.Sprintf("Book me a flight to %s.", city)))
	})
	devui.Main(app)
}
