package trace_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/trace"
)

func TestIDGeneratorGivesTheAskedRootIDsOnce(t *testing.T) {
	t.Parallel()
	g := trace.IDGenerator{}
	tid, _ := oteltrace.TraceIDFromHex("0195c1a2b3c47d8e9f00112233445566")
	sid, _ := oteltrace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := engine.WithRootSpanIDs(context.Background(), tid, sid)
	gotT, gotS := g.NewIDs(ctx)
	require.Equal(t, tid, gotT)
	require.Equal(t, sid, gotS)
	againT, againS := g.NewIDs(ctx)
	require.NotEqual(t, tid, againT, "asked ids are given to one root span only")
	require.NotEqual(t, sid, againS)
	plainT, plainS := g.NewIDs(context.Background())
	require.True(t, plainT.IsValid())
	require.True(t, plainS.IsValid())
	require.NotEqual(t, plainS, g.NewSpanID(ctx, plainT))
}
