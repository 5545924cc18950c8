package demo

import (
	"context"
	"fmt"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/scripted"
)

// TransferInput is the money transfer flow's input.
type TransferInput struct {
	To       string  `json:"to" jsonschema:"minLength=1,example=bob"`
	Amount   float64 `json:"amount" jsonschema:"exclusiveMinimum=0,example=500"`
	Currency string  `json:"currency" jsonschema:"minLength=3,maxLength=3,example=CNY"`
}

// TransferResult is the transfer tool's output.
type TransferResult struct {
	Status       string  `json:"status"`
	Confirmation string  `json:"confirmation"`
	To           string  `json:"to"`
	Amount       float64 `json:"amount"`
	Currency     string  `json:"currency"`
}

var symbols = map[string]string{"CNY": "¥", "JPY": "¥", "EUR": "€", "USD": "$", "GBP": "£"}

func defineTransfer(app *loupe.App, model string, fx *effects) {
	transfer := loupe.DefineTool(app, "transfer", "Transfers money. It asks for confirmation, and executes when restarted.",
		func(tc *ai.ToolContext, in TransferInput) (TransferResult, error) {
			if !tc.IsResumed() {
				sym := symbols[in.Currency]
				if sym == "" {
					sym = in.Currency + " "
				}
				return TransferResult{}, tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{
					"message": fmt.Sprintf("Confirm transfer of %s%g to %s?", sym, in.Amount, in.To),
				}})
			}
			defer fx.act(tc)()
			return TransferResult{
				Status: "sent", Confirmation: fmt.Sprintf("TX-%08d", hash(tc.IdempotencyKey)%100000000),
				To: in.To, Amount: in.Amount, Currency: in.Currency,
			}, nil
		}, ai.WithDenial(func(by, reason string) any {
			// The transfer's own denial shape: what the bank would say.
			return map[string]any{"denied": true, "status": "not sent", "reason": reason, "declined_by": by}
		}))
	loupe.DefineFlow(app, "transferMoney", func(ctx context.Context, in TransferInput) (string, error) {
		resp, err := loupe.Generate(ctx, app,
			ai.WithModelName(model),
			ai.WithSystem("You move money for the user with the transfer tool, then confirm what happened."),
			ai.WithPrompt(fmt.Sprintf("Send %g %s to %s.", in.Amount, in.Currency, in.To)),
			ai.WithTools(transfer),
		)
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// transferScript: one transfer call, then an answer from its result.
func transferScript(req *ai.ModelRequest) (scripted.Turn, error) {
	if scripted.ModelTurns(req.Messages) == 0 {
		var to, cur string
		var amount float64
		if _, err := fmt.Sscanf(firstUserText(req), "Send %g %s to %s", &amount, &cur, &to); err != nil {
			return scripted.Turn{}, fmt.Errorf("demo transfer script: unexpected prompt %q", firstUserText(req))
		}
		to = trimDot(to)
		return scripted.Reply(scripted.ToolCall("transfer", "transfer-1",
			map[string]any{"to": to, "amount": amount, "currency": cur})).WithUsage(90, 20), nil
	}
	for _, tr := range toolResponses(req) {
		if reason, ok := denied(tr); ok {
			return say("The transfer was not made: " + reason + "."), nil
		}
		if m, ok := asMap(tr.Output); ok {
			return say(fmt.Sprintf("Done: sent %v %v to %v (confirmation %v).", m["amount"], m["currency"], m["to"], m["confirmation"])), nil
		}
	}
	return say("The transfer is complete."), nil
}

func trimDot(s string) string {
	if len(s) > 0 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}
