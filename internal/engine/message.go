package engine

// Metadata keys the engine reads and writes on parts and messages. They are Genkit's names.
const (
	MetaInterrupt         = "interrupt"
	MetaPendingOutput     = "pendingOutput"
	MetaResolvedInterrupt = "resolvedInterrupt"
	MetaResumed           = "resumed"
	MetaReplacedInput     = "replacedInput"
	MetaInterruptResponse = "interruptResponse"
	MetaSource            = "source"
	MetaOriginalName      = "originalName"
	// MetaDenied marks a resume.respond part that carries a reviewer's denial (Loupe's own).
	MetaDenied = "denied"
)
