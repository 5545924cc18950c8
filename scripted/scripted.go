// Package scripted provides deterministic models for tests, offline demos and replays: each call
// is answered by a turn of a script, streamed in the chunks the script gives. A script that
// decides from the request alone (Define) answers a conversation the same way however many runs
// share the model, and when a durable run is resumed or taken over after a crash.
package scripted

import (
	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/internal/bridge"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

// Turn is one scripted model call: a response, how it streams, or an error.
type Turn = scripted.Turn

// Func picks the turn that answers a request.
type Func func(req *loupe.ModelRequest) (Turn, error)

// Define registers a scripted model under /model/<name> whose turns come from fn, and returns it.
func Define(app *loupe.App, name string, fn Func) loupe.Model {
	return scripted.DefineFunc(bridge.AppRegistry(app), name, scripted.ScriptFunc(fn))
}

// DefineTurns registers a scripted model that answers its calls with turns, in order, one each.
func DefineTurns(app *loupe.App, name string, turns ...Turn) loupe.Model {
	return scripted.Define(bridge.AppRegistry(app), name, turns...)
}

// Text is a turn answering with text.
func Text(text string) Turn { return scripted.Text(text) }

// Reply is a turn answering with parts: text, and tool calls (ToolCall).
func Reply(parts ...*loupe.Part) Turn { return scripted.Reply(parts...) }

// ToolCall is a tool request part; ref may be "" for a generated one.
func ToolCall(name, ref string, input any) *loupe.Part { return scripted.ToolCall(name, ref, input) }

// ModelTurns counts the model's messages in a conversation: the turn a request is at.
func ModelTurns(msgs []*loupe.Message) int { return scripted.ModelTurns(msgs) }
