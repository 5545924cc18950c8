// Package event is the contract of Loupe's live events: their kinds and their payloads. The run
// service and the inbox publish them, the trace processor publishes span events, the live hub
// carries them to browsers, and the page scripts read the same kinds from web/static/events.js,
// which is generated from this file (go test ./internal/event -update).
//
// An event only says what changed; the database stays the source of truth, and a subscriber
// reads the rows.
package event

// Kind names an event.
type Kind string

// The kinds of events. Payloads are the types below, one per kind; the hub adds "run_id" to the
// payload of every event about a run.
const (
	// RunStatus: a run's status changed (RunStatusData).
	RunStatus Kind = "run.status"
	// RunMessage: a message was added to a run's conversation (RunMessageData).
	RunMessage Kind = "run.message"
	// RunChunks: chunks were streamed; the hub sends the chunks themselves (RunChunksData).
	RunChunks Kind = "run.chunks"
	// RunToolCall: a tool call started or finished (RunToolCallData).
	RunToolCall Kind = "run.tool_call"
	// RunDivergence: an exact replay first differed from its original (RunDivergenceData).
	RunDivergence Kind = "run.divergence"
	// InterruptChanged: an interrupt was created, resolved or cancelled (InterruptChangedData).
	InterruptChanged Kind = "interrupt.changed"
	// InterruptClaimed: a reviewer claimed or released an inbox item (InterruptClaimedData).
	InterruptClaimed Kind = "interrupt.claimed"
	// InboxPresence: who has an inbox item open changed (InboxPresenceData).
	InboxPresence Kind = "inbox.presence"
	// ExperimentProgress: an experiment started or scored examples, or ended
	// (ExperimentProgressData); its topic is experiment:<id>.
	ExperimentProgress Kind = "experiment.progress"
	// Span: a span started or ended (a trace's and its run's subscribers get it).
	Span Kind = "span"
	// Snapshot: the state of a topic, sent first on each subscription.
	Snapshot Kind = "snapshot"
	// Resync: the hub may have missed notifications; reload from the server.
	Resync Kind = "resync"
	// Error: a request on the WebSocket was refused.
	Error Kind = "error"
)

// Kinds lists every kind under its Go name, which the page scripts use too (Kind.RunStatus).
var Kinds = []struct {
	Name string
	Kind Kind
}{
	{"RunStatus", RunStatus}, {"RunMessage", RunMessage}, {"RunChunks", RunChunks},
	{"RunToolCall", RunToolCall}, {"RunDivergence", RunDivergence},
	{"InterruptChanged", InterruptChanged}, {"InterruptClaimed", InterruptClaimed},
	{"InboxPresence", InboxPresence}, {"ExperimentProgress", ExperimentProgress}, {"Span", Span}, {"Snapshot", Snapshot}, {"Resync", Resync},
	{"Error", Error},
}

// Span event types (SpanData.Type).
const (
	SpanStarted = "span_start"
	SpanEnded   = "span_end"
)

// Payload is an event's data; its type says its kind.
type Payload interface {
	Kind() Kind
}

// RunStatusData is a run.status event.
type RunStatusData struct {
	Status string `json:"status"`
	// Action is set when the run is created.
	Action string `json:"action,omitempty"`
}

// RunMessageData is a run.message event.
type RunMessageData struct {
	Seq  int    `json:"seq"`
	Turn int    `json:"turn"`
	Role string `json:"role"`
}

// RunChunksData is a run.chunks event between instances: the last durable chunk's sequence number.
type RunChunksData struct {
	LastSeq int64 `json:"last_seq"`
}

// RunToolCallData is a run.tool_call event.
type RunToolCallData struct {
	Turn   int    `json:"turn"`
	Ref    string `json:"ref"`
	Tool   string `json:"tool"`
	Status string `json:"status"`
}

// RunDivergenceData is a run.divergence event.
type RunDivergenceData struct {
	Turn int    `json:"turn"`
	Part string `json:"part"`
}

// InterruptChangedData is an interrupt.changed event. InterruptID is empty when every pending
// interrupt of the run changed at once (a cancelled run).
type InterruptChangedData struct {
	InterruptID string `json:"interrupt_id,omitempty"`
	Status      string `json:"status"`
}

// InterruptClaimedData is an interrupt.claimed event; ClaimedBy is empty once released.
type InterruptClaimedData struct {
	InterruptID string `json:"interrupt_id"`
	ClaimedBy   string `json:"claimed_by"`
}

// Viewer is one browser tab that has an inbox item open.
type Viewer struct {
	Tab  string `json:"tab"`
	User string `json:"user"`
}

// SpanData is a span event (kind span) as clients receive it. It is a struct rather than a map
// because span events come by the thousand a second under trace ingest, and each is encoded for
// NOTIFY. Status is the OTel status code; End is 0 for a span that has started.
type SpanData struct {
	Type   string `json:"type"` // SpanStarted or SpanEnded
	SpanID string `json:"span_id"`
	Name   string `json:"name"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Status int16  `json:"status"`
	Parent string `json:"parent,omitempty"`
}

// InboxPresenceData is an inbox.presence event.
type InboxPresenceData struct {
	InterruptID string   `json:"interrupt_id"`
	Viewers     []Viewer `json:"viewers"`
}

// Kind implements Payload.
func (RunStatusData) Kind() Kind { return RunStatus }

// Kind implements Payload.
func (RunMessageData) Kind() Kind { return RunMessage }

// Kind implements Payload.
func (RunChunksData) Kind() Kind { return RunChunks }

// Kind implements Payload.
func (RunToolCallData) Kind() Kind { return RunToolCall }

// Kind implements Payload.
func (RunDivergenceData) Kind() Kind { return RunDivergence }

// Kind implements Payload.
func (InterruptChangedData) Kind() Kind { return InterruptChanged }

// Kind implements Payload.
func (InterruptClaimedData) Kind() Kind { return InterruptClaimed }

// Kind implements Payload.
func (InboxPresenceData) Kind() Kind { return InboxPresence }

// Kind implements Payload.
func (ExperimentProgressData) Kind() Kind { return ExperimentProgress }

// ExperimentProgressData is an experiment.progress event: the experiment's counts after the
// change, and the scores of the examples just scored (without their explanations, which the
// experiment's page and API have). A subscriber that needs more reads the experiment.
type ExperimentProgressData struct {
	ExperimentID string `json:"experiment_id"`
	// Status is running, finished or cancelled.
	Status  string `json:"status"`
	Total   int    `json:"total"`
	Started int    `json:"started"`
	Scored  int    `json:"scored"`
	Passed  int    `json:"passed"`
	// Failed counts the scored examples that some evaluator failed.
	Failed int                 `json:"failed"`
	Scores []ExperimentExample `json:"scores,omitempty"`
}

// ExperimentExample is one example's scores as they land.
type ExperimentExample struct {
	ExampleKey string            `json:"example_key"`
	RunID      string            `json:"run_id,omitempty"`
	RunStatus  string            `json:"run_status"`
	Pass       bool              `json:"pass"`
	Scores     []ExperimentScore `json:"scores"`
}

// ExperimentScore is one evaluator's verdict on an example.
type ExperimentScore struct {
	Evaluator string   `json:"evaluator"`
	Score     *float64 `json:"score,omitempty"`
	Pass      bool     `json:"pass"`
}
