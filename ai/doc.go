// Package ai is the vocabulary of Loupe's agents, in the shapes of Genkit Go's package of the same
// name: messages and parts, model requests and responses, tools and the context they run with,
// interrupts, middleware, errors, and the options of a generate call (WithPrompt, WithTools,
// WithOutputType, WithStreaming, …). Package loupe defines and runs agents with them; a Genkit Go
// program ported to Loupe keeps its ai.X names.
//
// The JSON form of every type here is Genkit's wire format, so what a Loupe agent records, a
// Genkit tool reads, and the other way round.
package ai
