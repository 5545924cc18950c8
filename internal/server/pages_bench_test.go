package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// BenchmarkRunPage measures the server's render of the run page (all queries included) for runs
// whose trace has 100, 1,000 and 10,000 spans, shaped like Genkit's: a flow, then nested generate
// turns of a model call and six tool calls each, with realistic input and output attributes.
//
//	go test ./internal/server -run '^$' -bench RunPage -benchmem
func BenchmarkRunPage(b *testing.B) {
	pool, err := pgxpool.New(context.Background(), storetest.NewURL(b))
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	st := store.New(pool)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: true}, Deps{Store: st})
	require.NoError(b, err)
	for _, n := range []int{100, 1000, 10000} {
		runID := seedTrace(b, st, n)
		// cold: the first render of the trace (its skeleton built from the database); warm: a
		// render after it, the finished trace's skeleton kept (skeleton_cache.go).
		for _, warm := range []bool{false, true} {
			name := fmt.Sprintf("spans=%d/cold", n)
			if warm {
				name = fmt.Sprintf("spans=%d/warm", n)
			}
			b.Run(name, func(b *testing.B) { runPageLoop(b, srv, runID, warm) })
		}
	}
}

func runPageLoop(b *testing.B, srv *Server, runID uuid.UUID, warm bool) {
	var size int
	for b.Loop() {
		if !warm {
			srv.skeletons = skeletonCache{}
		}
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:4000/runs/"+runID.String(), nil)
		req.Header.Set("Accept", "text/html")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "html-bytes")
}

// seedTrace stores a run with a trace of n spans: 8 per turn (generate, model, 6 tools).
func seedTrace(b testing.TB, st *store.Store, n int) uuid.UUID {
	b.Helper()
	return seedTraceAt(b, st, n, 1_700_000_000_000_000_000)
}

// seedTraceAt is seedTrace with its root starting at t0, Unix nanoseconds.
func seedTraceAt(b testing.TB, st *store.Store, n int, t0 int64) uuid.UUID {
	b.Helper()
	ctx := context.Background()
	run, err := st.RunCreate(ctx, store.RunCreateParams{Action: "/flow/researchAgent", Input: json.RawMessage(`{"topic":"bench"}`)})
	require.NoError(b, err)
	traceID := strings.ReplaceAll(uuid.NewString(), "-", "")
	spans := make([]store.Span, 0, n)
	id := func(i int) string { return fmt.Sprintf("%016x", i+1) }
	add := func(parent string, name string, attrs map[string]any, start, end int64) string {
		s := store.Span{TraceID: traceID, SpanID: id(len(spans)), Name: name, StartTime: start, EndTime: end,
			Attributes: mustJSON(attrs), Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{"service.name":"loupe"}`),
			Source: store.SpanSourceLoupe, RunID: &run.ID}
		if parent != "" {
			s.ParentSpanID = &parent
		}
		spans = append(spans, s)
		return s.SpanID
	}
	payload := strings.Repeat("evidence ", 60)
	root := add("", "researchAgent", map[string]any{"loupe.run.id": run.ID.String(), "genkit:type": "action", "genkit:metadata:subtype": "flow",
		"gen_ai.operation.name": "invoke_agent", "genkit:input": `{"topic":"bench"}`}, t0, t0+int64(n)*1e6)
	parent := root
	for turn := 0; len(spans) < n; turn++ {
		start := t0 + int64(turn)*8e6
		g := add(parent, "generate", map[string]any{"loupe.run.id": run.ID.String(), "genkit:type": "util", "genkit:name": "generate",
			"loupe.turn.index": fmt.Sprint(turn), "gen_ai.operation.name": "invoke_agent", "genkit:input": `{"messages":["` + payload + `"]}`},
			start, t0+int64(n)*1e6-int64(turn))
		if len(spans) < n {
			add(g, "demo/research", map[string]any{"gen_ai.operation.name": "chat", "genkit:metadata:subtype": "model", "gen_ai.request.model": "demo/research",
				"gen_ai.usage.input_tokens": "120", "gen_ai.usage.output_tokens": "18", "genkit:output": `{"text":"` + payload + `"}`}, start+1e5, start+1e6)
		}
		for k := 0; k < 6 && len(spans) < n; k++ {
			add(g, "search", map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "genkit:metadata:subtype": "tool",
				"genkit:input": `{"query":"q"}`, "genkit:output": `{"summary":"` + payload + `"}`}, start+1e6+int64(k)*1e5, start+2e6+int64(k)*1e5)
		}
		parent = g
	}
	_, err = st.SpanIngest(ctx, spans)
	require.NoError(b, err)
	return run.ID
}
