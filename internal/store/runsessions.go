package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loupe-dev/loupe/internal/pricing"
)

// SessionSummary is one session's runs (the conversation their traces name, see RunSessions):
// how many, their turns and tokens, when the first was created and when the last changed.
type SessionSummary struct {
	Session      string    `db:"session"`
	Runs         int       `db:"runs"`
	Turns        int64     `db:"turns"`
	InputTokens  int64     `db:"input_tokens"`
	OutputTokens int64     `db:"output_tokens"`
	First        time.Time `db:"first"`
	Last         time.Time `db:"last"`
	// Usage is the runs' tokens per model called, summed: what the session's cost is priced from.
	Usage map[string]pricing.Tokens `db:"usage"`
}

// SessionCursor is a keyset position in the sessions list: the last row's Last and Session.
type SessionCursor struct {
	Last    time.Time
	Session string
}

// SessionListParams pages the sessions list.
type SessionListParams struct {
	After *SessionCursor
	Limit int // default 50, at most 500
}

// sessionRunsSQL are the (session, run) pairs of runs whose traces name a session, once each (a
// resumed run has a trace per execution): traces_session_runs serves it from the index alone.
const sessionRunsSQL = `SELECT DISTINCT session, run_id FROM traces WHERE session IS NOT NULL AND run_id IS NOT NULL`

// SessionList returns sessions with runs, the one active last first, and the cursor of the next
// page (nil on the last page). A run's last activity is its last change (updated_at).
func (s *Store) SessionList(ctx context.Context, p SessionListParams) ([]*SessionSummary, *SessionCursor, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	args := []any{limit + 1}
	where := ""
	if p.After != nil {
		where = "WHERE (last, session) < ($2, $3)"
		args = append(args, p.After.Last, p.After.Session)
	}
	rows, err := s.db.Query(ctx, `WITH sr AS (`+sessionRunsSQL+`),
		s AS (SELECT sr.session, count(*)::int AS runs, coalesce(sum(r.turns), 0)::bigint AS turns,
				coalesce(sum(r.input_tokens), 0)::bigint AS input_tokens, coalesce(sum(r.output_tokens), 0)::bigint AS output_tokens,
				min(r.created_at) AS first, max(r.updated_at) AS last
			FROM sr JOIN runs r ON r.id = sr.run_id GROUP BY sr.session),
		page AS (SELECT * FROM s `+where+` ORDER BY last DESC, session DESC LIMIT $1)
		SELECT page.*, (SELECT jsonb_object_agg(key, jsonb_build_object('input', i, 'output', o)) FROM (
				SELECT e.key, sum((e.value->>'input')::bigint) AS i, sum((e.value->>'output')::bigint) AS o
				FROM sr JOIN runs r ON r.id = sr.run_id, jsonb_each(r.usage) e
				WHERE sr.session = page.session GROUP BY e.key) g) AS usage
		FROM page ORDER BY last DESC, session DESC`, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list sessions: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[SessionSummary])
	if err != nil {
		return nil, nil, fmt.Errorf("list sessions: %w", err)
	}
	var next *SessionCursor
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		next = &SessionCursor{Last: last.Last, Session: last.Session}
	}
	return list, next, nil
}
