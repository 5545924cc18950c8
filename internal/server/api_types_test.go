package server

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/pricing"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// keysOf is the sorted top-level keys of v's JSON.
func keysOf(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestAPIRunAndInterruptShapesAreTheAPIsOwn pins the wire shape of a run and an interrupt, every
// field set: the keys the README documents, and none of the store's internals (the lease, its
// epoch, the resume span).
func TestAPIRunAndInterruptShapesAreTheAPIsOwn(t *testing.T) {
	s, now, id, n := "x", time.Now(), uuid.New(), 1
	run := &store.Run{ID: id, Action: "/flow/a", Input: json.RawMessage(`1`), Status: "succeeded", Output: json.RawMessage(`2`),
		Error: json.RawMessage(`{}`), TraceID: &s, Model: &s, Turns: 1, ReplayOf: &id, ReplayMode: &s, ForkOf: &id, ForkTurn: &n,
		CreatedBy: &s, CreatedAt: now, StartedAt: &now, FinishedAt: &now, UpdatedAt: now, Version: 3,
		LeaseOwner: &s, LeaseExpires: &now, LeaseEpoch: 7, Resumes: 1, ResumeSpanID: &s, WaitedMs: 5, Labels: map[string]string{"k": "v"},
		Context: json.RawMessage(`{"auth":{}}`), Usage: map[string]pricing.Tokens{"gpt-4o": {Input: 1, Output: 2}}}
	require.Equal(t, []string{"action", "context", "cost_usd", "created_at", "created_by", "error", "finished_at", "fork_of", "fork_turn", "id", "input",
		"input_tokens", "labels", "model", "output", "output_tokens", "replay_mode", "replay_of", "resumes", "started_at", "status",
		"trace_id", "turns", "updated_at", "usage", "version", "waited_ms"}, keysOf(t, apiRunOf(run, pricing.Builtin())))

	it := &store.Interrupt{ID: id, RunID: id, Tool: "t", Ref: "r", Input: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`),
		InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{}`), Status: "resolved", Resolution: json.RawMessage(`{}`),
		ResolvedBy: &s, ResolvedAt: &now, Comment: &s, CreatedAt: now, SuggestedResolution: json.RawMessage(`{}`), ClaimedBy: &s, ClaimedAt: &now}
	require.Equal(t, []string{"claimed_at", "claimed_by", "comment", "created_at", "id", "input", "input_schema", "metadata",
		"output_schema", "ref", "resolution", "resolved_at", "resolved_by", "round", "run_id", "status", "suggested_resolution",
		"tool", "turn", "version"}, keysOf(t, apiInterruptOf(it)))
}

// TestAPITraceShapeIsTheAPIsOwn pins the keys of a trace in the traces list.
func TestAPITraceShapeIsTheAPIsOwn(t *testing.T) {
	s, id := "x", uuid.New()
	got := keysOf(t, apiTracesOf([]store.Trace{{TraceID: "t", RootSpanID: &s, RunID: &id, Service: "svc", Model: "m"}})[0])
	require.Equal(t, []string{"display_name", "end_time_unix_nano", "error_spans", "input_tokens", "interrupted", "last_end_time_unix_nano",
		"model", "model_calls", "output_tokens", "root_span_id", "run_id", "service", "source", "span_count",
		"start_time_unix_nano", "status_code", "tool_calls", "tool_errors", "trace_id", "updated_at"}, got)
	require.Equal(t, keysOf(t, store.Trace{TraceID: "t", RootSpanID: &s, RunID: &id, Service: "svc", Model: "m"}), got,
		"the same keys as the summary row had on the wire")
}

// TestAPILineageShapeIsTheAPIsOwn: the lineage answer has the keys the runs service's ReplayInfo
// had on the wire, its links and replay settings too.
func TestAPILineageShapeIsTheAPIsOwn(t *testing.T) {
	id, mode, turn := uuid.New(), "fork", 1
	link := &store.LineageLink{RunID: id, Relation: "fork", Mode: &mode, ForkTurn: &turn, Action: "a", Status: "s", Divergence: json.RawMessage(`{}`)}
	info := &runs.ReplayInfo{RunID: id, Lineage: &store.Lineage{Of: link, Derived: []*store.LineageLink{link}},
		Replay:      &store.Replay{RunID: id, SourceRunID: &id, Mode: "fork", Overrides: json.RawMessage(`{}`), Edits: json.RawMessage(`[]`), Divergence: json.RawMessage(`{}`)},
		Suggestions: []*store.InterruptSuggestion{{InterruptID: id, Suggestion: json.RawMessage(`{}`)}}}
	want, err := json.Marshal(info)
	require.NoError(t, err)
	got, err := json.Marshal(apiLineageOf(info))
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))
}
