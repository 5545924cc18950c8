package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/loupe-dev/loupe"
	"github.com/loupe-dev/loupe/ai"
	"github.com/loupe-dev/loupe/mcp"
)

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// benchCalls runs tool b.N times with the same input and reports the median call's time as
// p50-ns (ns/op is the mean).
func benchCalls(b *testing.B, tool ai.Tool) {
	ctx := context.Background()
	in := json.RawMessage(`{"a":2,"b":3}`)
	times := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := tool.RunTool(&ai.ToolContext{Context: ctx, Name: tool.Name()}, in); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkToolCallDirect: a Loupe tool that adds two numbers, in process.
func BenchmarkToolCallDirect(b *testing.B) {
	app := loupe.New()
	tool := loupe.DefineTool(app, "add", "Adds.", func(tc *ai.ToolContext, in addIn) (map[string]float64, error) {
		return map[string]float64{"sum": in.A + in.B}, nil
	})
	benchCalls(b, tool)
}

// BenchmarkToolCallMCPStdio: the same addition as the tool of a real MCP server on stdio
// (testdata/mcpserver): the difference from BenchmarkToolCallDirect is MCP's overhead.
func BenchmarkToolCallMCPStdio(b *testing.B) {
	app := loupe.New()
	tools, err := mcp.Tools(context.Background(), app, connectStdio(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, tool := range tools {
		if tool.Name() == "calc_add" {
			benchCalls(b, tool)
			return
		}
	}
	b.Fatal("no calc_add")
}
