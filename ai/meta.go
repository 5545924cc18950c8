package ai

// Metadata keys of Genkit's wire format that this package reads and writes on parts.
const (
	metaInterrupt         = "interrupt"
	metaResumed           = "resumed"
	metaReplacedInput     = "replacedInput"
	metaInterruptResponse = "interruptResponse"
)
