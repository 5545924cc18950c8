package ai_test

import (
	"context"
	"fmt"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/scripted"
)

// A tool that asks a person first: the generate stops with FinishReasonInterrupted, and goes on
// when the interrupted call is restarted (approved). Run durably, Loupe's inbox does this for you.
func ExampleToolContext_Interrupt() {
	app := loupe.New()
	transfer := loupe.DefineTool(app, "transfer", "Sends money once a person confirms.",
		func(tc *ai.ToolContext, in struct {
			Amount int `json:"amount"`
		}) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{"message": fmt.Sprintf("Send %d?", in.Amount)}})
			}
			return fmt.Sprintf("sent %d", in.Amount), nil
		})
	scripted.Define(app, "banker", func(req *ai.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(scripted.ToolCall("transfer", "t1", map[string]any{"amount": 50})), nil
		}
		return scripted.Text("Done."), nil
	})
	ctx := context.Background()
	opts := []ai.GenerateOption{ai.WithModelName("banker"), ai.WithTools(transfer)}
	resp, _ := loupe.Generate(ctx, app, append(opts, ai.WithPrompt("Send 50 to Ada"))...)
	fmt.Println(resp.FinishReason, resp.Message.Content[0].Metadata["interrupt"])

	resp, _ = loupe.Generate(ctx, app, append(opts, ai.WithMessages(resp.History()...),
		ai.WithToolRestarts(ai.RestartPart("transfer", "t1", nil, nil)))...)
	fmt.Println(resp.Text())
	// Output:
	// interrupted map[message:Send 50?]
	// Done.
}
