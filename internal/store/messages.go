package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RunMessage is one message of a run's history.
type RunMessage struct {
	RunID   uuid.UUID       `db:"run_id" json:"-"`
	Seq     int             `db:"seq" json:"seq"`
	Turn    int             `db:"turn" json:"turn"`
	Role    string          `db:"role" json:"role"`
	Content json.RawMessage `db:"content" json:"content"`
	// Generation is the generate call of the flow the message belongs to, 0 for the first.
	Generation int       `db:"generation" json:"generation,omitempty"`
	CreatedAt  time.Time `db:"created_at" json:"created_at"`
}

// messageColumns are the columns a RunMessage is read with.
const messageColumns = `run_id, seq, turn, role, content, generation, created_at`

// MessagePut writes the message at position seq of a run's history. Writing the same position
// again replaces it, which is what a resume's re-stamping and a recovered turn need.
func (s *Store) MessagePut(ctx context.Context, runID uuid.UUID, seq, turn int, role string, content json.RawMessage) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO run_messages (run_id, seq, turn, role, content) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (run_id, seq) DO UPDATE SET turn = excluded.turn, role = excluded.role, content = excluded.content`,
		runID, seq, turn, role, content); err != nil {
		return fmt.Errorf("put message %d of run %s: %w", seq, runID, err)
	}
	return nil
}

// MessageList returns a run's history in order.
func (s *Store) MessageList(ctx context.Context, runID uuid.UUID) ([]*RunMessage, error) {
	rows, err := s.db.Query(ctx, `SELECT `+messageColumns+` FROM run_messages
		WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("list messages of run %s: %w", runID, err)
	}
	msgs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[RunMessage])
	if err != nil {
		return nil, fmt.Errorf("list messages of run %s: %w", runID, err)
	}
	return msgs, nil
}

// MessageListByRuns returns the histories of several runs in one query, each in order, keyed by
// run. A run without messages has no key.
func (s *Store) MessageListByRuns(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID][]*RunMessage, error) {
	out := make(map[uuid.UUID][]*RunMessage, len(runIDs))
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `SELECT `+messageColumns+` FROM run_messages
		WHERE run_id = ANY($1) ORDER BY run_id, seq`, runIDs)
	if err != nil {
		return nil, fmt.Errorf("list messages of %d runs: %w", len(runIDs), err)
	}
	msgs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[RunMessage])
	if err != nil {
		return nil, fmt.Errorf("list messages of %d runs: %w", len(runIDs), err)
	}
	for _, m := range msgs {
		out[m.RunID] = append(out[m.RunID], m)
	}
	return out, nil
}

// MessageTruncate deletes the messages from seq on: a recovered run replays from its checkpoint.
func (s *Store) MessageTruncate(ctx context.Context, runID uuid.UUID, fromSeq int) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM run_messages WHERE run_id = $1 AND seq >= $2`, runID, fromSeq); err != nil {
		return fmt.Errorf("truncate messages of run %s: %w", runID, err)
	}
	return nil
}

// MessageCounts counts a run's history: all its messages, and its model messages (one per turn
// that a fork may start from).
type MessageCounts struct {
	Total, Model int
}

// MessageCount counts a run's history without reading it.
func (s *Store) MessageCount(ctx context.Context, runID uuid.UUID) (MessageCounts, error) {
	var n MessageCounts
	if err := s.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE role = 'model') FROM run_messages WHERE run_id = $1`,
		runID).Scan(&n.Total, &n.Model); err != nil {
		return n, fmt.Errorf("count messages of run %s: %w", runID, err)
	}
	return n, nil
}

// MessageListPage returns limit messages of a run's history from position offset (counted from
// 0), in order. A history is bounded by the run's turns, so an offset walk of the primary key is
// cheap; the page number is what a reader pages by.
func (s *Store) MessageListPage(ctx context.Context, runID uuid.UUID, offset, limit int) ([]*RunMessage, error) {
	rows, err := s.db.Query(ctx, `SELECT `+messageColumns+` FROM run_messages
		WHERE run_id = $1 ORDER BY seq OFFSET $2 LIMIT $3`, runID, max(offset, 0), max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("list a page of the messages of run %s: %w", runID, err)
	}
	msgs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[RunMessage])
	if err != nil {
		return nil, fmt.Errorf("list a page of the messages of run %s: %w", runID, err)
	}
	return msgs, nil
}
