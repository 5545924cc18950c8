package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

var benchIDs atomic.Uint64

// benchSpans builds traces of perTrace spans of about 1 KB each, like the load test's.
func benchSpans(n, perTrace int) []store.Span {
	pad := strings.Repeat("x", 440)
	attrs := json.RawMessage(`{"genkit:name":"tool","genkit:type":"action","genkit:metadata:subtype":"tool",` +
		`"genkit:path":"/{flow,t:flow}/{tool,t:action}","genkit:input":"{\"q\":\"` + pad + `\"}","genkit:state":"success"}`)
	spans := make([]store.Span, n)
	var traceID, rootID string
	for i := range spans {
		if i%perTrace == 0 {
			traceID = fmt.Sprintf("%032x", benchIDs.Add(1))
		}
		id := fmt.Sprintf("%016x", benchIDs.Add(1))
		sp := store.Span{TraceID: traceID, SpanID: id, Name: "tool", Kind: 1, StartTime: 1e18 + int64(i),
			EndTime: 1e18 + int64(i) + 5, Attributes: attrs, Resource: json.RawMessage(`{}`),
			Scope: "genkit-tracer", ScopeVersion: "v1", Source: store.SpanSourceGenkit}
		if i%perTrace == 0 {
			rootID = id
		} else {
			p := rootID
			sp.ParentSpanID = &p
		}
		spans[i] = sp
	}
	return spans
}

// BenchmarkSpanIngest measures one writer's ingest throughput at several batch sizes, against a
// raw COPY of the same rows, in spans/s.
//
//	go test ./internal/store -run '^$' -bench SpanIngest -benchtime 20x
func BenchmarkSpanIngest(b *testing.B) {
	ctx := context.Background()
	st := storetest.New(b)
	for _, batch := range []int{20, 160, 1000} {
		for _, mode := range []string{"merge", "copymerge", "rawcopy"} {
			b.Run(fmt.Sprintf("%s/batch=%d", mode, batch), func(b *testing.B) {
				const total = 10000
				batches := make([][]store.Span, total/batch)
				for i := range batches {
					batches[i] = benchSpans(batch, 20)
				}
				for b.Loop() {
					for _, spans := range batches {
						var err error
						switch mode {
						case "merge":
							_, err = st.SpanIngest(ctx, spans)
						case "copymerge":
							_, err = st.SpanIngestCopy(ctx, spans)
						case "rawcopy":
							_, err = st.SpanCopyRaw(ctx, spans)
						}
						require.NoError(b, err)
					}
					b.StopTimer()
					for i := range batches {
						batches[i] = benchSpans(batch, 20)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "spans/s")
			})
		}
	}
}
