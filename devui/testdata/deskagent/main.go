// Command deskagent is a support desk written against Loupe's public API alone, in a module of
// its own outside Loupe's path, as issue 23's second agent was: flows of several generate calls
// and a step, whose tools act (a refund, e-mails) and ask a person first.
// TestDeskFlowsOfAnotherModuleStopAtInterruptsAcrossKills builds it and runs its flows durably,
// SIGKILLing its workers between their steps.
//
// Each time a tool or a step acts, it appends a line to the file $DESK_EFFECTS. With $DESK_PAUSE
// (a directory) set, a flow stops for good after each generate call or step that returned, the
// first time any process gets there, and says so in $DESK_PAUSE/paused: the test kills it there.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/devui"
	"github.com/loupe-dev/loupe/scripted"
)

// Order names the order a tool works on.
type Order struct {
	Order int `json:"order"`
}

// Mail is what an e-mail tool sends.
type Mail struct {
	Text string `json:"text"`
}

// Refund is the typed output of the typed flow.
type Refund struct {
	Refunded bool `json:"refunded"`
	Order    int  `json:"order"`
}

func main() {
	app := loupe.New()
	refund := loupe.DefineTool(app, "refund", "Refunds an order, once a person approved it.",
		func(tc *ai.ToolContext, in Order) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{"message": fmt.Sprintf("Refund order %d?", in.Order)}})
			}
			effect(fmt.Sprintf("refund %d", in.Order))
			return fmt.Sprintf("refunded %d", in.Order), nil
		})
	notify := loupe.DefineTool(app, "notify", "E-mails the customer.",
		func(tc *ai.ToolContext, in Mail) (string, error) {
			effect("notify")
			return "sent", nil
		})
	email := loupe.DefineTool(app, "email", "E-mails the customer, once a person approved the text.",
		func(tc *ai.ToolContext, in Mail) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{"message": "Send this e-mail?"}})
			}
			effect("email")
			return "emailed", nil
		})
	lookup := loupe.DefineTool(app, "lookup", "Looks an order up.",
		func(tc *ai.ToolContext, in Order) (string, error) {
			effect("lookup")
			return fmt.Sprintf("order %d: 2 items", in.Order), nil
		})
	scripted.Define(app, "desk", desk)
	gen := func(ctx context.Context, point, prompt string, tool ai.Tool) (string, error) {
		text, err := loupe.GenerateText(ctx, app, ai.WithModelName("desk"), ai.WithTools(tool), ai.WithPrompt(prompt))
		if err == nil {
			pause(point)
		}
		return text, err
	}

	// twostep refunds, once a person approved, reads the clock in a step, then e-mails.
	loupe.DefineFlow(app, "twostep", func(ctx context.Context, order int) (string, error) {
		t1, err := gen(ctx, "twostep refund", fmt.Sprintf("refund %d", order), refund)
		if err != nil {
			return "", err
		}
		at, err := loupe.Run(ctx, "stamp", func() (int64, error) {
			effect("stamp")
			return time.Now().UnixNano(), nil
		})
		if err != nil {
			return "", err
		}
		pause("twostep stamp")
		t2, err := gen(ctx, "twostep notify", "notify: "+t1, notify)
		return fmt.Sprintf("%s (%d)", t2, at), err
	})
	// threestep looks the order up, refunds it and e-mails, the last two once a person approved.
	loupe.DefineFlow(app, "threestep", func(ctx context.Context, order int) (string, error) {
		t1, err := gen(ctx, "threestep lookup", fmt.Sprintf("lookup %d", order), lookup)
		if err != nil {
			return "", err
		}
		t2, err := gen(ctx, "threestep refund", fmt.Sprintf("refund %d", order), refund)
		if err != nil {
			return "", err
		}
		t3, err := gen(ctx, "threestep email", "email: "+t2, email)
		if err != nil {
			return "", err
		}
		return t1 + " | " + t2 + " | " + t3, nil
	})
	// swallow ignores its generate calls' errors, as a careless flow would.
	loupe.DefineFlow(app, "swallow", func(ctx context.Context, order int) (string, error) {
		t1, _ := gen(ctx, "swallow refund", fmt.Sprintf("refund %d", order), refund)
		t2, _ := gen(ctx, "swallow notify", "notify: "+t1, notify)
		return "swallowed: " + t2, nil
	})
	// typed asks for structured output from a generate whose tool asks a person first.
	loupe.DefineFlow(app, "typed", func(ctx context.Context, order int) (*Refund, error) {
		out, _, err := loupe.GenerateData[Refund](ctx, app, ai.WithModelName("desk"), ai.WithTools(refund),
			ai.WithPrompt("typed %d", order))
		if err == nil {
			pause("typed")
		}
		return out, err
	})
	devui.Main(app)
}

// desk plays the model: its first turn calls the tool its prompt names, its next one answers
// with the prompt and the tools' outputs.
func desk(req *ai.ModelRequest) (scripted.Turn, error) {
	var prompt string // the user's message, without the output instructions a typed generate adds
	for _, m := range req.Messages {
		if m.Role == ai.RoleUser {
			prompt = m.Content[0].Text
			break
		}
	}
	var order int
	_, _ = fmt.Sscanf(prompt[strings.LastIndex(prompt, " ")+1:], "%d", &order)
	if scripted.ModelTurns(req.Messages) > 0 {
		var outs []string
		for _, m := range req.Messages {
			for _, p := range m.Content {
				if p.ToolResponse != nil {
					// The output is the tool's JSON, as json.RawMessage or decoded.
					raw, _ := json.Marshal(p.ToolResponse.Output)
					var out any
					_ = json.Unmarshal(raw, &out)
					outs = append(outs, fmt.Sprint(out))
				}
			}
		}
		if strings.HasPrefix(prompt, "typed") {
			return scripted.Text(fmt.Sprintf(`{"refunded": %t, "order": %d}`, strings.HasPrefix(outs[0], "refunded"), order)), nil
		}
		return scripted.Text(prompt + " => " + strings.Join(outs, ",")), nil
	}
	switch verb, _, _ := strings.Cut(prompt, " "); verb {
	case "refund", "typed":
		return scripted.Reply(scripted.ToolCall("refund", "r1", Order{Order: order})), nil
	case "lookup":
		return scripted.Reply(scripted.ToolCall("lookup", "l1", Order{Order: order})), nil
	case "notify:":
		return scripted.Reply(scripted.ToolCall("notify", "n1", Mail{Text: prompt})), nil
	case "email:":
		return scripted.Reply(scripted.ToolCall("email", "e1", Mail{Text: prompt})), nil
	}
	return scripted.Turn{}, fmt.Errorf("desk: no script for %q", prompt)
}

// effect records that a tool or a step acted.
func effect(what string) {
	f, err := os.OpenFile(os.Getenv("DESK_EFFECTS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, what); err != nil {
		panic(err)
	}
}

// pause stops this process for good at point, the first time any process gets there.
func pause(point string) {
	dir := os.Getenv("DESK_PAUSE")
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "passed "+point), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return // passed before: go on
	}
	_ = f.Close()
	if err := os.WriteFile(filepath.Join(dir, "paused"), []byte(point), 0o644); err != nil {
		panic(err)
	}
	select {} // the test kills this process here
}
