package trace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

const bigTraceID = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"

// bigTrace builds a research-agent-like trace of n spans: a flow root, then turns of one generate
// span holding a model call and two tool calls, each with about 600 bytes of attributes.
func bigTrace(n int) []store.Span {
	payload := strings.Repeat("lorem ipsum dolor sit amet ", 16)
	spans := make([]store.Span, 0, n)
	id := 0
	next := func() string { id++; return fmt.Sprintf("%016x", id) }
	rootID := next()
	spans = append(spans, store.Span{TraceID: bigTraceID, SpanID: rootID, Name: "researchAgent", StartTime: 1, EndTime: int64(n) * 10,
		Attributes: json.RawMessage(`{"genkit:name":"researchAgent","genkit:type":"action","genkit:metadata:subtype":"flow"}`)})
	for turn := 0; len(spans) < n; turn++ {
		gen := next()
		t0 := int64(turn*40 + 2)
		spans = append(spans, store.Span{TraceID: bigTraceID, SpanID: gen, ParentSpanID: &rootID, Name: "generate", StartTime: t0, EndTime: t0 + 39,
			Attributes: json.RawMessage(fmt.Sprintf(`{"genkit:name":"generate","genkit:type":"util","loupe.turn.index":%d,"gen_ai.operation.name":"invoke_agent","genkit:input":%q}`, turn, payload))})
		kids := []string{"model", "search", "fetch"}
		for k, kind := range kids {
			if len(spans) >= n {
				break
			}
			attrs := fmt.Sprintf(`{"genkit:name":%q,"genkit:type":"action","loupe.turn.index":%d,"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":%q,"genkit:output":%q}`, kind, turn, kind, payload)
			if kind == "model" {
				attrs = fmt.Sprintf(`{"genkit:name":"scripted","genkit:type":"action","genkit:metadata:subtype":"model","loupe.turn.index":%d,"gen_ai.operation.name":"chat","gen_ai.request.model":"scripted","gen_ai.usage.input_tokens":120,"gen_ai.usage.output_tokens":30,"genkit:output":%q}`, turn, payload)
			}
			spans = append(spans, store.Span{TraceID: bigTraceID, SpanID: next(), ParentSpanID: &gen, Name: kind,
				StartTime: t0 + int64(k*10) + 1, EndTime: t0 + int64(k*10) + 9, Attributes: json.RawMessage(attrs)})
		}
	}
	return spans
}

func TestTreeAndTurnsOfALargeTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	svc, err := trace.NewService(trace.Config{Store: st})
	require.NoError(t, err)
	_, err = st.SpanIngest(ctx, bigTrace(2000))
	require.NoError(t, err)
	tree, err := svc.Tree(ctx, bigTraceID)
	require.NoError(t, err)
	require.Equal(t, 2000, tree.SpanCount)
	require.Len(t, tree.Roots, 1)
	require.Len(t, tree.Roots[0].Children, 500)
	turns, err := svc.Turns(ctx, bigTraceID)
	require.NoError(t, err)
	require.Len(t, turns, 500)
	require.Equal(t, trace.Turn{Index: 7, SpanID: turns[7].SpanID, Model: "scripted", InputTokens: 120, OutputTokens: 30,
		ToolCalls: []trace.ToolCall{{Name: "search", SpanID: turns[7].ToolCalls[0].SpanID, DurationNS: 8}, {Name: "fetch", SpanID: turns[7].ToolCalls[1].SpanID, DurationNS: 8}},
		StartTime: 282, EndTime: 321, DurationNS: 39}, turns[7])
}

// BenchmarkTreeFetch10000Spans measures the server-side work of GET /api/v1/traces/{id} for a
// 10,000-span trace: fetching every span from PostgreSQL and assembling the tree. Target: 50 ms.
//
//	go test ./internal/trace -run '^$' -bench TreeFetch -benchmem
func BenchmarkTreeFetch10000Spans(b *testing.B) {
	ctx := context.Background()
	st := storetest.New(b)
	svc, err := trace.NewService(trace.Config{Store: st})
	require.NoError(b, err)
	_, err = st.SpanIngest(ctx, bigTrace(10000))
	require.NoError(b, err)
	_, err = st.Pool().Exec(ctx, `VACUUM ANALYZE spans`)
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		tree, err := svc.Tree(ctx, bigTraceID)
		if err != nil || tree.SpanCount != 10000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkTurns10000Spans measures the per-turn summary of the same trace.
func BenchmarkTurns10000Spans(b *testing.B) {
	ctx := context.Background()
	st := storetest.New(b)
	svc, err := trace.NewService(trace.Config{Store: st})
	require.NoError(b, err)
	_, err = st.SpanIngest(ctx, bigTrace(10000))
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		if _, err := svc.Turns(ctx, bigTraceID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildTree10000Spans isolates the in-memory assembly.
func BenchmarkBuildTree10000Spans(b *testing.B) {
	spans := bigTrace(10000)
	for b.Loop() {
		trace.BuildTree(spans)
	}
}

// TestTurnsOfNestedGenkitTurnsCountTheirOwnTime: Genkit runs each turn inside the span of the one
// before; a turn's duration is its own, up to where the next starts, and a turn whose span is
// still open only because the next one runs is not running itself.
func TestTurnsOfNestedGenkitTurnsCountTheirOwnTime(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	fact := func(id, parent string, start, end int64, turn string, op string) store.SpanTurnFacts {
		f := store.SpanTurnFacts{SpanID: id, Name: id, StartTime: start, EndTime: end, Operation: str(op)}
		if parent != "" {
			f.ParentSpanID = str(parent)
		}
		if turn != "" {
			f.TurnIndex, f.GenkitType, f.GenkitName = str(turn), str("action"), str(id)
		}
		if op == "invoke_agent" {
			f.GenkitType, f.GenkitName = str("util"), str("generate")
		}
		return f
	}
	turns := trace.BuildTurns([]store.SpanTurnFacts{
		fact("root", "", 0, 0, "", ""),
		fact("t0", "root", 10, 0, "0", "invoke_agent"),
		fact("m0", "t0", 11, 20, "0", "chat"),
		fact("x0", "t0", 20, 30, "0", "execute_tool"),
		fact("t1", "t0", 30, 0, "1", "invoke_agent"),
		fact("m1", "t1", 31, 0, "1", "chat"),
	})
	require.Len(t, turns, 2)
	require.Equal(t, int64(20), turns[0].DurationNS, "turn 0 ends where turn 1 starts")
	require.False(t, turns[0].Running)
	require.Len(t, turns[0].ToolCalls, 1)
	require.True(t, turns[1].Running)
	require.Zero(t, turns[1].DurationNS)
}
