package trace_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

var benchIDs atomic.Uint64

// genkitBatchBody is a TraceData body like the load test's: n spans of about 1 KB under one root.
func genkitBatchBody(n int) []byte {
	traceID := fmt.Sprintf("%032x", benchIDs.Add(1))
	pad := strings.Repeat("x", 440)
	spans := map[string]any{}
	var rootID string
	for i := range n {
		id := fmt.Sprintf("%016x", benchIDs.Add(1))
		sp := map[string]any{
			"spanId": id, "traceId": traceID, "startTime": 1700000000000.123 + float64(i), "endTime": 1700000000100.5,
			"attributes": map[string]any{"genkit:name": "tool", "genkit:type": "action",
				"genkit:metadata:subtype": "tool", "genkit:path": "/{flow,t:flow}/{tool,t:action}",
				"genkit:input": `{"q":"` + pad + `"}`, "genkit:state": "success"},
			"displayName": "tool", "instrumentationLibrary": map[string]any{"name": "genkit-tracer", "version": "v1"},
			"spanKind": "INTERNAL", "sameProcessAsParentSpan": map[string]any{"value": true},
			"status": map[string]any{"code": 0}, "timeEvents": map[string]any{},
		}
		if i == 0 {
			rootID = id
		} else {
			sp["parentSpanId"] = rootID
		}
		spans[id] = sp
	}
	b, _ := json.Marshal(map[string]any{"traceId": traceID, "displayName": "flow", "startTime": 1, "endTime": 2, "spans": spans})
	return b
}

// BenchmarkDecodeGenkit20Spans measures decoding one batched POST /api/traces body.
//
//	go test ./internal/trace -run '^$' -bench DecodeGenkit -benchmem
func BenchmarkDecodeGenkit20Spans(b *testing.B) {
	body := genkitBatchBody(20)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := trace.DecodeGenkit(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIngestGenkit measures IngestGenkit end to end (decode, group commit, store) from 8
// concurrent callers, in spans/s: batched bodies of 20 spans, and realtime bodies of one span
// each, sent at its start and again at its end, all into one trace.
//
//	go test ./internal/trace -run '^$' -bench IngestGenkit -benchtime 2000x
func BenchmarkIngestGenkit(b *testing.B) {
	for _, writers := range []int{1, 2} {
		b.Run(fmt.Sprintf("batched/writers=%d", writers), func(b *testing.B) {
			ctx := context.Background()
			svc, err := trace.NewService(trace.Config{Store: storetest.New(b), IngestWriters: writers})
			require.NoError(b, err)
			bodies := make([][]byte, b.N)
			for i := range bodies {
				bodies[i] = genkitBatchBody(20)
			}
			var next atomic.Int64
			b.SetParallelism(4) // 8 callers on 2 CPUs
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := svc.IngestGenkit(ctx, bodies[next.Add(1)-1]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(20*b.N)/b.Elapsed().Seconds(), "spans/s")
		})
		b.Run(fmt.Sprintf("realtime/writers=%d", writers), func(b *testing.B) {
			ctx := context.Background()
			st := storetest.New(b)
			svc, err := trace.NewService(trace.Config{Store: st, IngestWriters: writers})
			require.NoError(b, err)
			traceID := fmt.Sprintf("%032x", benchIDs.Add(1))
			rootID := fmt.Sprintf("%016x", benchIDs.Add(1))
			starts, ends := make([][]byte, b.N), make([][]byte, b.N)
			for i := range starts {
				starts[i], ends[i] = genkitSpanBodies(traceID, rootID)
			}
			var next atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1) - 1
					for _, body := range [][]byte{starts[i], ends[i]} {
						if _, err := svc.IngestGenkit(ctx, body); err != nil {
							b.Error(err)
							return
						}
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spans/s")
			b.StopTimer()
			tr, err := st.TraceGet(ctx, traceID)
			require.NoError(b, err)
			require.Equal(b, b.N, tr.SpanCount, "every span counted once")
			var running int
			require.NoError(b, st.Pool().QueryRow(ctx, `SELECT count(*) FROM spans WHERE trace_id = $1 AND end_time_unix_nano = 0`, traceID).Scan(&running))
			require.Zero(b, running, "every start merged with its end")
		})
	}
}

// genkitSpanBodies are Genkit JS's two realtime bodies of one ~1 KB span: at its start (endTime
// 0) and at its end.
func genkitSpanBodies(traceID, rootID string) (start, end []byte) {
	id := fmt.Sprintf("%016x", benchIDs.Add(1))
	body := func(endTime float64) []byte {
		sp := map[string]any{
			"spanId": id, "traceId": traceID, "parentSpanId": rootID, "startTime": 1700000000000.123, "endTime": endTime,
			"attributes": map[string]any{"genkit:name": "tool", "genkit:type": "action",
				"genkit:input": `{"q":"` + strings.Repeat("x", 500) + `"}`, "genkit:state": "success"},
			"displayName": "tool", "instrumentationLibrary": map[string]any{"name": "genkit-tracer", "version": "v1"},
			"spanKind": "INTERNAL", "status": map[string]any{"code": 0},
		}
		b, _ := json.Marshal(map[string]any{"traceId": traceID, "displayName": "", "startTime": 0, "endTime": 0,
			"spans": map[string]any{id: sp}})
		return b
	}
	return body(0), body(1700000000100.5)
}

// otlpBatchBody is an OTLP/HTTP protobuf export request like the ingest comparison's: n spans of
// about 1.15 KB (a dozen string attributes, one long) under one root, in one resource and scope.
func otlpBatchBody(n int) []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "ingest-bench")
	rs.Resource().Attributes().PutStr("telemetry.sdk.language", "nodejs")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("genkit-tracer")
	ss.Scope().SetVersion("v1")
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[8:], benchIDs.Add(1))
	var root pcommon.SpanID
	pad := strings.Repeat("evidence ", 60)
	for i := range n {
		sp := ss.Spans().AppendEmpty()
		var sid pcommon.SpanID
		binary.BigEndian.PutUint64(sid[:], benchIDs.Add(1))
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		if i == 0 {
			root = sid
		} else {
			sp.SetParentSpanID(root)
		}
		sp.SetName("search")
		sp.SetKind(ptrace.SpanKindInternal)
		sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)*1000))
		sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_100_000_000))
		a := sp.Attributes()
		a.PutStr("genkit:type", "action")
		a.PutStr("genkit:name", "search")
		a.PutStr("genkit:metadata:subtype", "tool")
		a.PutStr("genkit:path", "/{researchAgent,t:flow}/{generate,t:util}/{search,t:action,s:tool}")
		a.PutStr("genkit:state", "success")
		a.PutStr("gen_ai.operation.name", "execute_tool")
		a.PutStr("gen_ai.tool.name", "search")
		a.PutInt("gen_ai.usage.input_tokens", 120)
		a.PutDouble("loupe.cost", 0.00125)
		a.PutBool("genkit:isRoot", i == 0)
		a.PutStr("genkit:input", `{"query":"q"}`)
		a.PutStr("genkit:output", `{"summary":"`+pad+`"}`)
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return body
}

