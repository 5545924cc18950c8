package engine

import "context"

// MessageSource says why a message was appended to the history.
type MessageSource string

// Message sources.
const (
	// SourceModel is a model message of a turn that goes on (its tool requests ran).
	SourceModel MessageSource = "model"
	// SourceTool is the tool message answering a model message.
	SourceTool MessageSource = "tool"
	// SourceResume is the revised model message and the tool message built from resume options.
	SourceResume MessageSource = "resume"
	// SourceInput is a message of the conversation the generate started from (system, prompt,
	// given history), reported before the first model call so that a recorder holds the whole
	// conversation.
	SourceInput MessageSource = "input"
	// SourceTransfer is a message of the history that a transfer to a prompt rewrote (the prompt's
	// preamble put in front): the whole new history is reported again from index 0, each message
	// replacing the one at its index.
	SourceTransfer MessageSource = "transfer"
)

// MessageEvent reports one message appended to the history.
type MessageEvent struct {
	// Turn is the 0-based turn of this Generate call.
	Turn int
	// Index is the message's position in the full history (input messages included).
	Index int
	// Replace is true when the message replaces the one at Index (resume re-stamps the last model
	// message with resolvedInterrupt) instead of being appended.
	Replace bool
	Source  MessageSource
	Message *Message
}

// Hooks observe a generate as it happens, for recorders such as a durable runner. Each hook may be
// nil. A hook error aborts the generate: a recorder that cannot persist must not let the run go on.
// Hooks run on the generate's goroutine, in order, never concurrently.
type Hooks struct {
	// OnMessage sees each message of the history: first the input messages (SourceInput), then
	// each model and tool message as it is appended, and the messages a resume rewrites or appends.
	OnMessage func(ctx context.Context, ev *MessageEvent) error
	// OnChunk sees each streamed chunk, with its index and role, whether or not the caller streams.
	OnChunk func(ctx context.Context, chunk *ModelResponseChunk) error
	// OnUsage sees the usage of each model call.
	OnUsage func(ctx context.Context, turn int, usage *Usage) error
	// OnResponse sees the final response: finished, interrupted or returned with tool requests.
	OnResponse func(ctx context.Context, resp *ModelResponse) error
}
