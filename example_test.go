package loupe_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/scripted"
)

// A flow whose model calls a tool, then answers from its result.
func ExampleDefineFlow() {
	app := loupe.New()
	weather := loupe.DefineTool(app, "weather", "Looks up the weather of a city.",
		func(tc *ai.ToolContext, in struct {
			City string `json:"city"`
		}) (string, error) {
			return "sunny in " + in.City, nil
		})
	scripted.Define(app, "planner", func(req *ai.ModelRequest) (scripted.Turn, error) {
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
		return loupe.GenerateText(ctx, app, ai.WithModelName("planner"),
			ai.WithPrompt("Plan a day in "+city), ai.WithTools(weather))
	})
	out, err := trip.Run(context.Background(), "Lisbon")
	fmt.Println(out, err)
	// Output: Pack sunglasses: it is sunny in Lisbon. <nil>
}

// A prompt used as a tool: the front model hands the conversation over, and the next turns run
// with the prompt's system instruction and user message in front, and with its model and tools.
func ExampleDefinePrompt_asTool() {
	app := loupe.New()
	scripted.Define(app, "front", func(req *ai.ModelRequest) (scripted.Turn, error) {
		return scripted.Reply(scripted.ToolCall("billing", "b1", map[string]any{"topic": "a double charge"})), nil
	})
	scripted.Define(app, "billing-model", func(req *ai.ModelRequest) (scripted.Turn, error) {
		return scripted.Text("Billing here, about " + req.Messages[1].Text() + "."), nil
	})
	billing := loupe.DefinePrompt(app, "billing", "Hands billing questions to the billing desk.",
		func(in struct {
			Topic string `json:"topic"`
		}) (string, error) {
			return in.Topic, nil
		}, loupe.PromptConfig{Model: "billing-model", System: "You are the billing desk."})
	out, err := loupe.GenerateText(context.Background(), app, ai.WithModelName("front"),
		ai.WithPrompt("I was charged twice"), ai.WithTools(billing))
	fmt.Println(out, err)
	// Output: Billing here, about a double charge. <nil>
}

// A tool that asks a person before it acts. Run durably (devui), the call waits in Loupe's inbox
// and the flow stops there: Generate returns an error wrapping loupe.ErrInterrupted, which the
// flow returns; once a reviewer approves, the flow runs again and the tool, restarted, acts. In
// your own process, as here, the generate ends with FinishReason "interrupted" and you resume it.
func ExampleDefineTool() {
	app := loupe.New()
	refund := loupe.DefineTool(app, "refund", "Refunds an order once a person approves.",
		func(tc *ai.ToolContext, in struct {
			Order int `json:"order"`
		}) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{"message": fmt.Sprintf("Refund order %d?", in.Order)}})
			}
			return fmt.Sprintf("refunded %d (key %s)", in.Order, tc.IdempotencyKey), nil
		})
	scripted.Define(app, "desk", func(req *ai.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(scripted.ToolCall("refund", "r1", map[string]any{"order": 7})), nil
		}
		return scripted.Text("Refunded."), nil
	})
	ctx := context.Background()
	opts := []ai.GenerateOption{ai.WithModelName("desk"), ai.WithTools(refund)}
	resp, err := loupe.Generate(ctx, app, append(opts, ai.WithPrompt("Refund order 7"))...)
	fmt.Println(resp.FinishReason, resp.Interrupts()[0].Metadata["interrupt"], err)

	approved := refund.Restart(resp.Interrupts()[0], nil)
	resp, err = loupe.Generate(ctx, app, append(opts, ai.WithMessages(resp.History()...), ai.WithToolRestarts(approved))...)
	fmt.Println(resp.Text(), err)
	// Output:
	// interrupted map[message:Refund order 7?] <nil>
	// Refunded. <nil>
}

// Structured output: the answer is checked against the type's schema and decoded.
func ExampleGenerateData() {
	type Verdict struct {
		Approve bool   `json:"approve"`
		Reason  string `json:"reason"`
	}
	app := loupe.New(loupe.WithDefaultModel("judge"))
	scripted.Define(app, "judge", func(req *ai.ModelRequest) (scripted.Turn, error) {
		return scripted.Text("```json\n{\"approve\": true, \"reason\": \"under the limit\"}\n```"), nil
	})
	v, _, err := loupe.GenerateData[Verdict](context.Background(), app, ai.WithPrompt("Refund 40 EUR?"))
	fmt.Printf("%+v %v\n", *v, err)
	// Output: {Approve:true Reason:under the limit} <nil>
}

// Streaming: the chunks come as the model sends them, then the final response.
func ExampleGenerateStream() {
	app := loupe.New()
	scripted.DefineTurns(app, "poet", scripted.Text("roses are red").WithChunks(
		[]*ai.Part{ai.NewTextPart("roses ")}, []*ai.Part{ai.NewTextPart("are ")}, []*ai.Part{ai.NewTextPart("red")}))
	for v, err := range loupe.GenerateStream(context.Background(), app, ai.WithModelName("poet"), ai.WithPrompt("A poem")) {
		switch {
		case err != nil:
			fmt.Println(err)
		case v.Done:
			fmt.Println("|", v.Response.Text())
		default:
			fmt.Print(v.Chunk.Text(), "/")
		}
	}
	// Output: roses /are /red/| roses are red
}

// A step: what varies between executions (the clock, a random number, an API call) goes in
// loupe.Run. In a durable run its result is journaled, and a run resumed after an approval or
// taken over after a crash gets the same value back without calling it again.
func ExampleRun() {
	app := loupe.New()
	calls := 0
	quote := loupe.DefineFlow(app, "quote", func(ctx context.Context, item string) (string, error) {
		price, err := loupe.Run(ctx, "price", func() (int, error) {
			calls++ // a pricing API, say
			return 42, nil
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: %d EUR", item, price), nil
	})
	out, err := quote.Run(context.Background(), "lamp")
	fmt.Println(out, err, calls)
	// Output: lamp: 42 EUR <nil> 1
}

// A streaming flow relays its generate's chunks to its caller, who reads them as they come.
func ExampleDefineStreamingFlow() {
	app := loupe.New()
	scripted.DefineTurns(app, "teller", scripted.Text("once upon a time").WithChunks(
		[]*ai.Part{ai.NewTextPart("once ")}, []*ai.Part{ai.NewTextPart("upon a time")}))
	story := loupe.DefineStreamingFlow(app, "story", func(ctx context.Context, topic string, send ai.ModelStreamCallback) (string, error) {
		return loupe.GenerateText(ctx, app, ai.WithModelName("teller"), ai.WithPrompt("A story about %s", topic), ai.WithStreaming(send))
	})
	for v, err := range story.Stream(context.Background(), "dragons") {
		switch {
		case err != nil:
			fmt.Println(err)
		case v.Done:
			fmt.Println("=", v.Output)
		default:
			fmt.Printf("[%s]", v.Stream.Text())
		}
	}
	// Output: [once ][upon a time]= once upon a time
}

// A tool that a person approves before it acts, with no interrupt in its code: in a durable run
// (devui), the model's call of sendEmail waits in the inbox; approving it sends the e-mail, editing
// it sends the edited one, denying it tells the model. Its definition carries the mark.
func ExampleRequireApproval() {
	app := loupe.New()
	send := loupe.DefineTool(app, "sendEmail", "Sends an e-mail.",
		func(_ *ai.ToolContext, in struct {
			To string `json:"to"`
		}) (string, error) {
			return "sent to " + in.To, nil
		}, loupe.RequireApproval())
	fmt.Println(send.Definition().Metadata)
	// Output: map[loupe.requireApproval:true]
}
