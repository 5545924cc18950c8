package server

import (
	"context"
	"testing"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/stretchr/testify/require"
)

// TestSkeletonCacheKeepsAFinishedTraceUntilItChanges: a finished trace's skeleton is built once
// and shared by the requests after; a span ingested later, or one that arrives without its end,
// is seen at once, and a trace with a span still open is never kept.
func TestSkeletonCacheKeepsAFinishedTraceUntilItChanges(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	ctx := context.Background()
	const traceID = "5c74a721b00e2befd7101e2794d8c4b0"
	ingest := func(id, parent string, start, end int64) {
		_, err := b.store.SpanIngest(ctx, []store.Span{testSpan(traceID, id, parent, id, start, end, `{}`)})
		require.NoError(t, err)
	}
	ingest("a000000000000001", "", 1e9, 5e9)
	ingest("a000000000000002", "a000000000000001", 2e9, 3e9)
	first, err := b.srv.loadSkeleton(ctx, traceID)
	require.NoError(t, err)
	again, err := b.srv.loadSkeleton(ctx, traceID)
	require.NoError(t, err)
	require.Same(t, first, again, "built once for a finished trace")

	ingest("a000000000000003", "a000000000000001", 3e9, 4e9)
	grown, err := b.srv.loadSkeleton(ctx, traceID)
	require.NoError(t, err)
	require.NotSame(t, first, grown)
	require.Len(t, grown.Facts, 3, "the new span is seen at once")

	ingest("a000000000000004", "a000000000000001", 4e9, 0) // started, no end yet
	open1, err := b.srv.loadSkeleton(ctx, traceID)
	require.NoError(t, err)
	open2, err := b.srv.loadSkeleton(ctx, traceID)
	require.NoError(t, err)
	require.True(t, open1.Open)
	require.NotSame(t, open1, open2, "a trace with an open span is built for each request")

	ingest("a000000000000004", "a000000000000001", 4e9, 4.5e9) // its end: an update, same count
	ended, err := b.srv.loadSkeleton(ctx, traceID)
	require.NoError(t, err)
	require.False(t, ended.Open, "the end is seen")
}
