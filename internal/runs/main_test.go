package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// TestMain doubles as a worker process: with LOUPE_RUNS_WORKER_DB set, the test binary runs a
// run worker over that database until it is killed, so that recovery tests can SIGKILL a real
// process.
func TestMain(m *testing.M) {
	if dsn := os.Getenv("LOUPE_RUNS_WORKER_DB"); dsn != "" {
		if err := workerProcess(dsn, os.Getenv("LOUPE_RUNS_BLOCK"), os.Getenv("LOUPE_RUNS_MARKERS")); err != nil {
			fmt.Fprintln(os.Stderr, "worker process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, storetest.LeakOptions()...)
}

func workerProcess(dsn, block, markers string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	reg := engine.NewRegistry()
	defineTestAgent(reg, pool, block, markers)
	faults, err := runs.ParseFaults(os.Getenv("LOUPE_RUNS_FAULTS"))
	if err != nil {
		return err
	}
	svc, err := runs.New(runs.Config{Workers: 4, LeaseTTL: time.Second, Faults: faults}, store.New(pool), reg)
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	svc.Stop()
	return nil
}

// AgentInput picks the test agent's scenario.
type AgentInput struct {
	Scenario string `json:"scenario"`
}

// ConfirmIn is the confirm tool's input.
type ConfirmIn struct {
	Amount int `json:"amount" jsonschema:"minimum=0"`
}

// ConfirmOut is the confirm tool's output.
type ConfirmOut struct {
	OK     bool `json:"ok"`
	Amount int  `json:"amount"`
}

// EffectIn is the effect tool's input.
type EffectIn struct {
	Name  string `json:"name"`
	Block bool   `json:"block,omitempty"`
}

// defineTestAgent registers /flow/testAgent, whose scripted model plays a scenario:
//   - approve1: one confirm call that interrupts; approve2: two in the same turn;
//   - pair: two effect calls in parallel, the second of which blocks when block is "tool";
//   - slow: the model blocks on its first call when block is "model";
//   - pause: the model's first call stalls for two seconds when block is "pause-model";
//   - late: one effect call, which stalls for two seconds before it acts when block is "late-tool".
//
// Every real execution of a tool inserts a row in test_effects, so tests count side effects.
// When a blocking point is reached, a marker file is written to markers.
func defineTestAgent(r *engine.Registry, pool *pgxpool.Pool, block, markers string) {
	mark := func(name string) {
		if markers != "" {
			_ = os.WriteFile(filepath.Join(markers, name), nil, 0o644)
		}
	}
	// The effect is not cut by the run's context: a cancel that lands while the INSERT is in
	// flight would otherwise make the tool report an error for an effect that committed, and the
	// ledger rightly records such a call as started, outcome unknown, not completed.
	effect := func(tc *engine.ToolContext) error {
		_, err := pool.Exec(context.WithoutCancel(tc), `INSERT INTO test_effects (run_id, ref) VALUES ($1, $2)`, engine.RunID(tc), tc.Ref)
		return err
	}
	confirm := engine.DefineTool(r, "confirm", "Asks a person to confirm, then does it.",
		func(tc *engine.ToolContext, in ConfirmIn) (ConfirmOut, error) {
			if !tc.IsResumed() {
				return ConfirmOut{}, tc.Interrupt(&engine.InterruptOptions{Metadata: map[string]any{"message": fmt.Sprintf("Confirm %d?", in.Amount)}})
			}
			if block == "resume" {
				mark("resume")
				<-tc.Done()
				return ConfirmOut{}, tc.Err()
			}
			if err := effect(tc); err != nil {
				return ConfirmOut{}, err
			}
			return ConfirmOut{OK: true, Amount: in.Amount}, nil
		}, engine.WithDenial(func(by, reason string) any {
			return map[string]any{"denied": true, "refused_by": by, "why": reason}
		}))
	eff := engine.DefineTool(r, "effect", "Has a side effect.",
		func(tc *engine.ToolContext, in EffectIn) (string, error) {
			if in.Block && block == "tool" {
				mark("tool")
				<-tc.Done()
				return "", tc.Err()
			}
			if in.Name == "late" && block == "late-tool" {
				mark("late-tool")
				time.Sleep(2 * time.Second) // admitted, not yet acting: the test SIGSTOPs the process here
			}
			if err := effect(tc); err != nil {
				return "", err
			}
			return "did " + in.Name, nil
		})
	scripted.DefineFunc(r, "test/agent", func(req *engine.ModelRequest) (scripted.Turn, error) {
		scenario := req.Messages[0].Text()
		turn := scripted.ModelTurns(req.Messages)
		if turn > 0 {
			var sb []byte
			for _, m := range req.Messages {
				for _, p := range m.Content {
					if p.ToolResponse != nil {
						out, _ := json.Marshal(p.ToolResponse.Output)
						sb = fmt.Appendf(sb, "%s=%s;", p.ToolResponse.Ref, out)
					}
				}
			}
			return scripted.Text("done: "+string(sb)).WithUsage(10, 5), nil
		}
		switch scenario {
		case "approve1":
			return scripted.Reply(scripted.ToolCall("confirm", "c1", map[string]any{"amount": 5})).WithUsage(10, 5), nil
		case "approve2":
			return scripted.Reply(scripted.ToolCall("confirm", "c1", map[string]any{"amount": 1}),
				scripted.ToolCall("confirm", "c2", map[string]any{"amount": 2})).WithUsage(10, 5), nil
		case "pair":
			return scripted.Reply(scripted.ToolCall("effect", "a", map[string]any{"name": "a"}),
				scripted.ToolCall("effect", "b", map[string]any{"name": "b", "block": true})).WithUsage(10, 5), nil
		case "late":
			return scripted.Reply(scripted.ToolCall("effect", "l", map[string]any{"name": "late"})).WithUsage(10, 5), nil
		case "first-effect":
			return scripted.Reply(scripted.ToolCall("effect", "e1", map[string]any{"name": "e1"})).WithUsage(10, 5), nil
		case "second-slow":
			if block == "model2" {
				mark("model2")
				select {} // the second generate's model call never returns; the process is killed here
			}
			return scripted.Reply(scripted.ToolCall("effect", "e2", map[string]any{"name": "e2"})).WithUsage(10, 5), nil
		case "pause":
			if block == "pause-model" {
				mark("pause-model")
				time.Sleep(2 * time.Second) // frozen mid-call: the test SIGSTOPs the process here
			}
			return scripted.Reply(scripted.ToolCall("effect", "p", map[string]any{"name": "p"})).WithUsage(10, 5), nil
		case "slow":
			if block == "model" {
				mark("model")
				select {} // a model call that never returns; the process is killed here
			}
			return scripted.Reply(scripted.ToolCall("effect", "s", map[string]any{"name": "s"})).WithUsage(10, 5), nil
		}
		return scripted.Turn{}, fmt.Errorf("unknown scenario %q", scenario)
	})
	// twoStepAgent calls generate twice: a tool turn and an answer each.
	engine.DefineFlow(r, "twoStepAgent", func(ctx context.Context, _ struct{}) (string, error) {
		var texts []string
		for _, prompt := range []string{"first-effect", "second-slow"} {
			resp, err := engine.Generate(ctx, r, engine.WithModelName("test/agent"), engine.WithPrompt(prompt), engine.WithTools(eff))
			if err != nil {
				return "", err
			}
			texts = append(texts, resp.Text())
		}
		return strings.Join(texts, " | "), nil
	})
	defineDeskAgent(r, pool, block, markers)
	definePolicyAgent(r, effect)
	engine.DefineFlow(r, "testAgent", func(ctx context.Context, in AgentInput) (string, error) {
		resp, err := engine.Generate(ctx, r, engine.WithModelName("test/agent"), engine.WithPrompt(in.Scenario),
			engine.WithTools(confirm, eff))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// defineOneTurnAgent registers flow name, whose model (name + "/model") asks for calls in its
// first turn and says "done" once it has their results; tools are its generate's.
func defineOneTurnAgent(reg *engine.Registry, name string, tools []engine.Tool, calls ...*engine.Part) {
	model := name + "/model"
	scripted.DefineFunc(reg, model, func(req *engine.ModelRequest) (scripted.Turn, error) {
		if scripted.ModelTurns(req.Messages) == 0 {
			return scripted.Reply(calls...), nil
		}
		return scripted.Text("done"), nil
	})
	engine.DefineFlow(reg, name, func(ctx context.Context, _ struct{}) (string, error) {
		resp, err := engine.Generate(ctx, reg, engine.WithModelName(model), engine.WithPrompt("go"), engine.WithTools(tools...))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// serve starts a run service with cfg (and the test logger) over b's store, for the actions of reg.
func (b *bundle) serve(t *testing.T, reg *engine.Registry, cfg runs.Config) *runs.Service {
	t.Helper()
	cfg.Logger = testLogger()
	svc, err := runs.New(cfg, b.store, reg)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	return svc
}
