package loupe_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/scripted"
)

// A flow whose model calls a tool, then answers from its result.
func Example() {
	app := loupe.New()
	weather := loupe.DefineTool(app, "weather", "Looks up the weather of a city.",
		func(tc *loupe.ToolContext, in struct {
			City string `json:"city"`
		}) (string, error) {
			return "sunny in " + in.City, nil
		})
	scripted.Define(app, "planner", func(req *loupe.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(scripted.ToolCall("weather", "w1", map[string]any{"city": "Lisbon"})), nil
		}
		// The tool's answer is the last message: a tool response holding its JSON output.
		answer := req.Messages[len(req.Messages)-1].Content[0].ToolResponse.Output
		raw, _ := json.Marshal(answer)
		var forecast string
		_ = json.Unmarshal(raw, &forecast)
		return scripted.Text("Pack sunglasses: it is " + forecast + "."), nil
	})
	trip := loupe.DefineFlow(app, "trip", func(ctx context.Context, city string) (string, error) {
		return loupe.GenerateText(ctx, app, loupe.WithModelName("planner"),
			loupe.WithPrompt("Plan a day in "+city), loupe.WithTools(weather))
	})
	out, err := trip.Run(context.Background(), "Lisbon")
	fmt.Println(out, err)
	// Output: Pack sunglasses: it is sunny in Lisbon. <nil>
}

// A tool that asks a person first: the generate stops with FinishReasonInterrupted, and goes on
// when the interrupted call is restarted (approved). Run durably, Loupe's inbox does this for you.
func ExampleToolContext_Interrupt() {
	app := loupe.New()
	transfer := loupe.DefineTool(app, "transfer", "Sends money once a person confirms.",
		func(tc *loupe.ToolContext, in struct {
			Amount int `json:"amount"`
		}) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(map[string]any{"message": fmt.Sprintf("Send %d?", in.Amount)})
			}
			return fmt.Sprintf("sent %d", in.Amount), nil
		})
	scripted.Define(app, "banker", func(req *loupe.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(scripted.ToolCall("transfer", "t1", map[string]any{"amount": 50})), nil
		}
		return scripted.Text("Done."), nil
	})
	ctx := context.Background()
	opts := []loupe.GenerateOption{loupe.WithModelName("banker"), loupe.WithTools(transfer)}
	resp, _ := loupe.Generate(ctx, app, append(opts, loupe.WithPrompt("Send 50 to Ada"))...)
	fmt.Println(resp.FinishReason, resp.Message.Content[0].Metadata["interrupt"])

	resp, _ = loupe.Generate(ctx, app, append(opts, loupe.WithMessages(resp.History()...),
		loupe.WithRestart(loupe.RestartPart("transfer", "t1", nil, nil)))...)
	fmt.Println(resp.Text())
	// Output:
	// interrupted map[message:Send 50?]
	// Done.
}

// A prompt used as a tool: the front model hands the conversation over, and the next turns run
// with the prompt's system instruction and user message in front, and with its model and tools.
func ExampleDefinePrompt_asTool() {
	app := loupe.New()
	scripted.Define(app, "front", func(req *loupe.ModelRequest) (scripted.Turn, error) {
		return scripted.Reply(scripted.ToolCall("billing", "b1", map[string]any{"topic": "a double charge"})), nil
	})
	scripted.Define(app, "billing-model", func(req *loupe.ModelRequest) (scripted.Turn, error) {
		return scripted.Text("Billing here, about " + req.Messages[1].Text() + "."), nil
	})
	billing := loupe.DefinePrompt(app, "billing", "Hands billing questions to the billing desk.",
		func(in struct {
			Topic string `json:"topic"`
		}) (string, error) {
			return in.Topic, nil
		}, loupe.PromptConfig{Model: "billing-model", System: "You are the billing desk."})
	out, err := loupe.GenerateText(context.Background(), app, loupe.WithModelName("front"),
		loupe.WithPrompt("I was charged twice"), loupe.WithTools(billing))
	fmt.Println(out, err)
	// Output: Billing here, about a double charge. <nil>
}
