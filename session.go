package loupe

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// SetSession names the conversation that the flow running in ctx belongs to: a chat's id, a
// support ticket, a user's thread. Loupe's runs list groups runs by it (?group=session,
// ?session=id), and its Sessions page sums each session's runs, turns, tokens and cost, as
// Langfuse's sessions do. Call it in a flow, with the flow's context, before it returns; a run
// resumed after an approval runs the flow again, which sets it again.
//
// It marks the flow's span with the OpenTelemetry GenAI conventions' gen_ai.conversation.id, the
// attribute Loupe reads, beside Genkit's genkit:sessionId, from any program's traces. An empty id,
// or a context with no recording span (an app without WithTracerProvider), does nothing.
func SetSession(ctx context.Context, id string) {
	if id == "" {
		return
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String(attrConversationID, id))
}

// attrConversationID is the GenAI conventions' attribute naming a conversation.
const attrConversationID = "gen_ai.conversation.id"
