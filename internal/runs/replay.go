package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
)

// ReplayParams asks for a new run derived from a stored one. Every mode creates a new run linked to
// the original; the original is never modified.
//   - exact: the same action and input, with a model that serves the original's recorded
//     responses and chunks turn by turn and never calls a real model. Tools serve their recorded
//     outputs (Tools "cassette", the default, so that replaying a run never repeats what its
//     tools did), except a call whose input a reviewer of the replay edited (see cassette); with
//     Tools "live" they run again. The first model request, tool input or tool output that
//     differs from the recording is stored as the replay's divergence.
//   - rerun: the same action and input against the live model, with optional Overrides.
//   - fork: the history up to Turn copied as stored, optionally with Edits, then continued live.
type ReplayParams struct {
	RunID     uuid.UUID
	Mode      string
	Turn      *int
	Overrides *Overrides
	Edits     []Edit
	// Tools is cassette or live. Exact replays default to cassette, and only they may use it:
	// re-runs and forks call a live model, which makes new tool calls, and run them live.
	Tools string
	// ApplyResolutions makes an exact replay apply the original reviewers' decisions to the
	// interrupts it raises again, instead of waiting for a reviewer.
	ApplyResolutions bool
	CreatedBy        string
}

// Overrides change a re-execution or a fork. They reach the flow's generate call through engine
// context options, so they win over the flow's own options; a system prompt only applies when the
// generate starts from scratch (not to a fork, whose history already holds one: edit it instead).
type Overrides struct {
	Model    string          `json:"model,omitempty"`
	Config   json.RawMessage `json:"config,omitempty"`
	System   *string         `json:"system,omitempty"`
	MaxTurns *int            `json:"max_turns,omitempty"`
}

