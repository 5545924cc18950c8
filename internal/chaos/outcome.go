package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

// outcomeSQL is what a finished run produced, as one jsonb document: its output, its ledger (each
// tool call's status, output and error, by turn and ref) and its history (every message, by seq).
// A run must produce what its clean twin did, but for what is its own: see normaliseOutcome.
const outcomeSQL = `jsonb_build_object(
	'output', r.output,
	'tool_calls', coalesce((SELECT jsonb_agg(jsonb_build_object('turn', t.turn, 'ref', t.ref, 'tool', t.tool,
		'status', t.status, 'output', t.output, 'error', t.error) ORDER BY t.turn, t.ref) FROM tool_calls t WHERE t.run_id = r.id), '[]'),
	'history', coalesce((SELECT jsonb_agg(jsonb_build_object('seq', m.seq, 'turn', m.turn, 'role', m.role, 'content', m.content::jsonb)
		ORDER BY m.seq) FROM run_messages m WHERE m.run_id = r.id), '[]'))::text`

// ownValue matches what differs between two runs of one input that went the same way: ids,
// timestamps, and codes made from a tool call's idempotency key (the demo's transfer and booking
// confirmations, "TX-53013332", "LP-774544"), which hold the run's id.
var ownValue = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}` +
	`|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}(:\d{2})?)?` +
	`|\b[A-Z]{2,}-\d{4,}\b`)

// normaliseOutcome replaces each of a run's own values (ownValue) by its rank of first appearance,
// the same value by the same rank throughout: a confirmation that the tool returned and the
// answer quotes is <1> in both, in the run and in its twin, while an answer quoting another
// confirmation than its tool returned reads <2> and differs.
func normaliseOutcome(doc string) string {
	rank := map[string]int{}
	return ownValue.ReplaceAllStringFunc(doc, func(v string) string {
		n, ok := rank[v]
		if !ok {
			n = len(rank) + 1
			rank[v] = n
		}
		return "<" + strconv.Itoa(n) + ">"
	})
}

// outcomeDiff says where the normalised outcomes got and want first differ, and "" when they are
// the same: in the output, a tool call, or a message of the history.
func outcomeDiff(got, want string) string {
	if got == want {
		return ""
	}
	type outcome struct {
		Output    json.RawMessage   `json:"output"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
		History   []json.RawMessage `json:"history"`
	}
	var g, w outcome
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return fmt.Sprintf("outcome %s; clean run %s", clip(got, 300), clip(want, 300))
	}
	if string(g.Output) != string(w.Output) {
		return fmt.Sprintf("output %s; clean run %s", clip(string(g.Output), 300), clip(string(w.Output), 300))
	}
	if d := listDiff("tool call", g.ToolCalls, w.ToolCalls); d != "" {
		return d
	}
	if d := listDiff("message", g.History, w.History); d != "" {
		return d
	}
	return fmt.Sprintf("outcome %s; clean run %s", clip(got, 300), clip(want, 300))
}

func listDiff(what string, got, want []json.RawMessage) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = string(got[i])
		}
		if i < len(want) {
			w = string(want[i])
		}
		if g != w {
			return fmt.Sprintf("%s %d of %d (clean run: %d): %s; clean run %s", what, i+1, len(got), len(want), or(clip(g, 300), "none"), or(clip(w, 300), "none"))
		}
	}
	return ""
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
