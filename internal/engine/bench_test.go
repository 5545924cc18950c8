package engine_test

import (
	"context"
	"testing"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/engine/scripted"
)

// BenchmarkGenerate3ToolTurns runs one generate with 3 tool turns (4 scripted model calls, 3 tool
// calls), maxTurns 5, with every span recorded by the OTel SDK into an in-memory exporter.
// Reproduce: go test -run '^$' -bench BenchmarkGenerate3ToolTurns -benchmem ./internal/engine
func BenchmarkGenerate3ToolTurns(b *testing.B) {
	bd := setup(b)
	w := weather(bd, nil)
	m := scripted.New("scripted/bench",
		scripted.Reply(call("getWeather", "c1", map[string]any{"city": "Paris"})),
		scripted.Reply(call("getWeather", "c2", map[string]any{"city": "Rome"})),
		scripted.Reply(call("getWeather", "c3", map[string]any{"city": "Oslo"})),
		scripted.Text("done"),
	).Loop()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := engine.Generate(ctx, bd.r, engine.WithModel(m), engine.WithPrompt("plan my trip"), engine.WithTools(w), engine.WithMaxTurns(5))
		if err != nil || resp.Text() != "done" {
			b.Fatal(err)
		}
		bd.exp.Reset()
	}
	b.StopTimer()
}
