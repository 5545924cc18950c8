package loupe

import (
	"context"

	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/internal/engine"
)

// DefineFlow registers a flow under /flow/<name>. Its input and output schemas come from In and
// Out. Run it with Flow.Run, or durably through Loupe's run service. It panics on a duplicate name.
func DefineFlow[In, Out any](app *App, name string, fn func(ctx context.Context, in In) (Out, error)) *Flow[In, Out, struct{}] {
	return &Flow[In, Out, struct{}]{f: engine.DefineFlow(app.reg, name, engine.FlowFunc[In, Out](fn))}
}

// DefineStreamingFlow registers a flow that sends chunks of type Stream as it goes; sendChunk
// delivers one to the caller (and, in a durable run, to the run's live stream and its record). A
// flow that streams its generate's chunks passes sendChunk to ai.WithStreaming, with Stream
// *ai.ModelResponseChunk.
func DefineStreamingFlow[In, Out, Stream any](app *App, name string,
	fn func(ctx context.Context, in In, sendChunk func(context.Context, Stream) error) (Out, error)) *Flow[In, Out, Stream] {
	return &Flow[In, Out, Stream]{f: engine.DefineStreamingFlow(app.reg, name, engine.StreamingFlowFunc[In, Out, Stream](fn))}
}

// DefineTool registers a tool under /tool/<name>. The model sees its description and the JSON
// schema of In; its output is checked against Out's. A tool asks a person by returning
// tc.Interrupt(&ai.InterruptOptions{Metadata: …}), and acts when it is restarted (tc.IsResumed).
// It panics, naming the tool, on a duplicate name or a type no JSON schema can describe.
func DefineTool[In, Out any](app *App, name, description string, fn ai.ToolFunc[In, Out], opts ...ai.ToolOption) *ai.ToolDef[In, Out] {
	return engine.DefineTool(app.reg, name, description, fn, opts...)
}

// DefineMultipartTool registers a tool that answers with content parts (media, say) besides its
// output.
func DefineMultipartTool[In any](app *App, name, description string, fn ai.MultipartToolFunc[In], opts ...ai.ToolOption) *ai.ToolDef[In, *ai.MultipartToolResponse] {
	return engine.DefineMultipartTool(app.reg, name, description, fn, opts...)
}

// DefineInterrupt registers a tool that always asks a person: the model's call stops the generate,
// and the reviewer's answer (of type Out) becomes the tool's output. It cannot be approved or
// restarted, only answered or denied.
func DefineInterrupt[In, Out any](app *App, name, description string, opts ...ai.ToolOption) *ai.ToolDef[In, Out] {
	return engine.DefineInterrupt[In, Out](app.reg, name, description, opts...)
}

// DefineModel registers a model under /model/<name>; opts (which may be nil) label it and say
// what it supports.
func DefineModel(app *App, name string, opts *ai.ModelOptions, fn ai.ModelFunc) ai.Model {
	return engine.DefineModel(app.reg, name, opts, fn)
}

// LookupTool returns the registered tool of that name (or key), or nil.
func LookupTool(app *App, name string) ai.Tool {
	t, _ := app.reg.LookupTool(name)
	return t
}

// LookupModel returns the registered model of that name (or key), or nil.
func LookupModel(app *App, name string) ai.Model {
	for _, k := range engine.ModelKeys(name) {
		if m, ok := app.reg.Lookup(k).(ai.Model); ok {
			return m
		}
	}
	return nil
}

// RequireApproval makes a tool ask a person before it runs, without a change to its code: in a
// durable run, the model's call of the tool stops the generate with an interrupt (its metadata
// {"approval": "required", "message": …}) before the tool acts. Approving runs the tool with the
// model's arguments, editing runs it with the reviewer's, denying answers the model with the
// denial. The tool sees the approved call as a restart (tc.IsResumed). Outside a durable run (a
// plain Flow.Run) the option has no effect. A policy's gate rule does the same for any tool
// (devui serve --policy-file).
func RequireApproval() ai.ToolOption {
	return ai.WithToolMetadata(map[string]any{engine.MetaRequireApproval: true})
}
