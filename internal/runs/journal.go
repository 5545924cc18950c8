package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/store"
)

// journal is a durable flow's engine.Journal for one execution (see internal/engine/durable.go):
// the ops an earlier execution of the run finished are served from run_steps, and the ops this
// one finishes are written there with the recorder's checkpoints. A step's row is written when
// it ends, before the flow goes on; a generate call's final response with the next checkpoint,
// which precedes anything the flow does after it (a crash in between runs that call again from
// its ledgers).
type journal struct {
	rec *recorder
	// own is the run's journal as the execution started.
	own map[int]*store.RunStep
	// source is an exact replay's original journal, which serves the replay's steps: a replay
	// never runs a step again.
	source map[int]*store.RunStep
}

func newJournal(rec *recorder, own, source []*store.RunStep) *journal {
	j := &journal{rec: rec, own: bySeq(own), source: bySeq(source)}
	return j
}

func bySeq(steps []*store.RunStep) map[int]*store.RunStep {
	m := make(map[int]*store.RunStep, len(steps))
	for _, st := range steps {
		m[st.Seq] = st
	}
	return m
}

// Op implements engine.Journal.
func (j *journal) Op(ctx context.Context, seq int, kind engine.OpKind, name string) (*engine.OpResult, bool, error) {
	if row := j.own[seq]; row != nil {
		if err := matches(seq, kind, name, row); err != nil {
			return nil, false, err
		}
		res, err := opResult(row)
		return res, err == nil, err
	}
	row := j.source[seq]
	if row == nil {
		return nil, false, nil
	}
	if err := matches(seq, kind, name, row); err != nil {
		return nil, false, err
	}
	if kind != engine.OpStep {
		return nil, false, nil // an exact replay runs its generate calls, against the recording
	}
	res, err := opResult(row)
	if err != nil {
		return nil, false, err
	}
	// Journaled as the replay's own, so that a resume of the replay serves it too.
	j.rec.journal(store.RunStep{Seq: seq, Kind: row.Kind, Name: row.Name, Output: row.Output, Error: row.Error})
	return res, true, nil
}

// Finish implements engine.Journal.
func (j *journal) Finish(ctx context.Context, seq int, kind engine.OpKind, name string, res *engine.OpResult) error {
	row := store.RunStep{Seq: seq, Kind: string(kind), Name: name, Output: res.Output}
	if res.Error != nil {
		var err error
		if row.Error, err = json.Marshal(res.Error); err != nil {
			return fmt.Errorf("journal op %d: %w", seq, err)
		}
	}
	if kind == engine.OpGenerate {
		g := engine.GenerateIndex(ctx)
		row.Generation = &g
		j.rec.journal(row)
		return nil
	}
	j.rec.journal(row)
	return j.rec.checkpoint(ctx, nil)
}

// matches checks the op the flow makes at seq against the journal's row there.
func matches(seq int, kind engine.OpKind, name string, row *store.RunStep) error {
	if row.Kind == string(kind) && (kind != engine.OpStep || row.Name == name) {
		return nil
	}
	return &engine.NonDeterminismError{Seq: seq, Kind: kind, Name: name, RecordedKind: engine.OpKind(row.Kind), RecordedName: row.Name}
}

func opResult(row *store.RunStep) (*engine.OpResult, error) {
	res := &engine.OpResult{Output: row.Output}
	if len(row.Error) > 0 {
		res.Error = &engine.OpError{}
		if err := json.Unmarshal(row.Error, res.Error); err != nil {
			return nil, fmt.Errorf("decode journaled error of op %d: %w", row.Seq, err)
		}
	}
	return res, nil
}
