package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

// The support desk: flows of the shapes a developer writes after the first agent, each made of
// several generate calls and steps, whose tools have side effects and ask for approval. Every
// real execution of a tool or a step inserts a row in test_effects named after what it did
// (refund:7, notify, email, lookup, nonce, after), so tests count effects from the database,
// across processes.

// RefundIn is the refund tool's input.
type RefundIn struct {
	Order int `json:"order"`
}

// RefundResult is the typed output of deskTyped.
type RefundResult struct {
	Refunded bool `json:"refunded"`
	Order    int  `json:"order"`
}

func defineDeskAgent(r *engine.Registry, pool *pgxpool.Pool, block, markers string) {
	effect := func(ctx context.Context, name string) error {
		_, err := pool.Exec(context.WithoutCancel(ctx), `INSERT INTO test_effects (run_id, ref) VALUES ($1, $2)`, engine.RunID(ctx), name)
		return err
	}
	// between blocks a worker process whose block is "desk-between" once a generate call of the
	// flow has returned, the first time the run gets there (test_blocks): the test kills it
	// there, between two steps, and the next process goes on past that point.
	between := func(ctx context.Context, point string) {
		if block != "desk-between" {
			return
		}
		tag, err := pool.Exec(context.WithoutCancel(ctx), `INSERT INTO test_blocks (run_id, point) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			engine.RunID(ctx), point)
		if err != nil || tag.RowsAffected() == 0 {
			return
		}
		_ = os.WriteFile(filepath.Join(markers, block), nil, 0o644)
		select {} // killed here
	}
	refund := engine.DefineTool(r, "deskRefund", "Refunds an order, once a person approved it.",
		func(tc *engine.ToolContext, in RefundIn) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": fmt.Sprintf("Refund order %d?", in.Order)}})
			}
			if err := effect(tc, fmt.Sprintf("refund:%d", in.Order)); err != nil {
				return "", err
			}
			return fmt.Sprintf("refunded %d", in.Order), nil
		})
	notify := engine.DefineTool(r, "deskNotify", "E-mails the customer.",
		func(tc *engine.ToolContext, in struct {
			Text string `json:"text"`
		}) (string, error) {
			if err := effect(tc, "notify"); err != nil {
				return "", err
			}
			return "sent", nil
		})
	email := engine.DefineTool(r, "deskEmail", "E-mails the customer, once a person approved the text.",
		func(tc *engine.ToolContext, in struct {
			Text string `json:"text"`
		}) (string, error) {
			if !tc.IsResumed() {
				return "", tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": "Send this e-mail?"}})
			}
			if err := effect(tc, "email"); err != nil {
				return "", err
			}
			return "emailed", nil
		})
	lookup := engine.DefineTool(r, "deskLookup", "Looks an order up.",
		func(tc *engine.ToolContext, in RefundIn) (string, error) {
			if err := effect(tc, "lookup"); err != nil {
				return "", err
			}
			return fmt.Sprintf("order %d: 2 items", in.Order), nil
		})
	scripted.DefineFunc(r, "desk/model", deskScript)
	gen := func(ctx context.Context, prompt string, tools ...engine.Tool) (string, error) {
		text, err := generateText(ctx, r, engine.WithModelName("desk/model"), engine.WithPrompt(prompt), engine.WithTools(tools...))
		if err == nil {
			between(ctx, "after "+prompt)
		}
		return text, err
	}
	engine.DefineFlow(r, "deskTwoStep", func(ctx context.Context, _ struct{}) (string, error) {
		t1, err := gen(ctx, "refund", refund)
		if err != nil {
			return "", err
		}
		return gen(ctx, "notify: "+t1, notify)
	})
	engine.DefineFlow(r, "deskThreeStep", func(ctx context.Context, _ struct{}) (string, error) {
		t1, err := gen(ctx, "lookup", lookup)
		if err != nil {
			return "", err
		}
		t2, err := gen(ctx, "refund", refund)
		if err != nil {
			return "", err
		}
		t3, err := gen(ctx, "email: "+t2, email)
		if err != nil {
			return "", err
		}
		return t1 + " | " + t2 + " | " + t3, nil
	})
	engine.DefineFlow(r, "deskParallel", func(ctx context.Context, _ struct{}) (string, error) {
		t1, err := gen(ctx, "refund2", refund)
		if err != nil {
			return "", err
		}
		return gen(ctx, "notify: "+t1, notify)
	})
	// deskSwallow ignores the first generate's error, as a careless flow would, and goes on.
	engine.DefineFlow(r, "deskSwallow", func(ctx context.Context, _ struct{}) (string, error) {
		t1, _ := gen(ctx, "refund", refund)
		t2, _ := gen(ctx, "notify: "+t1, notify)
		return "swallowed: " + t2, nil
	})
	engine.DefineFlow(r, "deskTyped", func(ctx context.Context, _ struct{}) (RefundResult, error) {
		var out RefundResult
		resp, err := engine.Generate(ctx, r, engine.WithModelName("desk/model"), engine.WithPrompt("typed"),
			engine.WithTools(refund), engine.WithOutputType[RefundResult]())
		if err != nil {
			return out, err
		}
		between(ctx, "after typed")
		err = resp.Output(&out)
		return out, err
	})
	// deskSteps reads the clock in a step before its approval and acts in another after it.
	engine.DefineFlow(r, "deskSteps", func(ctx context.Context, _ struct{}) (string, error) {
		nonce, err := engine.Run(ctx, "nonce", func() (int64, error) {
			return time.Now().UnixNano(), effect(ctx, "nonce")
		})
		if err != nil {
			return "", err
		}
		t1, err := gen(ctx, "refund", refund)
		if err != nil {
			return "", err
		}
		after, err := engine.Run(ctx, "after", func() (string, error) {
			return "after " + t1, effect(ctx, "after")
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d %s", nonce, after), nil
	})
}

// generateText is Generate's text; the error of an interrupted call stops the flow.
func generateText(ctx context.Context, r *engine.Registry, opts ...engine.GenerateOption) (string, error) {
	resp, err := engine.Generate(ctx, r, opts...)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

// deskScript plays the desk's model: the first turn calls the tool its prompt names, the next
// answers with the prompt and the tools' outputs.
func deskScript(req *engine.ModelRequest) (scripted.Turn, error) {
	var prompt string
	for _, m := range req.Messages {
		if m.Role == engine.RoleUser {
			prompt = m.Content[0].Text
			break
		}
	}
	if scripted.ModelTurns(req.Messages) > 0 {
		var outs []string
		for _, m := range req.Messages {
			for _, p := range m.Content {
				if p.ToolResponse != nil {
					b, _ := json.Marshal(p.ToolResponse.Output)
					outs = append(outs, string(b))
				}
			}
		}
		if prompt == "typed" {
			return scripted.Text(fmt.Sprintf(`{"refunded": %t, "order": 7}`, strings.Contains(outs[0], "refunded 7"))), nil
		}
		return scripted.Text(prompt+" => "+strings.Join(outs, ",")).WithUsage(10, 5), nil
	}
	call := func(tool, ref string, in any) scripted.Turn {
		return scripted.Reply(scripted.ToolCall(tool, ref, in)).WithUsage(10, 5)
	}
	switch {
	case prompt == "refund", prompt == "typed":
		return call("deskRefund", "rf", RefundIn{Order: 7}), nil
	case prompt == "refund2":
		return scripted.Reply(scripted.ToolCall("deskRefund", "r1", RefundIn{Order: 1}),
			scripted.ToolCall("deskRefund", "r2", RefundIn{Order: 2})).WithUsage(10, 5), nil
	case prompt == "lookup":
		return call("deskLookup", "lk", RefundIn{Order: 7}), nil
	case strings.HasPrefix(prompt, "notify: "):
		return call("deskNotify", "nt", map[string]any{"text": prompt}), nil
	case strings.HasPrefix(prompt, "email: "):
		return call("deskEmail", "em", map[string]any{"text": prompt}), nil
	}
	return scripted.Turn{}, fmt.Errorf("desk: unknown prompt %q", prompt)
}
