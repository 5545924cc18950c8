package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

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
	// steps is the original's journal, which serves the replay's steps (journal.go).
	steps []*store.RunStep
	// ledger and asked are the source's tool calls and first-round interrupts, in order, for a
	// re-execution that serves its tools from the recording (recorded.go).
	ledger []*store.ToolCall
	asked  []*store.Interrupt
	taken  map[any]bool

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
	if errors.Is(err, errNoReplay) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	opts, err := p.options()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return p, opts, nil
}

// errNoReplay is loadReplay's answer for a run that has no replay settings: an ordinary run.
var errNoReplay = errors.New("no replay settings")

func (s *Service) loadReplay(ctx context.Context, run *store.Run, rec *recorder) (*replayer, error) {
	if run.ReplayMode == nil && run.ForkOf == nil {
		return nil, errNoReplay // an original run: no replay settings to look up
	}
	settings, err := s.store.ReplayGet(ctx, run.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoReplay
	}
	if err != nil {
		return nil, err
	}
	p := &replayer{svc: s, run: run, rec: rec, settings: settings, diverged: len(settings.Divergence) > 0}
	if settings.Tools == store.ReplayToolsRecorded {
		return p, p.loadRecording(ctx)
	}
	if settings.Mode != store.ReplayExact {
		return p, nil
	}
	if settings.SourceRunID == nil {
		return nil, fmt.Errorf("exact replay %s: its original run was deleted: %w", run.ID, ErrInvalid)
	}
	p.source = *settings.SourceRunID
	if p.steps, err = s.store.StepList(ctx, p.source); err != nil {
		return nil, err
	}
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
	switch {
	case p.settings.Mode == store.ReplayExact:
		opts = append(opts, engine.WithMiddleware(&engine.Middleware{Name: "loupe-replay", Model: p.model, Tool: p.tool}))
	case p.settings.Tools == store.ReplayToolsRecorded:
		opts = append(opts, engine.WithMiddleware(&engine.Middleware{Name: "loupe-recorded-tools", Tool: p.recorded}))
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

// sourceSteps is the journal that serves an exact replay's steps: its original's (nil for any
// other run).
func (p *replayer) sourceSteps() []*store.RunStep {
	if p == nil {
		return nil
	}
	return p.steps
}
