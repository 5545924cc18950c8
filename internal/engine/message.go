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

// MetaRequireApproval is Loupe's tool-definition metadata key that makes a tool ask a person
// before it runs (loupe.RequireApproval): a durable run interrupts the call before the tool acts,
// and an approval (or an edit) restarts it.
const MetaRequireApproval = "loupe.requireApproval"
