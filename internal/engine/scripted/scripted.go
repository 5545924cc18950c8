// Package scripted registers the scripted models of the public package scripted in an engine
// registry, for Loupe's own tests, demos and benchmarks.
package scripted

import (
	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/scripted"
)

type (
	// Turn is scripted.Turn.
	Turn = scripted.Turn
	// Model is scripted.Model.
	Model = scripted.Model
	// ScriptFunc is scripted.Func.
	ScriptFunc = scripted.Func
)

var (
	// New is scripted.New.
	New = scripted.New
	// NewFunc is scripted.NewFunc.
	NewFunc = scripted.NewFunc
	// ModelTurns is scripted.ModelTurns.
	ModelTurns = scripted.ModelTurns
	// Text is scripted.Text.
	Text = scripted.Text
	// Reply is scripted.Reply.
	Reply = scripted.Reply
	// ToolCall is scripted.ToolCall.
	ToolCall = scripted.ToolCall
)

// Define returns a scripted model of turns, registered in r under /model/<name>.
func Define(r *engine.Registry, name string, turns ...Turn) *Model {
	return register(r, scripted.New(name, turns...))
}

// DefineFunc returns a scripted model, registered in r under /model/<name>, whose turns come from
// fn.
func DefineFunc(r *engine.Registry, name string, fn ScriptFunc) *Model {
	return register(r, scripted.NewFunc(name, fn))
}

func register(r *engine.Registry, m *Model) *Model {
	if err := r.Register(engine.NewModel(m.Name(), m.Options(), m.Generate)); err != nil {
		panic(err)
	}
	return m
}
