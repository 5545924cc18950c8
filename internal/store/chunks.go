package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RunChunk is one streamed chunk of a run.
type RunChunk struct {
	RunID     uuid.UUID       `db:"run_id" json:"-"`
	Seq       int64           `db:"seq" json:"seq"`
	Turn      int             `db:"turn" json:"turn"`
	Index     int             `db:"idx" json:"index"`
	Role      string          `db:"role" json:"role"`
	Content   json.RawMessage `db:"content" json:"content"`
	CreatedAt time.Time       `db:"created_at" json:"created_at"`
}

// ChunkInsert appends chunks, which carry their own per-run sequence numbers, in one COPY.
func (s *Store) ChunkInsert(ctx context.Context, chunks []RunChunk) error {
	if len(chunks) == 0 {
		return nil
	}
	_, err := s.db.CopyFrom(ctx, pgx.Identifier{"run_chunks"}, []string{"run_id", "seq", "turn", "idx", "role", "content"},
		pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
			c := chunks[i]
			return []any{c.RunID, c.Seq, c.Turn, c.Index, c.Role, c.Content}, nil
		}))
	if err != nil {
		return fmt.Errorf("insert %d chunks: %w", len(chunks), err)
	}
	return nil
}

// ChunkList returns a run's chunks with a sequence number above after, in order.
func (s *Store) ChunkList(ctx context.Context, runID uuid.UUID, after int64, limit int) ([]*RunChunk, error) {
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	rows, err := s.db.Query(ctx, `SELECT run_id, seq, turn, idx, role, content, created_at FROM run_chunks
		WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list chunks of run %s: %w", runID, err)
	}
	chunks, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[RunChunk])
	if err != nil {
		return nil, fmt.Errorf("list chunks of run %s: %w", runID, err)
	}
	return chunks, nil
}

// ChunkMaxSeq returns the highest chunk sequence number of a run, 0 for none.
func (s *Store) ChunkMaxSeq(ctx context.Context, runID uuid.UUID) (int64, error) {
	var seq int64
	if err := s.db.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM run_chunks WHERE run_id = $1`, runID).Scan(&seq); err != nil {
		return 0, fmt.Errorf("max chunk of run %s: %w", runID, err)
	}
	return seq, nil
}

// ChunkReplaceMessage makes the chunks of a turn's model or tool message (role) say content (its
// parts), for a fork that edited the message in its copied history: the first of them takes the
// edited parts and the others go, so a played-back stream shows what the history and the model
// saw. A turn has one message of each role, whose chunks are found by turn and role (their idx
// counts from the start of the execution that streamed them, not from the history's). A message
// that streamed no chunk (an input message) gets none.
func (s *Store) ChunkReplaceMessage(ctx context.Context, runID uuid.UUID, turn int, role string, content json.RawMessage) error {
	if _, err := s.db.Exec(ctx, `WITH first AS (
			SELECT min(seq) AS seq FROM run_chunks WHERE run_id = $1 AND turn = $2 AND role = $3),
		gone AS (
			DELETE FROM run_chunks WHERE run_id = $1 AND turn = $2 AND role = $3 AND seq > (SELECT seq FROM first))
		UPDATE run_chunks SET content = $4 WHERE run_id = $1 AND seq = (SELECT seq FROM first)`,
		runID, turn, role, content); err != nil {
		return fmt.Errorf("replace the %s chunks of turn %d of run %s: %w", role, turn, runID, err)
	}
	return nil
}

// ChunkPageParams picks a page of a run's stream: the Limit chunks just after After, or just
// before Before, or, with neither, the run's last Limit chunks (the live end).
type ChunkPageParams struct {
	RunID         uuid.UUID
	After, Before *int64
	Limit         int
}

// ChunkPage is a page of a run's stream, in order, and where it sits in the whole stream.
type ChunkPage struct {
	Chunks []*RunChunk
	// Offset counts the run's chunks before the page's first, Total all of them and MaxSeq is
	// the last one's sequence number, all read just after the page (so they may count chunks
	// that came since).
	Offset, Total int
	MaxSeq        int64
	// Latest says that no chunk came after the page when it was read: a live stream goes on
	// from its last chunk.
	Latest bool
}

// ChunkListPage reads one page of a run's stream by sequence number (a keyset: a page costs the
// same wherever it is in a stream of any length), and counts where it sits, so that a page can
// say "chunks 4801–5000 of 5000". Chunks are only ever appended, with growing sequence numbers,
// so the count of those before the page holds whenever it is read.
func (s *Store) ChunkListPage(ctx context.Context, p ChunkPageParams) (*ChunkPage, error) {
	if p.Limit <= 0 || p.Limit > 10000 {
		p.Limit = 10000
	}
	const cols = `run_id, seq, turn, idx, role, content, created_at`
	var (
		rows pgx.Rows
		err  error
	)
	switch {
	case p.After != nil: // one more than asked for, to know whether the page reaches the end
		rows, err = s.db.Query(ctx, `SELECT `+cols+` FROM run_chunks WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
			p.RunID, *p.After, p.Limit+1)
	case p.Before != nil:
		rows, err = s.db.Query(ctx, `SELECT `+cols+` FROM (SELECT `+cols+` FROM run_chunks WHERE run_id = $1 AND seq < $2
			ORDER BY seq DESC LIMIT $3) page ORDER BY seq`, p.RunID, *p.Before, p.Limit)
	default:
		rows, err = s.db.Query(ctx, `SELECT `+cols+` FROM (SELECT `+cols+` FROM run_chunks WHERE run_id = $1
			ORDER BY seq DESC LIMIT $2) page ORDER BY seq`, p.RunID, p.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list a page of the chunks of run %s: %w", p.RunID, err)
	}
	chunks, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[RunChunk])
	if err != nil {
		return nil, fmt.Errorf("list a page of the chunks of run %s: %w", p.RunID, err)
	}
	page := &ChunkPage{Chunks: chunks}
	switch {
	case p.After != nil:
		page.Latest = len(chunks) <= p.Limit
		page.Chunks = chunks[:min(len(chunks), p.Limit)]
	case p.Before == nil:
		page.Latest = true
	}
	// The page starts after everything before its first chunk; an empty page after After sits
	// after the chunks up to After, and an empty page before Before (or at the end) at the start.
	var below, last int64
	switch {
	case len(page.Chunks) > 0:
		below, last = page.Chunks[0].Seq, page.Chunks[len(page.Chunks)-1].Seq
	case p.After != nil:
		below, last = *p.After+1, *p.After
	case p.Before != nil:
		last = *p.Before - 1
	}
	var later int
	if err := s.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE seq < $2), count(*) FILTER (WHERE seq > $3),
			coalesce(max(seq), 0) FROM run_chunks WHERE run_id = $1`,
		p.RunID, below, last).Scan(&page.Total, &page.Offset, &later, &page.MaxSeq); err != nil {
		return nil, fmt.Errorf("count the chunks of run %s: %w", p.RunID, err)
	}
	if p.Before != nil {
		page.Latest = later == 0
	}
	return page, nil
}
