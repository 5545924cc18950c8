package ai

// StreamValue is one value of a generate's stream (loupe.GenerateStream): a chunk, or, last, the
// final response (Done).
type StreamValue[Out, Stream any] struct {
	// Done is set on the last value, which carries Output and Response instead of a chunk.
	Done bool
	// Chunk is the streamed piece, while Done is false.
	Chunk Stream
	// Output is the typed output, when Done (loupe.GenerateDataStream).
	Output Out
	// Response is the final response, when Done.
	Response *ModelResponse
}

// ModelStreamValue is a value of a generate's stream of model chunks; its Output is unused, the
// output being in Response.
type ModelStreamValue = StreamValue[struct{}, *ModelResponseChunk]
