package runs

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// A re-execution with tools "recorded" (an experiment's run) calls its model live, with the flow's
// current code, and serves every tool call from the recording of its source run: the call of the
// same tool with the same input (JSON-equal), each recorded call once, in the order recorded. A
// first call that interrupted in the recording interrupts again, and the recorded reviewer's
// decision is applied (replayInterrupts); an approved call's restart is served the output the
// recording has for the input the reviewer approved or edited. A call the recording does not have
// fails, so such a run never repeats an effect nor runs a tool nobody approved.

// loadRecording loads the source's ledger and first-round interrupts; a run with no source (an
// example written by hand) has an empty recording.
func (p *replayer) loadRecording(ctx context.Context) error {
	p.taken = map[any]bool{}
	if p.settings.SourceRunID == nil {
		return nil
	}
	p.source = *p.settings.SourceRunID
	var err error
	if p.ledger, err = p.svc.store.ToolCallList(ctx, p.source); err != nil {
		return err
	}
	interrupts, err := p.svc.store.InterruptListByRun(ctx, p.source)
	if err != nil {
		return err
	}
	seen := map[toolKey]bool{}
	for _, it := range interrupts {
		if k := (toolKey{it.Turn, it.Ref}); !seen[k] {
			seen[k] = true
			p.asked = append(p.asked, it)
		}
	}
	return nil
}

// recorded is the tool middleware of a recorded-tools run.
func (p *replayer) recorded(ctx context.Context, call *engine.ToolCall, _ engine.ToolNext) (*engine.ToolOutput, error) {
	p.rec.mu.Lock()
	turn := p.rec.turn
	p.rec.mu.Unlock()
	p.mu.Lock()
	var (
		asked *store.Interrupt
		orig  *store.ToolCall
	)
	if call.Resumed == nil {
		for _, it := range p.asked {
			if !p.taken[it] && it.Tool == call.Name && len(diffJSON(it.Input, call.Input)) == 0 {
				asked, p.taken[it] = it, true
				break
			}
		}
	}
	if asked == nil {
		for _, tc := range p.ledger {
			if !p.taken[tc] && tc.Tool == call.Name && len(diffJSON(tc.Input, call.Input)) == 0 {
				orig, p.taken[tc] = tc, true
				break
			}
		}
	}
	p.mu.Unlock()
	switch {
	case asked != nil:
		return nil, &engine.InterruptError{Metadata: interruptMetadata(asked.Metadata)}
	case orig == nil && p.settings.SourceRunID == nil:
		return nil, engine.Errorf(engine.StatusFailedPrecondition,
			"%s (turn %d) is not in the recording: this run has no recorded run to serve its tools, and tools recorded never runs one live (use tools live)",
			call.Name, turn)
	case orig == nil:
		return nil, engine.Errorf(engine.StatusFailedPrecondition,
			"%s with input %s (turn %d) is not in the recording of run %s: tools recorded never runs a tool live (use tools live)",
			call.Name, compactJSON(call.Input), turn, p.source)
	}
	if err := p.svc.store.ToolCallMarkCassette(ctx, p.rec.lease.fence, turn, call.Ref); err != nil {
		return nil, err
	}
	return servedOutput(call, orig)
}

// compactJSON is a JSON value on one line, cut to 200 bytes, for an error message.
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	if b.Len() > 200 {
		return b.String()[:200] + "…"
	}
	return b.String()
}
