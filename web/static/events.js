// Generated from internal/event by `go test ./internal/event -update`; do not edit.
// The kinds of Loupe's live events, as the server sends them.

export const Kind = Object.freeze({
  RunStatus: "run.status",
  RunMessage: "run.message",
  RunChunks: "run.chunks",
  RunToolCall: "run.tool_call",
  RunDivergence: "run.divergence",
  InterruptChanged: "interrupt.changed",
  InterruptClaimed: "interrupt.claimed",
  InboxPresence: "inbox.presence",
  ExperimentProgress: "experiment.progress",
  Span: "span",
  Snapshot: "snapshot",
  Resync: "resync",
  Error: "error",
});

// The types of span events (a span event's data.type).
export const SpanType = Object.freeze({ Started: "span_start", Ended: "span_end" });

// The statuses of a run that is over (a run.status event's data.status).
export const FinishedRunStatuses = Object.freeze(["succeeded", "failed", "aborted", "cancelled"]);
