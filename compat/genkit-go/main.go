// Command genkit-go is a Genkit Go v1.4.0 app with a scripted model, for Loupe's compatibility
// check (compat/genkit-go.sh): the same actions as the Genkit JS app of compat/genkit-js, so the
// same checks (compat/genkit-js/check.mjs) run against both. Everything it answers is
// deterministic, so a check can compare exact texts. Run it with GENKIT_ENV=dev: Genkit then starts
// its reflection server and writes a runtime file under .genkit/runtimes/ of this folder (the
// nearest go.mod up from its working directory), which Loupe discovers.
//
// The scripted model reads the conversation:
//   - the last message is a tool's answer -> it answers in text, quoting the tool's output;
//   - the user asks for the weather -> it requests getWeather;
//   - the user asks to transfer (or "send") money -> it requests approveTransfer (an interrupt);
//   - the user asks to wire money -> it requests transferMoney (a tool that interrupts until restarted);
//   - otherwise it echoes the prompt.
//
// It streams its text word by word when the caller streams.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
)

// Weather is getWeather's answer.
type Weather struct {
	City  string  `json:"city"`
	TempC float64 `json:"tempC"`
}

// City is getWeather's and weatherFlow's input.
type City struct {
	City string `json:"city"`
}

// Transfer is the input of the transfer tools, prompts and flow.
type Transfer struct {
	To     string  `json:"to"`
	Amount float64 `json:"amount"`
}

// Approval is approveTransfer's answer, which a reviewer gives.
type Approval struct {
	Approved bool   `json:"approved"`
	Note     string `json:"note,omitempty"`
}

// Transferred is transferMoney's answer once it runs.
type Transferred struct {
	Done   bool    `json:"done"`
	To     string  `json:"to"`
	Amount float64 `json:"amount"`
}

// Countdown is countdown's input; Tick its chunks.
type Countdown struct {
	From int `json:"from"`
	// PauseMs, when set, is how long countdown waits after each chunk, so that a check can act
	// while the flow still streams.
	PauseMs int `json:"pauseMs,omitempty"`
}

// Tick is one chunk of countdown.
type Tick struct {
	N int `json:"n"`
}

var (
	amountRe = regexp.MustCompile(`(\d+(?:\.\d+)?)`)
	toRe     = regexp.MustCompile(`\bto\s+([A-Za-z]+)`)
	cityRe   = regexp.MustCompile(`\bin\s+([A-Za-z]+)`)
	refs     atomic.Int64
)

func parseTransfer(text string) Transfer {
	t := Transfer{To: "nobody"}
	if m := amountRe.FindStringSubmatch(text); m != nil {
		t.Amount, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := toRe.FindStringSubmatch(text); m != nil {
		t.To = m[1]
	}
	return t
}

func lastUserText(msgs []*ai.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != ai.RoleUser {
			continue
		}
		if t := strings.TrimSpace(msgs[i].Text()); t != "" {
			return t
		}
	}
	return ""
}

