package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// An external action runs somewhere else: a Genkit app's flow or generate, called through its
// reflection API by a proxy registered in this service's registry (internal/genkitapp). Its run is
// a run like any other: queued, leased, streamed into run_chunks, finished by the worker. What the
// engine's hooks record for a generate that runs here, the proxy reports through External: the
// conversation, the response, and whether it stopped on interrupts; and on resume it reads the
// recorded conversation and the reviewers' decisions as Genkit's resume.respond / resume.restart.

// MetaExternal marks an action description (its metadata) as external: it can be re-run, but not
// replayed exactly or forked, which need the engine's generate loop.
const MetaExternal = "loupe:external"

// External is the run an external action executes in. Its methods are safe for one goroutine,
// the action's.
type External struct {
	rec              *recorder
	linked           string
	history          []*engine.Message
	respond, restart []*engine.Part
}

type externalKey struct{}

func withExternal(ctx context.Context, e *External) context.Context {
	return context.WithValue(ctx, externalKey{}, e)
}

// ExternalFrom returns the run that an action executes in, or nil outside a run service's worker.
func ExternalFrom(ctx context.Context) *External {
	e, _ := ctx.Value(externalKey{}).(*External)
	return e
}

// RunID is the run's id.
func (e *External) RunID() string { return e.rec.run.ID.String() }

// History is the conversation recorded when the run stopped (its last message is the interrupted
// model message), or nil for a first execution.
func (e *External) History() []*engine.Message { return e.history }

// Resume returns the reviewers' decisions on the history's interrupts as Genkit's resume.respond
// (toolResponse parts) and resume.restart (toolRequest parts with metadata.resumed) entries. A
// restart whose input the reviewer did not edit carries the original input, with replacedInput
// set to it when it was edited, as Genkit's tool.restart() builds them.
func (e *External) Resume() (respond, restart []*engine.Part) {
	if len(e.history) == 0 {
		return nil, nil
	}
	original := map[string]any{}
	for _, p := range e.history[len(e.history)-1].ToolRequests() {
		original[p.ToolRequest.Ref] = p.ToolRequest.Input
	}
	for _, p := range e.restart {
		cp := *p
		tr := *p.ToolRequest
		cp.ToolRequest = &tr
		cp.Metadata = map[string]any{}
		for k, v := range p.Metadata {
			cp.Metadata[k] = v
		}
		if _, replaced := cp.Metadata[engine.MetaReplacedInput]; replaced {
			cp.Metadata[engine.MetaReplacedInput] = original[tr.Ref]
		} else {
			tr.Input = original[tr.Ref]
		}
		restart = append(restart, &cp)
	}
	return e.respond, restart
}

// SetTraceID links the run to the trace the other process recorded for this execution, at once
// (the trace is the run's while it runs, and after a cancel): the run's trace_id, unless it has one
// already, and the execution's trace among the run's (store.RunTraceAdd), which finds it when the
// other process's spans carry no run id. It may be called again with the same id.
func (e *External) SetTraceID(id string) {
	r := e.rec
	r.mu.Lock()
	if r.traceID == "" && r.run.TraceID == nil {
		r.traceID = id
	}
	linked := e.linked == id
	e.linked = id
	r.mu.Unlock()
	if linked || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.svc.store.RunTraceAdd(ctx, r.lease.fence, id); err != nil {
		r.svc.log.Warn("link the run to its execution's trace", "run", r.run.ID, "trace", id, "err", err)
	}
}

// HasGates reports whether the policy in force has gate rules: a generate that runs in another
// process then hands its tool requests back (Genkit's returnToolRequests) for Gate to look at
// before any of its tools runs.
func (e *External) HasGates(ctx context.Context) (bool, error) {
	set, err := e.rec.svc.gatePolicy(ctx)
	if err != nil {
		return false, err
	}
	return set.HasGates(), nil
}

// Gate reports whether a call of the tool name with input, asked for by a generate that runs in
// another process, must ask a person before the tool runs, and the metadata of the interrupt to
// raise: required (the tool's definition asks for approval, loupe.RequireApproval's metadata), or
// a gate rule of the policy in force matches it. The other process runs the call only once it is
// approved (resume.restart) or edited, and answers the model with a denial.
func (e *External) Gate(ctx context.Context, name string, input json.RawMessage, required bool) (map[string]any, bool, error) {
	return e.rec.svc.gateCall(ctx, e.rec.run, name, input, required)
}

// ToolSchemas are a tool's JSON schemas, either may be nil.
type ToolSchemas struct {
	Input, Output json.RawMessage
}

// ExternalGenerate is what a generate that ran in another process did.
type ExternalGenerate struct {
	// Messages is the whole conversation the generate was given, or ended up with before its last
	// response (Genkit's response.request.messages): the recorded history comes first.
	Messages []*engine.Message
	// Response is its last response; finishReason "interrupted" stops the run for reviewers.
	Response *engine.ModelResponse
	// Model names the model, for the run's row.
	Model string
	// Tools holds the schemas of its tools by name, stored with its interrupts so that reviewers'
	// answers are checked against them.
	Tools map[string]ToolSchemas
}

// RecordGenerate records a generate that ran elsewhere as the engine's hooks record one that runs
// here: each message past the recorded history, then the response's message, with turns counted
// as the recorder counts them (a message's turn is the number of model messages before it). The
// run finishes interrupted when the response is, once the action returns.
func (e *External) RecordGenerate(g ExternalGenerate) error {
	if g.Response == nil || g.Response.Message == nil {
		return fmt.Errorf("record external generate of run %s: the response has no message", e.RunID())
	}
	r := e.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append(append([]*engine.Message(nil), g.Messages...), g.Response.Message)
	models := 0
	for i, m := range all {
		turn := models
		if m.Role == engine.RoleModel {
			models++
		} else {
			turn = max(models-1, 0)
		}
		if i < r.baseIndex {
			continue // recorded already
		}
		content, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("record message: %w", err)
		}
		r.messages = append(r.messages, store.RunMessage{RunID: r.run.ID, Seq: i, Turn: turn, Role: string(m.Role), Content: content})
		r.nextSeq = max(r.nextSeq, i+1)
		r.turn = turn
		r.maxTurn = max(r.maxTurn, turn+1)
	}
	if g.Model != "" {
		r.model = g.Model
	}
	// The generate is the turn's model call in the ledger, for the run's token counts (Genkit's
	// usage is the whole generate's). It is written with the next checkpoint, the run's end.
	req, err := json.Marshal(map[string]any{"messages": g.Messages})
	if err != nil {
		return fmt.Errorf("record external generate: %w", err)
	}
	resp, err := json.Marshal(g.Response)
	if err != nil {
		return fmt.Errorf("record external generate: %w", err)
	}
	r.lastCall = &store.ModelCall{RunID: r.run.ID, Turn: r.turn, Model: r.model, Request: req, Response: resp}
	if r.toolSchemas == nil {
		r.toolSchemas = map[string]ToolSchemas{}
	}
	for name, s := range g.Tools {
		r.toolSchemas[name] = s
	}
	if g.Response.FinishReason == engine.FinishReasonInterrupted && len(g.Response.Interrupts()) > 0 {
		r.interrupted = g.Response
	} else {
		r.final = g.Response
	}
	return nil
}
