package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestNormaliseOutcomeRenamesARunsOwnValuesByFirstAppearance: two runs that went the same way
// normalise alike though their ids, times and confirmations differ; a confirmation quoted where
// the other run quotes the first one does not.
func TestNormaliseOutcomeRenamesARunsOwnValuesByFirstAppearance(t *testing.T) {
	t.Parallel()
	doc := `{"output": "confirmation %[1]s", "tool_calls": [{"output": {"confirmation": "%[2]s", "run": "%[3]s", "at": "%[4]s"}}]}`
	a := fmt.Sprintf(doc, "TX-11111111", "TX-11111111", "6b0f7f3e-6f5b-4a8e-9d7c-1c2b3a4d5e6f", "2026-12-02T13:57:11.582108Z")
	b := fmt.Sprintf(doc, "TX-22222222", "TX-22222222", uuid.NewString(), "2026-12-03 01:02:03+00")
	require.Equal(t, normaliseOutcome(a), normaliseOutcome(b))
	require.Contains(t, normaliseOutcome(a), `"confirmation <1>"`)
	c := fmt.Sprintf(doc, "TX-33333333", "TX-22222222", uuid.NewString(), "2026-12-03T01:02:03Z")
	require.NotEqual(t, normaliseOutcome(a), normaliseOutcome(c))
	require.Contains(t, outcomeDiff(normaliseOutcome(c), normaliseOutcome(a)), "tool call 1 of 1")
}

// TestCheckTotalsComparesOutputToolCallsAndHistoryWithTheCleanRun: a run with the clean run's
// status and token totals still differs from it when its output, a tool call's output or its
// history does; one that differs only in its own confirmation does not.
func TestCheckTotalsComparesOutputToolCallsAndHistoryWithTheCleanRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type variant struct {
		answer, toolConfirmation string // the confirmations the output and the tool's result hold
		recipient                string // whom the output says it sent the money to
		amount                   float64
		extraMessage             bool
	}
	// finished inserts a transfer that a reviewer approved and that ended as v says.
	finished := func(v variant) string {
		t.Helper()
		id := uuid.New()
		output, _ := json.Marshal("Done: sent 120 EUR to " + v.recipient + " (confirmation " + v.answer + ").")
		b.exec(t, `INSERT INTO runs (id, action, input, status, output, input_tokens, output_tokens, finished_at)
			VALUES ($1, '/flow/transferMoney', '{"to": "alice", "amount": 120}', 'succeeded', $2, 110, 40, now())`, id, output)
		b.exec(t, `INSERT INTO interrupts (run_id, turn, tool, ref, status, resolved_at) VALUES ($1, 0, 'transfer', 'transfer-1', 'approved', now())`, id)
		result, _ := json.Marshal(map[string]any{"to": "alice", "amount": v.amount, "status": "sent", "confirmation": v.toolConfirmation})
		b.exec(t, `INSERT INTO tool_calls (run_id, turn, ref, tool, status, output, idempotency_key, finished_at)
			VALUES ($1, 0, 'transfer-1', 'transfer', 'completed', jsonb_build_object('output', $2::jsonb), $3, now())`, id, result, id.String()+":transfer-1")
		messages := []string{
			`{"role":"user","content":[{"text":"Send 120 EUR to alice."}]}`,
			`{"role":"model","content":[{"toolRequest":{"name":"transfer","ref":"transfer-1","input":{"to":"alice"}}}]}`,
			`{"role":"tool","content":[{"toolResponse":{"name":"transfer","ref":"transfer-1","output":` + string(result) + `}}]}`,
			`{"role":"model","content":[{"text":` + string(output) + `}]}`,
		}
		if v.extraMessage {
			messages = append(messages[:3], messages[2:]...) // the tool's answer twice
		}
		for seq, m := range messages {
			var role struct{ Role string }
			require.NoError(t, json.Unmarshal([]byte(m), &role))
			b.exec(t, `INSERT INTO run_messages (run_id, seq, turn, role, content) VALUES ($1, $2, 0, $3, $4)`, id, seq, role.Role, m)
		}
		return id.String()
	}
	clean := finished(variant{"TX-11111111", "TX-11111111", "alice", 120, false})
	vs, err := b.c.recordBaseline(b.ctx, []string{clean})
	require.NoError(t, err)
	require.Empty(t, vs)

	twin := finished(variant{"TX-22222222", "TX-22222222", "alice", 120, false})
	wrongOutput := finished(variant{"TX-66666666", "TX-66666666", "bob", 120, false})
	wrongQuote := finished(variant{"TX-99999999", "TX-33333333", "alice", 120, false})
	wrongTool := finished(variant{"TX-44444444", "TX-44444444", "alice", 500, false})
	repeated := finished(variant{"TX-55555555", "TX-55555555", "alice", 120, true})

	r := &report{byStatus: map[string]int{}}
	require.NoError(t, b.c.checkTotals(b.ctx, r))
	got := map[string]string{}
	for _, v := range r.violations {
		require.Equal(t, "outcome differs from the clean run", v.kind)
		got[v.run] = v.detail
	}
	require.NotContains(t, got, twin, "only its own confirmation differs")
	require.NotContains(t, got, clean)
	require.Len(t, got, 4, "%v", r.violations)
	require.Contains(t, got[wrongOutput], `]: output "Done: sent 120 EUR to bob`)
	require.Contains(t, got[wrongQuote], "]: tool call 1 of 1", "the answer quotes another confirmation than the tool returned")
	require.Contains(t, got[wrongTool], "]: tool call 1 of 1")
	require.Contains(t, got[repeated], "]: message 4 of 5 (clean run: 4)")
}
