package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func knownTestSpans(from, n int) []Span {
	spans := make([]Span, n)
	for i := range spans {
		spans[i] = Span{TraceID: fmt.Sprintf("%032x", (from+i)/8), SpanID: fmt.Sprintf("%016x", from+i)}
	}
	return spans
}

// TestKnownSpansRemembersTwoGenerations: a span added is known until two generations of newer
// ones have filled after it, and one never added is not known (bar a hash collision).
func TestKnownSpansRemembersTwoGenerations(t *testing.T) {
	t.Parallel()
	k := newKnownSpans()
	first := knownTestSpans(0, 100)
	require.False(t, k.anyKnown(first))
	k.add(first)
	for i := range first {
		require.True(t, k.anyKnown(first[i:i+1]), i)
	}
	require.False(t, k.anyKnown(knownTestSpans(100, 1000)), "spans never added")

	// One generation's worth more: the first spans are in the older generation, still known.
	k.add(knownTestSpans(1000, knownSpanLimit-100))
	require.True(t, k.anyKnown(first[:1]))
	require.True(t, k.anyKnown(first[99:]))
	// Another, and one more: the first spans' generation is dropped.
	k.add(knownTestSpans(1000+knownSpanLimit, knownSpanLimit+1))
	require.False(t, k.anyKnown(first))
	require.True(t, k.anyKnown(knownTestSpans(1000+knownSpanLimit, 1)), "the newest are known")
	require.LessOrEqual(t, k.cur.n, knownSpanLimit)

	// Adding a span twice counts it once.
	again := newKnownSpans()
	again.add(first)
	again.add(first)
	require.Equal(t, len(first), again.cur.n)
}

// BenchmarkKnownSpans43 is ingest's bookkeeping for a group of 43 spans: is any known, then add them.
func BenchmarkKnownSpans43(b *testing.B) {
	k := newKnownSpans()
	all := knownTestSpans(0, 1<<20)
	at := 0
	for b.Loop() {
		if at+43 > len(all) {
			at = 0
		}
		spans := all[at : at+43]
		at += 43
		k.anyKnown(spans)
		k.add(spans)
	}
}
