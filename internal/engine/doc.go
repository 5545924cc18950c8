// Package engine is Loupe's agentic engine: a Go implementation of Genkit's generate loop and its
// tool, interrupt and resume mechanism, with Genkit-compatible JSON shapes and spans. It works on
// the public vocabulary of package ai (messages, parts, tools, options, errors; ai.go names them
// here) and adds what only Loupe's own packages use: the registry, hooks, context options and the
// durable flow's journal (durable.go). It has no SQL and no HTTP, and it uses only the
// OpenTelemetry API; the TracerProvider is injected with WithTracerProvider.
//
// # API
//
//   - Registry holds actions keyed as in Genkit (/model/…, /tool/…, /tool.v2/…, /flow/…, /prompt/…,
//     /util/generate). List describes them with compiled input/output schemas; Run runs any action
//     by key with raw JSON input; LookupTool resolves a short name through Genkit's prefixes;
//     ToolSchemas, ValidateToolInput and ValidateToolOutput check reviewer payloads, with errors
//     that name each failing field (*ValidationError).
//   - DefineTool, DefineMultipartTool and DefineInterrupt register the typed tools of package ai,
//     whose JSON schemas are derived from Go types (or given) and compiled once, at definition.
//     A non-multipart tool is also reachable as /tool.v2/<name> (its run by key returns
//     {"output": …}), as Genkit registers both forms.
//   - DefineModel registers a ModelFunc; subpackages scripted and openai provide models.
//   - DefinePrompt registers a prompt. It is also a tool under /prompt/<name>: a model calling it
//     transfers the conversation to it, as in Genkit (the prompt's messages go in front of the
//     history as a preamble, and its model and tools take over).
//   - DefineFlow and DefineStreamingFlow register typed flows; their spans are roots that the
//     generate spans nest under. WithRunID puts a run id in the context for spans and idempotency.
//   - Generate runs the loop with functional options (WithModel, WithPrompt, WithMessages,
//     WithTools, WithMaxTurns, WithOutputType, WithStreaming, WithMiddleware, WithHooks, WithRespond,
//     WithRestart, WithActionOptions for stored GenerateActionOptions).
//   - Errors are *Error values with Genkit status codes (StatusOf, errors.As); an ABORTED error from
//     the turn limit carries the last response.
//
// # Durable runs
//
// Hooks observe every history message (with its turn and index), chunk, usage and the final
// response as they happen. Middleware.Tool wraps every single tool execution, sees the name, ref,
// input and idempotency key, and may return a recorded output instead of running the tool.
// RespondPart and RestartPart build resume options from stored data; ModelResponse.History is the
// conversation to resume from.
//
// # Beyond Genkit
//
//   - Tool results of a turn are assembled in the model's request order, not completion order.
//   - A restarted tool that interrupts again yields a new pending interrupt (finishReason
//     interrupted, the model is not called); answered siblings are kept as pendingOutput so nothing
//     runs twice. Genkit fails with FAILED_PRECONDITION.
//   - Tool requests without a ref get a stable ref from their position in the history, so parallel
//     calls of one tool never collide and replays reproduce them.
//   - Every tool call gets an idempotency key (run id or trace id, plus ref) in its ToolContext.
//   - Respond outputs are validated against the tool's output schema when resuming too, so stored
//     answers are checked; interrupt-only tools cannot be restarted (FAILED_PRECONDITION).
//   - An interrupted tool span is not an error: it ends with genkit:state=interrupted and an
//     "interrupt" event. Span attributes are cut at a limit with a TruncationMarker, and each history
//     message is encoded once per Generate.
package engine
