package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

func seqs(chunks []*store.RunChunk) []int64 {
	out := make([]int64, len(chunks))
	for i, c := range chunks {
		out[i] = c.Seq
	}
	return out
}

func seqRange(from, to int64, skip ...int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		if len(skip) == 0 || s != skip[0] {
			out = append(out, s)
		}
	}
	return out
}

// TestChunkListPageIsAKeysetWithItsPlace: a run's stream pages by sequence number: the last page
// by default, the page before a chunk or after one, each saying how many chunks come before it
// and how many there are, a hole in the sequence (a fork's edited message) counted right, and a
// page past either end empty but placed.
func TestChunkListPageIsAKeysetWithItsPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	var chunks []store.RunChunk
	for seq := int64(1); seq <= 1000; seq++ {
		if seq == 500 {
			continue // a hole
		}
		chunks = append(chunks, store.RunChunk{RunID: run.ID, Seq: seq, Role: "flow", Content: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq))})
	}
	require.NoError(t, s.ChunkInsert(ctx, chunks))
	at := func(v int64) *int64 { return &v }

	type place struct {
		Offset, Total int
		MaxSeq        int64
		Latest        bool
	}
	page := func(p store.ChunkPageParams) ([]int64, place) {
		t.Helper()
		p.RunID, p.Limit = run.ID, 200
		got, err := s.ChunkListPage(ctx, p)
		require.NoError(t, err)
		return seqs(got.Chunks), place{got.Offset, got.Total, got.MaxSeq, got.Latest}
	}

	got, where := page(store.ChunkPageParams{})
	require.Equal(t, seqRange(801, 1000), got, "the live end by default")
	require.Equal(t, place{Offset: 799, Total: 999, MaxSeq: 1000, Latest: true}, where)

	got, where = page(store.ChunkPageParams{Before: at(801)})
	require.Equal(t, seqRange(601, 800), got)
	require.Equal(t, place{Offset: 599, Total: 999, MaxSeq: 1000}, where)

	got, where = page(store.ChunkPageParams{Before: at(601)})
	require.Equal(t, seqRange(400, 600, 500), got, "the hole is skipped, the page still full")
	require.Equal(t, 399, where.Offset)

	got, where = page(store.ChunkPageParams{After: at(0)})
	require.Equal(t, seqRange(1, 200), got)
	require.Equal(t, place{Offset: 0, Total: 999, MaxSeq: 1000}, where)

	got, where = page(store.ChunkPageParams{After: at(800)})
	require.Equal(t, seqRange(801, 1000), got)
	require.Equal(t, place{Offset: 799, Total: 999, MaxSeq: 1000, Latest: true}, where, "a full page up to the end is the end")

	got, where = page(store.ChunkPageParams{After: at(1000)})
	require.Empty(t, got)
	require.Equal(t, place{Offset: 999, Total: 999, MaxSeq: 1000, Latest: true}, where)

	got, where = page(store.ChunkPageParams{Before: at(1)})
	require.Empty(t, got)
	require.Equal(t, place{Offset: 0, Total: 999, MaxSeq: 1000}, where)

	got, where = page(store.ChunkPageParams{Before: at(1001)})
	require.Equal(t, seqRange(801, 1000), got, "before a chunk yet to come is the end")
	require.True(t, where.Latest)

	other, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	empty, err := s.ChunkListPage(ctx, store.ChunkPageParams{RunID: other.ID, Limit: 200})
	require.NoError(t, err)
	require.Equal(t, store.ChunkPage{Chunks: empty.Chunks, Latest: true}, *empty, "a run that streamed nothing")
	require.Empty(t, empty.Chunks)
}

// TestMessageAndToolCallPagesAndCounts: a run's history and ledger page by position, in the
// order the full lists have, and are counted without being read (the fork menu's model messages
// too); the ledger's keys come without the calls' payloads.
func TestMessageAndToolCallPagesAndCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	run, err := s.RunCreate(ctx, store.RunCreateParams{Action: "/flow/a"})
	require.NoError(t, err)
	roles := []string{"user", "model", "tool"}
	for seq := range 120 {
		role := roles[seq%3]
		require.NoError(t, s.MessagePut(ctx, run.ID, seq, seq/3, role, json.RawMessage(fmt.Sprintf(`{"role":%q,"content":[{"text":"m%d"}]}`, role, seq))))
	}
	n, err := s.MessageCount(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, store.MessageCounts{Total: 120, Model: 40}, n)
	for _, c := range []struct{ offset, want, first int }{{0, 50, 0}, {50, 50, 50}, {100, 20, 100}, {150, 0, 0}} {
		msgs, err := s.MessageListPage(ctx, run.ID, c.offset, 50)
		require.NoError(t, err)
		require.Len(t, msgs, c.want, "offset %d", c.offset)
		for i, m := range msgs {
			require.Equal(t, c.first+i, m.Seq)
		}
	}

	for i := range 250 {
		_, _, err := s.ToolCallStart(ctx, store.Fence{}, store.ToolCallStartParams{RunID: run.ID, Turn: i / 10, Ref: fmt.Sprintf("r%03d", i),
			Tool: "t", Input: json.RawMessage(`{"big":"` + fmt.Sprint(i) + `"}`), IdempotencyKey: fmt.Sprint(i)})
		require.NoError(t, err)
	}
	count, err := s.ToolCallCount(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, 250, count)
	all, err := s.ToolCallList(ctx, run.ID)
	require.NoError(t, err)
	for _, off := range []int{0, 100, 200} {
		calls, err := s.ToolCallListPage(ctx, run.ID, off, 100)
		require.NoError(t, err)
		require.Equal(t, all[off:min(off+100, len(all))], calls, "offset %d: the page is that part of the whole ledger", off)
	}
	keys, err := s.ToolCallKeys(ctx, run.ID, 3)
	require.NoError(t, err)
	require.Equal(t, []store.ToolCallKey{{Turn: 0, Ref: "r000", Tool: "t"}, {Turn: 0, Ref: "r001", Tool: "t"}, {Turn: 0, Ref: "r002", Tool: "t"}}, keys)
}