// Edit changes one message, or one tool output, of a fork's copied history: Seq and Message
// replace the message at that position; Turn, Ref and Output replace a tool call's output.
type Edit struct {
	Seq     *int            `json:"seq,omitempty"`
	Message json.RawMessage `json:"message,omitempty"`
	Turn    *int            `json:"turn,omitempty"`
	Ref     string          `json:"ref,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
}

// Divergence is the first difference an exact replay found between itself and its original.
type Divergence struct {
	Turn int `json:"turn"`
	// Part is model_request, model_call (the original has no call for the turn), tool_input (a
	// reviewer of the replay edited a call's arguments), tool_output, tool_call (a call the
	// original did not make, or that ended another way), output or status.
	Part     string `json:"part"`
	Ref      string `json:"ref,omitempty"`
	Tool     string `json:"tool,omitempty"`
	Path     string `json:"path,omitempty"`
	Original any    `json:"original,omitempty"`
	Replay   any    `json:"replay,omitempty"`
	Message  string `json:"message"`
}

// Replay creates the derived run, with its lineage, settings and (for a fork) copied history, and
// enqueues it, all in one transaction.
//
// A run derived from a derived run keeps the settings that made its source what it is, so that an
// exact replay reproduces the run it replays and a re-run or fork changes only what it is asked to:
//   - the source's effective overrides (model, config, system, turn limit) carry over, and each
//     override given replaces the inherited one (a config as a whole); the result is stored as
//     the new run's overrides;
//   - a source that copied its history from a turn on (a fork, or a replay of one) has its history
//     before that turn, edits included, copied again, and the exact replay or re-run goes on from
//     there: it is linked as a replay of the source (replay_of) that copies the source's history
//     before the turn (fork_of, fork_turn);
//   - a system override is dropped whenever the history is copied, which holds the system
//     message already.
func (s *Service) Replay(ctx context.Context, p ReplayParams) (*store.Run, error) {
	orig, err := s.store.RunGet(ctx, p.RunID)
	if err != nil {
		return nil, err
	}
	if err := s.checkReplay(ctx, orig, &p); err != nil {
		return nil, err
	}
	var fork *forkPlan
	switch {
	case p.Mode == store.ReplayFork:
		if fork, err = s.planFork(ctx, orig, *p.Turn, p.Edits); err != nil {
			return nil, err
		}
	case orig.ForkTurn != nil:
		if fork, err = s.planCopy(ctx, orig, *orig.ForkTurn); err != nil {
			return nil, err
		}
	}
	inherited, err := s.effectiveOverrides(ctx, orig)
	if err != nil {
		return nil, err
	}
	overrides := mergeOverrides(inherited, p.Overrides, fork != nil)
	settings := store.Replay{SourceRunID: &orig.ID, Mode: p.Mode, Tools: p.Tools, ApplyResolutions: p.ApplyResolutions}
	if overrides != nil {
		if settings.Overrides, err = json.Marshal(overrides); err != nil {
			return nil, fmt.Errorf("encode overrides: %w", err)
		}
	}
	if len(p.Edits) > 0 {
		if settings.Edits, err = json.Marshal(p.Edits); err != nil {
			return nil, fmt.Errorf("encode edits: %w", err)
		}
	}
	create := store.RunCreateParams{Action: orig.Action, Input: orig.Input, CreatedBy: p.CreatedBy, ReplayMode: p.Mode}
	switch {
	case p.Mode == store.ReplayFork:
		create.ForkOf, create.ForkTurn = &orig.ID, p.Turn
	case fork != nil:
		create.ReplayOf, create.ForkOf, create.ForkTurn = &orig.ID, &orig.ID, orig.ForkTurn
	default:
		create.ReplayOf = &orig.ID
	}
	var run *store.Run
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		var err error
		if run, err = tx.RunCreate(ctx, create); err != nil {
			return err
		}
		settings.RunID = run.ID
		if err := tx.ReplayCreate(ctx, settings); err != nil {
			return err
		}
		if fork != nil {
			if err := fork.apply(ctx, tx, orig.ID, run.ID); err != nil {
				return err
			}
			// The copy changed the row (turns, usage); return it as stored, before a worker
			// can pick it up.
			if run, err = tx.RunGet(ctx, run.ID); err != nil {
				return err
			}
		}
		if err := tx.AuditInsert(ctx, p.CreatedBy, "run."+p.Mode, "run", orig.ID.String(),
			map[string]any{"run_id": run.ID, "turn": p.Turn, "tools": settings.Tools, "apply_resolutions": p.ApplyResolutions,
				"overrides": p.Overrides, "edits": len(p.Edits)}); err != nil {
			return err
		}
		return s.enqueue(ctx, tx, run)
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

// effectiveOverrides returns the overrides a derived run ran with (nil for an original run, or a
// derived run without any).
func (s *Service) effectiveOverrides(ctx context.Context, run *store.Run) (*Overrides, error) {
	if run.ReplayMode == nil && run.ForkOf == nil {
		return nil, nil
	}
	settings, err := s.store.ReplayGet(ctx, run.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(settings.Overrides) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var o Overrides
	if err := json.Unmarshal(settings.Overrides, &o); err != nil {
		return nil, fmt.Errorf("decode overrides of run %s: %w", run.ID, err)
	}
	return &o, nil
}

// mergeOverrides lays the requested overrides over the inherited ones; copied says the new run
// starts from a copied history, whose system message a system override cannot change. It returns
// nil when nothing is overridden.
func mergeOverrides(inherited, requested *Overrides, copied bool) *Overrides {
	var m Overrides
	if inherited != nil {
		m = *inherited
	}
	if o := requested; o != nil {
		if o.Model != "" {
			m.Model = o.Model
		}
		if len(o.Config) > 0 {
			m.Config = o.Config
		}
		if o.System != nil {
			m.System = o.System
		}
		if o.MaxTurns != nil {
			m.MaxTurns = o.MaxTurns
		}
	}
	if copied {
		m.System = nil
	}
	if m.Model == "" && len(m.Config) == 0 && m.System == nil && m.MaxTurns == nil {
		return nil
	}
	return &m
}

// checkReplay validates the request against the original run and normalises it.
// The action and an overriding model may be another program's, announced in the catalogue: the
// worker that executes the replay has them.
func (s *Service) checkReplay(ctx context.Context, orig *store.Run, p *ReplayParams) error {
	switch p.Mode {
	case store.ReplayExact, store.ReplayRerun, store.ReplayFork:
	default:
		return &ValidationError{Field: "mode", Message: fmt.Sprintf("%q is not one of exact, rerun, fork", p.Mode)}
	}
	if orig.Status == store.RunQueued || orig.Status == store.RunRunning {
		return fmt.Errorf("run %s is still %s: replay it once it has ended or waits for a reviewer: %w", orig.ID, orig.Status, ErrConflict)
	}
	if d, err := s.lookupAction(ctx, orig.Action); err != nil {
		return err
	} else if d == nil {
		return &ValidationError{Field: "run", Message: fmt.Sprintf("action %s is no longer registered", orig.Action)}
	} else if external, _ := d.Metadata[MetaExternal].(bool); external && p.Mode != store.ReplayRerun {
		// Exact playback and forks work on the engine's generate loop; an external action's loop
		// runs in its own program, which would call the model and run the tools again.
		return &ValidationError{Field: "mode", Message: fmt.Sprintf("%s runs in another program (a Genkit app): it can be re-run (mode rerun), not replayed exactly or forked", orig.Action)}
	}
	switch p.Tools {
	case "":
		p.Tools = store.ReplayToolsLive
		if p.Mode == store.ReplayExact {
			p.Tools = store.ReplayToolsCassette // never repeat an effect unless asked to
		}
	case store.ReplayToolsLive:
	case store.ReplayToolsCassette:
		if p.Mode != store.ReplayExact {
			return &ValidationError{Field: "tools", Message: "cassette tools need mode exact: a live model makes new tool calls"}
		}
	default:
		return &ValidationError{Field: "tools", Message: fmt.Sprintf("%q is not one of live, cassette", p.Tools)}
	}
	if p.ApplyResolutions && p.Mode != store.ReplayExact {
		return &ValidationError{Field: "apply_resolutions", Message: "recorded resolutions are applied by exact replays only; other modes offer them as defaults"}
	}
	if p.Turn != nil && p.Mode != store.ReplayFork {
		return &ValidationError{Field: "turn", Message: "turn applies to mode fork only"}
	}
	if p.Mode == store.ReplayFork && p.Turn == nil {
		return &ValidationError{Field: "turn", Message: "a fork needs the turn to fork from"}
	}
	if len(p.Edits) > 0 && p.Mode != store.ReplayFork {
		return &ValidationError{Field: "edits", Message: "edits apply to mode fork only"}
	}
	if o := p.Overrides; o != nil {
		if p.Mode == store.ReplayExact {
			return &ValidationError{Field: "overrides", Message: "an exact replay serves the recorded responses; use mode rerun or fork to override"}
		}
		if o.Model != "" {
			d, err := s.lookupAction(ctx, o.Model, engine.ActionKey(engine.ActionTypeModel, o.Model))
			if err != nil {
				return err
			}
			if d == nil || d.Type != engine.ActionTypeModel {
				return &ValidationError{Field: "overrides/model", Message: fmt.Sprintf("model %q is not registered", o.Model)}
			}
		}
		if string(bytes.TrimSpace(o.Config)) == "null" {
			o.Config = nil // "config": null overrides nothing
		}
		if len(o.Config) > 0 {
			var cfg map[string]any
			if err := json.Unmarshal(o.Config, &cfg); err != nil {
				return &ValidationError{Field: "overrides/config", Message: "must be a JSON object of model settings, such as {\"temperature\": 0.2}", Cause: err}
			}
		}
		if o.MaxTurns != nil && *o.MaxTurns < 1 {
			return &ValidationError{Field: "overrides/max_turns", Message: fmt.Sprintf("must be 1 or more, not %d; omit it to keep the flow's turn limit", *o.MaxTurns)}
		}
		if o.System != nil && p.Mode == store.ReplayFork {
			return &ValidationError{Field: "overrides/system", Message: "a fork keeps its copied system message; edit that message instead"}
		}
		if o.System != nil && strings.TrimSpace(*o.System) == "" {
			return &ValidationError{Field: "overrides/system", Message: "an empty system prompt is not an override: omit system to keep the flow's own"}
		}
	}
	return nil
}

// ReplayInfo is what the UI shows about a run's place in its lineage: where it comes from, what
// was derived from it, how it was replayed and its divergence, and the decisions offered as
// defaults for its interrupts.
type ReplayInfo struct {
	RunID uuid.UUID `json:"run_id"`
	*store.Lineage
	Replay      *store.Replay                `json:"replay"`
	Suggestions []*store.InterruptSuggestion `json:"suggested_resolutions"`
}

// Lineage returns a run's lineage, its replay settings and divergence, and its suggested
// resolutions.
func (s *Service) Lineage(ctx context.Context, id uuid.UUID) (*ReplayInfo, error) {
	l, err := s.store.RunLineage(ctx, id)
	if err != nil {
		return nil, err
	}
	info := &ReplayInfo{RunID: id, Lineage: l}
	info.Replay, err = s.store.ReplayGet(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if info.Suggestions, err = s.store.InterruptSuggestionList(ctx, id); err != nil {
		return nil, err
	}
	if info.Suggestions == nil {
		info.Suggestions = []*store.InterruptSuggestion{}
	}
	return info, nil
}

// replayer executes a derived run the way it was asked for: overrides for reruns and forks; for
// exact replays a model middleware that serves the original's model calls, a tool middleware that
// compares (or, in cassette mode, serves) tool outputs, and the divergence check. A nil replayer
// (an ordinary run) does nothing.
type replayer struct {
	svc      *Service
	run      *store.Run
	rec      *recorder
	settings *store.Replay
	source   uuid.UUID

	calls      map[int]*store.ModelCall
	chunks     map[int][]*store.RunChunk
	tools      map[toolKey]*store.ToolCall
	interrupts map[toolKey]*store.Interrupt

	mu       sync.Mutex
	diverged bool
}

type toolKey struct {
	turn int
	ref  string
}

// replayFor loads what a derived run's execution needs, and the engine options it adds; it returns
// a nil replayer for an ordinary run. An error wrapping ErrInvalid is permanent.
func (s *Service) replayFor(ctx context.Context, run *store.Run, rec *recorder) (*replayer, []engine.GenerateOption, error) {
	p, err := s.loadReplay(ctx, run, rec)
	if err != nil || p == nil {
		return nil, nil, err
	}
	opts, err := p.options()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return p, opts, nil
}

func (s *Service) loadReplay(ctx context.Context, run *store.Run, rec *recorder) (*replayer, error) {
	if run.ReplayMode == nil && run.ForkOf == nil {
		return nil, nil // an original run: no replay settings to look up
	}
	settings, err := s.store.ReplayGet(ctx, run.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := &replayer{svc: s, run: run, rec: rec, settings: settings, diverged: len(settings.Divergence) > 0}
	if settings.Mode != store.ReplayExact {
		return p, nil
	}
	if settings.SourceRunID == nil {
		return nil, fmt.Errorf("exact replay %s: its original run was deleted: %w", run.ID, ErrInvalid)
	}
	p.source = *settings.SourceRunID
	calls, err := s.store.ModelCallList(ctx, p.source)
	if err != nil {
		return nil, err
	}
	p.calls = make(map[int]*store.ModelCall, len(calls))
	for _, c := range calls {
		p.calls[c.Turn] = c
	}
	chunks, err := s.store.ChunkList(ctx, p.source, 0, 0)
	if err != nil {
		return nil, err
	}
	p.chunks = map[int][]*store.RunChunk{}
	for _, c := range chunks {
		if c.Role == string(engine.RoleModel) {
			p.chunks[c.Turn] = append(p.chunks[c.Turn], c)
		}
	}
	tools, err := s.store.ToolCallList(ctx, p.source)
	if err != nil {
		return nil, err
	}
	p.tools = make(map[toolKey]*store.ToolCall, len(tools))
	for _, t := range tools {
		p.tools[toolKey{t.Turn, t.Ref}] = t
	}
	interrupts, err := s.store.InterruptListByRun(ctx, p.source)
	if err != nil {
		return nil, err
	}
	p.interrupts = map[toolKey]*store.Interrupt{}
	for _, i := range interrupts {
		if _, seen := p.interrupts[toolKey{i.Turn, i.Ref}]; !seen { // the first round: what the tool first asked
			p.interrupts[toolKey{i.Turn, i.Ref}] = i
		}
	}
	return p, nil
}

// options are the engine options the replay adds after the recorder's: its middleware runs inside
// the recorder's, so the recorder records what the replay serves.
func (p *replayer) options() ([]engine.GenerateOption, error) {
	if p == nil {
		return nil, nil
	}
	opts, err := p.overrideOptions()
	if err != nil {
		return nil, err
	}
	if p.settings.Mode == store.ReplayExact {
		opts = append(opts, engine.WithMiddleware(&engine.Middleware{Name: "loupe-replay", Model: p.model, Tool: p.tool}))
	}
	return opts, nil
}

// overrideOptions are the engine options of the run's overrides: those asked for by a re-run or a
// fork, and those inherited from the derived run a replay replays (an exact replay sends the same
// requests, and stops at the same turn limit, as the run it replays).
func (p *replayer) overrideOptions() ([]engine.GenerateOption, error) {
	if len(p.settings.Overrides) == 0 {
		return nil, nil
	}
	var o Overrides
	if err := json.Unmarshal(p.settings.Overrides, &o); err != nil {
		return nil, fmt.Errorf("decode overrides of run %s: %w", p.run.ID, err)
	}
	// The model, its config and the turn limit apply to each generate call of the flow; the
	// system message only to the call the run starts or continues in.
	var every, opts []engine.GenerateOption
	if o.Model != "" {
		every = append(every, engine.WithModelName(o.Model))
	}
	if len(o.Config) > 0 {
		var cfg any
		if err := json.Unmarshal(o.Config, &cfg); err != nil {
			return nil, fmt.Errorf("decode config override of run %s: %w", p.run.ID, err)
		}
		every = append(every, engine.WithConfig(cfg))
	}
	if o.MaxTurns != nil {
		every = append(every, engine.WithMaxTurns(*o.MaxTurns))
	}
	if len(every) > 0 {
		opts = append(opts, engine.EveryCall(every...))
	}
	if o.System != nil {
		opts = append(opts, engine.WithSystem(*o.System))
	}
	return opts, nil
}

// model serves the original's recorded response for the request's turn, with its chunks, and
// never calls next: an exact replay makes no model call.
func (p *replayer) model(ctx context.Context, req *engine.ModelRequest, cb engine.ModelStreamFunc, _ engine.ModelNext) (*engine.ModelResponse, error) {
	turn := p.rec.currentTurn() // the recorder, the outer middleware, has numbered it already
	recorded := p.calls[turn]
	if recorded == nil {
		msg := fmt.Sprintf("the original run %s recorded no model call for turn %d", p.source, turn)
		if err := p.diverge(ctx, Divergence{Turn: turn, Part: "model_call", Message: msg}); err != nil {
			return nil, err
		}
		return nil, engine.Errorf(engine.StatusFailedPrecondition, "exact replay: %s, and an exact replay never calls a model", msg)
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("exact replay: encode model request of turn %d: %w", turn, err)
	}
	if changes := diffJSON(recorded.Request, reqJSON); len(changes) > 0 {
		c := changes[0]
		if err := p.diverge(ctx, Divergence{Turn: turn, Part: "model_request", Path: c.Path, Original: c.A, Replay: c.B,
			Message: fmt.Sprintf("the model request of turn %d differs from the recording at %s", turn, c.Path)}); err != nil {
			return nil, err
		}
	}
	if cb != nil {
		for _, c := range p.chunks[turn] {
			var parts []*engine.Part
			if err := json.Unmarshal(c.Content, &parts); err != nil {
				return nil, fmt.Errorf("exact replay: decode chunk %d of the original: %w", c.Seq, err)
			}
			if err := cb(ctx, &engine.ModelResponseChunk{Role: engine.RoleModel, Content: parts}); err != nil {
				return nil, err
			}
		}
	}
	var resp engine.ModelResponse
	if err := json.Unmarshal(recorded.Response, &resp); err != nil {
		return nil, fmt.Errorf("exact replay: decode recorded response of turn %d: %w", turn, err)
	}
	return &resp, nil
}

// tool runs a tool live and compares its output with the recording, or in cassette mode serves
// the recorded output. A first call that interrupted in the original interrupts again (a cassette
// raises the recorded interrupt without running the tool).
func (p *replayer) tool(ctx context.Context, call *engine.ToolCall, next engine.ToolNext) (*engine.ToolOutput, error) {
	p.rec.mu.Lock()
	turn := p.rec.turn
	p.rec.mu.Unlock()
	key := toolKey{turn, call.Ref}
	orig := p.tools[key]
	origInterrupt := p.interrupts[key]
	if p.settings.Tools == store.ReplayToolsCassette {
		return p.cassette(ctx, call, turn, orig, origInterrupt, next)
	}
	out, err := next(ctx, call)
	var ie *engine.InterruptError
	interrupted := errors.As(err, &ie)
	base := Divergence{Turn: turn, Ref: call.Ref, Tool: call.Name}
	switch {
	case orig == nil && (err == nil || interrupted):
		base.Part, base.Message = "tool_call", fmt.Sprintf("the original run made no call %s (ref %s) in turn %d", call.Name, call.Ref, turn)
	case orig == nil:
	case interrupted && call.Resumed == nil && origInterrupt == nil:
		base.Part, base.Message = "tool_call", fmt.Sprintf("%s (ref %s) interrupted in turn %d; in the original it did not", call.Name, call.Ref, turn)
	case err == nil && call.Resumed == nil && origInterrupt != nil:
		base.Part, base.Message = "tool_call", fmt.Sprintf("%s (ref %s) did not interrupt in turn %d; in the original it did", call.Name, call.Ref, turn)
	case err == nil && orig.Status == store.ToolCallCompleted:
		if p.inputDiffers(call, orig, turn, &base) {
			break // the input differs first: a reviewer of this replay edited it
		}
		got, merr := json.Marshal(out)
		if merr != nil {
			return nil, fmt.Errorf("exact replay: encode output of %s (ref %s): %w", call.Name, call.Ref, merr)
		}
		if changes := diffJSON(orig.Output, got); len(changes) > 0 {
			c := changes[0]
			base.Part, base.Path, base.Original, base.Replay = "tool_output", c.Path, c.A, c.B
			base.Message = fmt.Sprintf("the output of %s (ref %s) in turn %d differs from the recording at %s", call.Name, call.Ref, turn, c.Path)
		}
	case err == nil:
		base.Part, base.Message = "tool_call", fmt.Sprintf("%s (ref %s) succeeded in turn %d; in the original it ended %s", call.Name, call.Ref, turn, orig.Status)
	}
	if base.Part != "" {
		if derr := p.diverge(ctx, base); derr != nil {
			return nil, derr
		}
	}
	return out, err
}

// inputDiffers reports whether a call's input differs from the one the original's ledger recorded
// for it, and if so fills d in as a tool_input divergence at the first differing path (the part
// and path the compare page names). The ledger holds the input the call last ran with: for a call
// restarted after an interrupt, the input the reviewer approved or edited. So it is compared only
// for a call that runs (a first call the original interrupted recorded its restart's input).
func (p *replayer) inputDiffers(call *engine.ToolCall, orig *store.ToolCall, turn int, d *Divergence) bool {
	changes := diffJSON(orig.Input, call.Input)
	if len(changes) == 0 {
		return false
	}
	c := changes[0]
	d.Part, d.Path, d.Original, d.Replay = "tool_input", c.Path, c.A, c.B
	d.Message = fmt.Sprintf("the input of %s (ref %s) in turn %d differs from the recording at %s", call.Name, call.Ref, turn, c.Path)
	return true
}

// cassette serves a tool call from the original's ledger.
//
// A call whose input differs from the recorded one (a reviewer of this replay edited the
// arguments of an interrupt it raised again, so they differ from what the original's reviewer
// approved) is not served: the recording answers other arguments, and serving it would show an
// output the tool never gave for this input. The difference is stored as the replay's divergence
// (tool_input, at the call's turn and ref) and the call runs live, as that reviewer approved it.
// Only a reviewer's decision can change a cassette call's input (the model's requests are served
// from the recording too), so a cassette replay still runs no tool nobody approved.
func (p *replayer) cassette(ctx context.Context, call *engine.ToolCall, turn int, orig *store.ToolCall, origInterrupt *store.Interrupt, next engine.ToolNext) (*engine.ToolOutput, error) {
	if call.Resumed == nil && origInterrupt != nil {
		return nil, &engine.InterruptError{Metadata: interruptMetadata(origInterrupt.Metadata)}
	}
	if orig == nil {
		msg := fmt.Sprintf("the original run recorded no call %s (ref %s) in turn %d", call.Name, call.Ref, turn)
		if err := p.diverge(ctx, Divergence{Turn: turn, Part: "tool_call", Ref: call.Ref, Tool: call.Name, Message: msg}); err != nil {
			return nil, err
		}
		return nil, engine.Errorf(engine.StatusFailedPrecondition, "cassette replay: %s", msg)
	}
	if d := (Divergence{Turn: turn, Ref: call.Ref, Tool: call.Name}); p.inputDiffers(call, orig, turn, &d) {
		if err := p.diverge(ctx, d); err != nil {
			return nil, err
		}
		return next(ctx, call)
	}
	if err := p.svc.store.ToolCallMarkCassette(ctx, p.rec.lease.fence, turn, call.Ref); err != nil {
		return nil, err
	}
	switch orig.Status {
	case store.ToolCallCompleted:
		var out engine.ToolOutput
		if err := json.Unmarshal(orig.Output, &out); err != nil {
			return nil, fmt.Errorf("cassette replay: decode recorded output of %s (ref %s): %w", call.Name, call.Ref, err)
		}
		return &out, nil
	case store.ToolCallInterrupted:
		var e struct {
			Interrupt any `json:"interrupt"`
		}
		_ = json.Unmarshal(orig.Error, &e)
		md, _ := e.Interrupt.(map[string]any)
		return nil, &engine.InterruptError{Metadata: md}
	default:
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(orig.Error, &e)
		if e.Message == "" {
			e.Message = "the recorded call ended " + orig.Status
		}
		return nil, errors.New(e.Message)
	}
}

func interruptMetadata(raw json.RawMessage) map[string]any {
	var md map[string]any
	if json.Unmarshal(raw, &md) != nil {
		return nil
	}
	return md
}

// diverge records the replay's first divergence; later ones are ignored.
func (p *replayer) diverge(ctx context.Context, d Divergence) error {
	p.mu.Lock()
	if p.diverged {
		p.mu.Unlock()
		return nil
	}
	p.diverged = true
	p.mu.Unlock()
	raw, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode divergence: %w", err)
	}
	first, err := p.svc.store.ReplayDiverge(context.WithoutCancel(ctx), p.rec.lease.fence, raw)
	if err != nil {
		return err
	}
	if first {
		p.svc.log.Info("exact replay diverged", "run", p.run.ID, "original", p.source, "turn", d.Turn, "part", d.Part, "path", d.Path)
		p.svc.publish(p.run.ID, event.RunDivergenceData{Turn: d.Turn, Part: d.Part})
	}
	return nil
}

// finish compares how an exact replay ended with how its original did, when nothing diverged
// before: the same status and, for a success, the same output. A replay that waits for a reviewer
// is not compared yet.
func (p *replayer) finish(ctx context.Context, out json.RawMessage, runErr error, interrupted bool) error {
	if p == nil || p.settings.Mode != store.ReplayExact || interrupted || ctx.Err() != nil {
		return nil
	}
	p.mu.Lock()
	done := p.diverged
	p.mu.Unlock()
	if done {
		return nil
	}
	orig, err := p.svc.store.RunGet(ctx, p.source)
	if err != nil {
		return err
	}
	p.rec.mu.Lock()
	turn := p.rec.turn
	p.rec.mu.Unlock()
	status := store.RunSucceeded
	switch {
	case runErr == nil:
	case engine.StatusOf(runErr) == engine.StatusAborted:
		status = store.RunAborted
	default:
		status = store.RunFailed
	}
	if d := compareOutcome(turn, orig.Status, orig.Output, status, out); d != nil {
		return p.diverge(ctx, *d)
	}
	return nil
}

// CompareOutcome compares how a derived run (an exact replay, a re-run or a fork) ended with how
// its original did: the final status and, when both succeeded, the output. It returns nil when
// they are the same, and when the derived run has not ended or waits for a reviewer (there is
// nothing to compare yet). An exact replay stores this comparison as its divergence (unless an
// earlier turn diverged first); a re-run or a fork stores none, since it is expected to call a
// live model, so callers that check one against its original (devui replay) use this.
func CompareOutcome(orig, derived *store.Run) *Divergence {
	switch derived.Status {
	case store.RunSucceeded, store.RunFailed, store.RunAborted:
	default:
		return nil
	}
	return compareOutcome(max(derived.Turns-1, 0), orig.Status, orig.Output, derived.Status, derived.Output)
}

func compareOutcome(turn int, origStatus string, origOut json.RawMessage, status string, out json.RawMessage) *Divergence {
	if status != origStatus {
		return &Divergence{Turn: turn, Part: "status", Original: origStatus, Replay: status,
			Message: fmt.Sprintf("the replay ended %s; the original ended %s", status, origStatus)}
	}
	if status == store.RunSucceeded {
		if changes := diffJSON(origOut, out); len(changes) > 0 {
			c := changes[0]
			return &Divergence{Turn: turn, Part: "output", Path: c.Path, Original: c.A, Replay: c.B,
				Message: "the replay's output differs from the original's" + pathSuffix(c.Path)}
		}
	}
	return nil
}

func pathSuffix(path string) string {
	if path == "" {
		return ""
	}
	return " at " + path
}

// replayInterrupts runs in the transaction that stores a derived run's interrupts. Each interrupt
// matching one of the original run's gets that reviewer's decision as its suggested resolution;
// an exact replay asked to apply the recorded resolutions resolves them with it, and when none is
// left pending, requeues the run in the same transaction. It reports whether the run was requeued.
func (s *Service) replayInterrupts(ctx context.Context, tx *store.Store, run *store.Run, created []*store.Interrupt) (bool, error) {
	settings, err := tx.ReplayGet(ctx, run.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && settings.SourceRunID == nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	originals, err := tx.InterruptListByRun(ctx, *settings.SourceRunID)
	if err != nil {
		return false, err
	}
	used := map[uuid.UUID]bool{}
	applied := 0
	for _, it := range created {
		if it.Status != store.InterruptPending {
			continue // stored by an earlier execution of this run already
		}
		orig := matchInterrupt(it, originals, used)
		if orig == nil {
			continue
		}
		used[orig.ID] = true
		suggestion := map[string]any{
			"source_run_id": orig.RunID, "source_interrupt_id": orig.ID, "status": orig.Status,
			"resolution": orig.Resolution, "resolved_by": orig.ResolvedBy, "resolved_at": orig.ResolvedAt, "comment": orig.Comment,
		}
		raw, err := json.Marshal(suggestion)
		if err != nil {
			return false, fmt.Errorf("encode suggested resolution: %w", err)
		}
		if err := tx.InterruptSuggest(ctx, it.ID, raw); err != nil {
			return false, err
		}
		if !settings.ApplyResolutions {
			continue
		}
		by, comment := "replay", ""
		if orig.ResolvedBy != nil {
			by = *orig.ResolvedBy
		}
		if orig.Comment != nil {
			comment = *orig.Comment
		}
		if _, err := tx.InterruptResolve(ctx, store.InterruptResolveParams{
			ID: it.ID, Status: orig.Status, Resolution: orig.Resolution, ResolvedBy: by, Comment: comment,
		}); err != nil {
			return false, err
		}
		if err := tx.AuditInsert(ctx, "replay", "interrupt.replay_applied", "interrupt", it.ID.String(),
			map[string]any{"run_id": run.ID, "source_interrupt_id": orig.ID, "status": orig.Status}); err != nil {
			return false, err
		}
		applied++
	}
	if applied == 0 {
		return false, nil
	}
	pending, err := tx.InterruptCountPendingByRun(ctx, run.ID)
	if err != nil || pending > 0 {
		return false, err
	}
	if err := tx.RunRequeue(ctx, run.ID); err != nil {
		return false, err
	}
	return true, s.enqueue(ctx, tx, run)
}

// matchInterrupt finds the original's decided interrupt that a replayed one repeats: the same turn,
// ref and round, else the same turn and ref, else the same tool and input.
func matchInterrupt(it *store.Interrupt, originals []*store.Interrupt, used map[uuid.UUID]bool) *store.Interrupt {
	decided := func(o *store.Interrupt) bool {
		switch o.Status {
		case store.InterruptApproved, store.InterruptEdited, store.InterruptResponded, store.InterruptDenied:
			return !used[o.ID]
		}
		return false
	}
	for _, o := range originals {
		if decided(o) && o.Turn == it.Turn && o.Ref == it.Ref && o.Round == it.Round {
			return o
		}
	}
	for _, o := range originals {
		if decided(o) && o.Turn == it.Turn && o.Ref == it.Ref {
			return o
		}
	}
	for _, o := range originals {
		if decided(o) && o.Tool == it.Tool && len(diffJSON(o.Input, it.Input)) == 0 {
			return o
		}
	}
	return nil
}

// ReplayModes lists the replay modes, for help texts and errors.
var ReplayModes = strings.Join([]string{store.ReplayExact, store.ReplayRerun, store.ReplayFork}, ", ")