// compact is v as JSON without spaces, as JSON.stringify writes it.
func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func scripted(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	msgs := req.Messages
	var content []*ai.Part
	if n := len(msgs); n > 0 && msgs[n-1].Role == ai.RoleTool {
		var outs []string
		for _, p := range msgs[n-1].Content {
			if p.ToolResponse != nil {
				outs = append(outs, p.ToolResponse.Name+"="+compact(p.ToolResponse.Output))
			}
		}
		content = []*ai.Part{ai.NewTextPart("Done: " + strings.Join(outs, ", "))}
	} else {
		prompt := lastUserText(msgs)
		tools := map[string]bool{}
		for _, t := range req.Tools {
			tools[t.Name] = true
		}
		ref := func() string { return fmt.Sprintf("r%d", refs.Add(1)) }
		lower := strings.ToLower(prompt)
		switch {
		case strings.Contains(lower, "weather") && tools["getWeather"]:
			city := "Paris"
			if m := cityRe.FindStringSubmatch(prompt); m != nil {
				city = m[1]
			}
			content = []*ai.Part{ai.NewToolRequestPart(&ai.ToolRequest{Name: "getWeather", Ref: ref(), Input: map[string]any{"city": city}})}
		case regexp.MustCompile(`\b(transfer|send)\b`).MatchString(lower) && tools["approveTransfer"]:
			content = []*ai.Part{ai.NewToolRequestPart(&ai.ToolRequest{Name: "approveTransfer", Ref: ref(), Input: parseTransfer(prompt)})}
		case regexp.MustCompile(`\bwire\b`).MatchString(lower) && tools["transferMoney"]:
			content = []*ai.Part{ai.NewToolRequestPart(&ai.ToolRequest{Name: "transferMoney", Ref: ref(), Input: parseTransfer(prompt)})}
		default:
			content = []*ai.Part{ai.NewTextPart("You said: " + prompt)}
		}
	}
	if cb != nil {
		for _, p := range content {
			if !p.IsText() {
				continue
			}
			words := strings.SplitAfter(p.Text, " ")
			for _, w := range words {
				if err := cb(ctx, &ai.ModelResponseChunk{Content: []*ai.Part{ai.NewTextPart(w)}}); err != nil {
					return nil, err
				}
			}
		}
	}
	return &ai.ModelResponse{
		Message:      &ai.Message{Role: ai.RoleModel, Content: content},
		FinishReason: ai.FinishReasonStop,
		// As Genkit Go's model plugins do: the response keeps its request, so a flow that returns it
		// returns the conversation too.
		Request: req,
		Usage:   &ai.GenerationUsage{InputTokens: len(msgs), OutputTokens: len(content)},
	}, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	g := genkit.Init(ctx)

	model := genkit.DefineModel(g, "scripted", &ai.ModelOptions{
		Label:    "Scripted model",
		Supports: &ai.ModelSupports{Multiturn: true, Tools: true, SystemRole: true},
	}, scripted)

	getWeather := genkit.DefineTool(g, "getWeather", "The current weather in a city",
		func(tc *ai.ToolContext, in City) (Weather, error) { return Weather{City: in.City, TempC: 21}, nil })

	// approveTransfer asks a person: it always interrupts, and a reviewer answers it
	// (resume.respond) with an Approval. Genkit Go has no defineInterrupt; this is its equivalent.
	approveTransfer := genkit.DefineTool(g, "approveTransfer", "Ask a person to approve a money transfer",
		func(tc *ai.ToolContext, in Transfer) (Approval, error) {
			return Approval{}, tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{
				"message": fmt.Sprintf("Send %s to %s?", strconv.FormatFloat(in.Amount, 'f', -1, 64), in.To)}})
		})

	// transferMoney interrupts until it is restarted (resume.restart), then executes.
	transferMoney := genkit.DefineTool(g, "transferMoney", "Transfer money; needs a confirmation first",
		func(tc *ai.ToolContext, in Transfer) (Transferred, error) {
			if !tc.IsResumed() {
				return Transferred{}, tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{
					"message": fmt.Sprintf("Wire %s to %s?", strconv.FormatFloat(in.Amount, 'f', -1, 64), in.To)}})
			}
			return Transferred{Done: true, To: in.To, Amount: in.Amount}, nil
		})

	genkit.DefineFlow(g, "weatherFlow", func(ctx context.Context, in City) (string, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModel(model),
			ai.WithPrompt("What is the weather in %s?", in.City), ai.WithTools(getWeather))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})

	genkit.DefineStreamingFlow(g, "countdown", func(ctx context.Context, in Countdown, send func(context.Context, Tick) error) (string, error) {
		for n := in.From; n > 0; n-- {
			if send != nil {
				if err := send(ctx, Tick{N: n}); err != nil {
					return "", err
				}
			}
			if in.PauseMs > 0 {
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(time.Duration(in.PauseMs) * time.Millisecond):
				}
			}
		}
		return "liftoff", nil
	})

	genkit.DefineFlow(g, "echo", func(ctx context.Context, text string) (string, error) { return "echo: " + text, nil })

	// transferFlow returns the whole generate response, so when the transfer interrupts, the
	// flow's output is the interrupted response itself, which Loupe can resume through
	// /util/generate. Genkit Go's response names no model: Loupe resumes it with the app's only
	// model. An app with several would return a struct embedding the response with a "model"
	// field (struct{ *ai.ModelResponse; Model string `json:"model"` }).
	genkit.DefineFlow(g, "transferFlow", func(ctx context.Context, in Transfer) (*ai.ModelResponse, error) {
		return genkit.Generate(ctx, g, ai.WithModel(model),
			ai.WithPrompt("Please transfer %s to %s", strconv.FormatFloat(in.Amount, 'f', -1, 64), in.To),
			ai.WithTools(approveTransfer))
	})

	// approvalStatusFlow handles the interrupt its own way: it returns an object of its own with
	// the interrupted tool requests in it, which Loupe cannot resume (and says so).
	genkit.DefineFlow(g, "approvalStatusFlow", func(ctx context.Context, in Transfer) (map[string]any, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModel(model),
			ai.WithPrompt("Please transfer %s to %s", strconv.FormatFloat(in.Amount, 'f', -1, 64), in.To),
			ai.WithTools(approveTransfer))
		if err != nil {
			return nil, err
		}
		if resp.FinishReason == ai.FinishReasonInterrupted {
			return map[string]any{"status": "interrupted", "pending": map[string]any{"interrupts": resp.Interrupts()}}, nil
		}
		return map[string]any{"status": "done", "text": resp.Text()}, nil
	})

	genkit.DefinePrompt(g, "transferPrompt",
		ai.WithDescription("Transfers money after a person approves it"),
		ai.WithModel(model),
		ai.WithInputType(Transfer{}),
		ai.WithTools(approveTransfer, transferMoney),
		ai.WithPrompt("Please transfer {{amount}} to {{to}}"))

	genkit.DefinePrompt(g, "wirePrompt",
		ai.WithDescription("Wires money; the tool itself asks for confirmation and runs when restarted"),
		ai.WithModel(model),
		ai.WithInputType(Transfer{}),
		ai.WithTools(transferMoney),
		ai.WithPrompt("Please wire {{amount}} to {{to}}"))

	if os.Getenv("EXIT_AT_ONCE") != "" {
		// The mistake of a program that defines its actions and returns: its reflection server
		// goes with it (compat/genkit-go.sh checks that devui start backs off such a program).
		log.Printf("genkit-go: returning at once (EXIT_AT_ONCE)")
		return
	}
	log.Printf("genkit-go: ready")
	// The reflection server runs only while the process does.
	<-ctx.Done()
	// Genkit removes its runtime file in a goroutine once ctx is done: give it the time to.
	own := filepath.Join(".genkit", "runtimes", fmt.Sprintf("%d-*.json", os.Getpid()))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m, _ := filepath.Glob(own); len(m) == 0 {
			return
		}
	}
}
