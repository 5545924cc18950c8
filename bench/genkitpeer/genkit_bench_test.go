// Package genkitpeer benchmarks Firebase Genkit Go v1.4.0 on the same
// scenario as Loupe's BenchmarkGenerate3ToolTurns: one generate call that
// runs 3 tool turns against a scripted, in-process model (4 model calls and
// 3 tool calls per op), with spans recorded by the OTel SDK into an
// in-memory exporter.
//
// It lives in its own Go module so Genkit never enters Loupe's dependencies.
package genkitpeer

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

const (
	toolTurns   = 3 // tool-request turns before the final answer
	maxTurns    = 5
	finalText   = "1 + 2 = 3, three times over."
	resetEvery  = 256 // ops between in-memory exporter resets
	modelName   = "scripted/model"
	toolName    = "add"
	promptText  = "add 1 and 2, three times"
	wantToolSum = 3
)

// addInput is the tool's input; the scripted model always asks for {"a":1,"b":2}.
type addInput struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOutput struct {
	Sum int `json:"sum"`
}

// fixture is built once per process: genkit.Init starts a signal-watching
// goroutine and registries reject duplicate definitions, so benchmarks that
// the testing package re-runs with growing b.N must share one instance.
type fixture struct {
	g        *genkit.Genkit
	model    ai.Model
	tool     *ai.ToolDef[addInput, addOutput]
	exporter *tracetest.InMemoryExporter
	toolRuns atomic.Int64
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

// toolRefs are the per-turn call IDs a real provider would assign. Giving
// them up front keeps Genkit from generating a UUID per request, which no
// real provider integration would need either.
var toolRefs = func() []string {
	refs := make([]string, toolTurns)
	for i := range refs {
		refs[i] = "call_" + strconv.Itoa(i+1)
	}
	return refs
}()

func setup() (*fixture, error) {
	fixOnce.Do(func() {
		// The dev-mode reflection server and telemetry client only start
		// when GENKIT_ENV=dev / GENKIT_TELEMETRY_SERVER are set. Refuse to
		// run rather than silently measure them.
		for _, k := range []string{"GENKIT_ENV", "GENKIT_TELEMETRY_SERVER"} {
			if v := os.Getenv(k); v != "" {
				fixErr = fmt.Errorf("%s=%q is set; unset it so the benchmark measures the engine, not dev tooling", k, v)
				return
			}
		}

		f := &fixture{exporter: tracetest.NewInMemoryExporter()}
		// Genkit's tracing package uses the global TracerProvider when it is
		// an *sdktrace.TracerProvider, so install ours before Init.
		otel.SetTracerProvider(sdktrace.NewTracerProvider(
			sdktrace.WithSyncer(f.exporter),
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
		))

		f.g = genkit.Init(context.Background())

		f.model = genkit.DefineModel(f.g, modelName,
			&ai.ModelOptions{
				Label:    "Scripted model",
				Supports: &ai.ModelSupports{Multiturn: true, Tools: true},
			},
			scriptedModel,
		)

		f.tool = genkit.DefineTool(f.g, toolName, "Adds two integers.",
			func(_ *ai.ToolContext, in addInput) (addOutput, error) {
				f.toolRuns.Add(1)
				return addOutput{Sum: in.A + in.B}, nil
			},
		)
		fix = f
	})
	return fix, fixErr
}

// scriptedModel answers deterministically from the conversation so far: while
// fewer than toolTurns tool messages are in the history it requests the add
// tool, then it returns the final text. Deriving the turn from the request
// (instead of a shared counter) keeps it correct under -cpu/-count and
// concurrent use.
//
// Like Genkit's own plugins (compat_oai, ollama) it sets Response.Request:
// Genkit v1.4.0 does not fill it in, and ModelResponse.History dereferences it.
func scriptedModel(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	turn := 0
	for _, m := range req.Messages {
		if m.Role == ai.RoleTool {
			turn++
		}
	}
	if turn < toolTurns {
		return &ai.ModelResponse{
			Message: &ai.Message{
				Role: ai.RoleModel,
				Content: []*ai.Part{ai.NewToolRequestPart(&ai.ToolRequest{
					Name:  toolName,
					Ref:   toolRefs[turn],
					Input: map[string]any{"a": 1, "b": 2},
				})},
			},
			FinishReason: ai.FinishReasonStop,
			Request:      req,
		}, nil
	}
	return &ai.ModelResponse{
		Message:      ai.NewModelTextMessage(finalText),
		FinishReason: ai.FinishReasonStop,
		Request:      req,
	}, nil
}

func (f *fixture) generate(ctx context.Context) (*ai.ModelResponse, error) {
	return genkit.Generate(ctx, f.g,
		ai.WithModel(f.model),
		ai.WithPrompt(promptText),
		ai.WithTools(f.tool),
		ai.WithMaxTurns(maxTurns),
	)
}

// verify runs one op outside the timed loop and checks the scenario really
// happened: final text returned, tool ran exactly toolTurns times, 4 model
// calls in the history, and spans reached the exporter.
func (f *fixture) verify(ctx context.Context) error {
	f.exporter.Reset()
	before := f.toolRuns.Load()

	resp, err := f.generate(ctx)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	if got := resp.Text(); got != finalText {
		return fmt.Errorf("final text = %q, want %q", got, finalText)
	}
	if runs := f.toolRuns.Load() - before; runs != toolTurns {
		return fmt.Errorf("tool ran %d times, want %d", runs, toolTurns)
	}

	// History = user prompt + (model tool-request, tool response) x 3 + final model message.
	var modelMsgs, toolResps int
	for _, m := range resp.History() {
		switch m.Role {
		case ai.RoleModel:
			modelMsgs++
		case ai.RoleTool:
			for _, p := range m.Content {
				if !p.IsToolResponse() {
					continue
				}
				toolResps++
				out, ok := p.ToolResponse.Output.(map[string]any)
				if !ok || out["sum"] != float64(wantToolSum) {
					return fmt.Errorf("tool response output = %#v, want {sum:%d}", p.ToolResponse.Output, wantToolSum)
				}
			}
		}
	}
	if modelMsgs != toolTurns+1 || toolResps != toolTurns {
		return fmt.Errorf("history has %d model messages and %d tool responses, want %d and %d",
			modelMsgs, toolResps, toolTurns+1, toolTurns)
	}

	spans := f.exporter.GetSpans()
	var modelSpans, toolSpans int
	for _, s := range spans {
		switch s.Name {
		case modelName:
			modelSpans++
		case toolName:
			toolSpans++
		}
	}
	if modelSpans != toolTurns+1 || toolSpans != toolTurns {
		return fmt.Errorf("exporter saw %d model spans and %d tool spans (of %d), want %d and %d",
			modelSpans, toolSpans, len(spans), toolTurns+1, toolTurns)
	}
	return nil
}

func BenchmarkGenkitGenerate3ToolTurns(b *testing.B) {
	f, err := setup()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := f.verify(ctx); err != nil {
		b.Fatalf("correctness check failed: %v", err)
	}
	spansPerOp := len(f.exporter.GetSpans())
	f.exporter.Reset()

	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := f.generate(ctx); err != nil {
			b.Fatal(err)
		}
		if i%resetEvery == resetEvery-1 {
			f.exporter.Reset()
		}
	}
	f.exporter.Reset()
	b.ReportMetric(float64(spansPerOp), "spans/op")
}