// BenchmarkDecodeOTLP20Spans measures decoding one batched OTLP/HTTP protobuf body into the rows
// the store writes.
//
//	go test ./internal/trace -run '^$' -bench DecodeOTLP -benchmem
func BenchmarkDecodeOTLP20Spans(b *testing.B) {
	body := otlpBatchBody(20)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, _, err := trace.DecodeOTLP(body, trace.ContentTypeProtobuf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIngestOTLP measures IngestOTLP end to end (decode, group commit, store) from 8
// concurrent callers, in spans/s, with batched protobuf bodies of 20 spans.
//
//	go test ./internal/trace -run '^$' -bench IngestOTLP -benchtime 2000x
func BenchmarkIngestOTLP(b *testing.B) {
	ctx := context.Background()
	svc, err := trace.NewService(trace.Config{Store: storetest.New(b)})
	require.NoError(b, err)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = otlpBatchBody(20)
	}
	var next atomic.Int64
	b.SetParallelism(4) // 8 callers on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.IngestOTLP(ctx, bodies[next.Add(1)-1], trace.ContentTypeProtobuf); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(20*b.N)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkFactsOf20Spans measures reading the turn facts of one batched OTLP body's spans from
// their stored attributes, which ingest does for every ended span to fold the trace list's totals.
//
//	go test ./internal/trace -run '^$' -bench FactsOf -benchmem
func BenchmarkFactsOf20Spans(b *testing.B) {
	spans, _, _, err := trace.DecodeOTLP(otlpBatchBody(20), trace.ContentTypeProtobuf)
	require.NoError(b, err)
	for b.Loop() {
		for i := range spans {
			_ = trace.FactsOf(&spans[i])
		}
	}
}
