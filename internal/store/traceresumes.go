package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// InterruptRef is a tool request that interrupted a generate, in the trace that recorded it.
type InterruptRef struct {
	TraceID   string
	Tool, Ref string
	StartTime int64
	Session   string
}

// ResumeRef is a tool request that a generate resumes (its input's resume.respond or
// resume.restart), in the trace that resumes it.
type ResumeRef struct {
	TraceID   string
	Tool, Ref string
	StartTime int64
	Session   string
}

// TraceResumeFold records the interrupted tool requests of spans just ingested, and links each
// resuming trace to the trace it resumes: the latest earlier trace that interrupted with the same
// tool and ref, in the same session when both name one. Idempotent.
func (s *Store) TraceResumeFold(ctx context.Context, refs []InterruptRef, resumes []ResumeRef) error {
	if len(refs) == 0 && len(resumes) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, r := range refs {
		b.Queue(`INSERT INTO interrupt_refs (trace_id, tool, ref, start_time, session) VALUES ($1, $2, $3, $4, nullif($5, ''))
			ON CONFLICT (tool, ref, trace_id) DO NOTHING`, r.TraceID, r.Tool, r.Ref, r.StartTime, r.Session)
	}
	for _, r := range resumes {
		b.Queue(`INSERT INTO trace_resumes (resumed_trace, interrupted_trace, tool, ref)
			SELECT $1, i.trace_id, $2, $3 FROM interrupt_refs i
			WHERE i.tool = $2 AND i.ref = $3 AND i.trace_id <> $1 AND i.start_time <= $4
				-- A trace that interrupted with this very call resumed its own interrupt.
				AND NOT EXISTS (SELECT 1 FROM interrupt_refs o WHERE o.trace_id = $1 AND o.tool = $2 AND o.ref = $3)
				AND (i.session IS NULL OR nullif($5, '') IS NULL OR i.session = $5)
			ORDER BY (i.session IS NOT DISTINCT FROM nullif($5, '')) DESC, i.start_time DESC LIMIT 1
			ON CONFLICT DO NOTHING`, r.TraceID, r.Tool, r.Ref, r.StartTime, r.Session)
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("link resumed traces: %w", err)
	}
	return nil
}

// TraceResumeLinks returns the traces a trace resumes and the traces that resume it.
func (s *Store) TraceResumeLinks(ctx context.Context, traceID string) (resumes, resumedBy []string, err error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT interrupted_trace, false FROM trace_resumes WHERE resumed_trace = $1
		UNION SELECT DISTINCT resumed_trace, true FROM trace_resumes WHERE interrupted_trace = $1`, traceID)
	if err != nil {
		return nil, nil, fmt.Errorf("resume links of trace %s: %w", traceID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var by bool
		if err := rows.Scan(&id, &by); err != nil {
			return nil, nil, fmt.Errorf("resume links of trace %s: %w", traceID, err)
		}
		if by {
			resumedBy = append(resumedBy, id)
		} else {
			resumes = append(resumes, id)
		}
	}
	return resumes, resumedBy, rows.Err()
}

// ResumedCall is a tool call that a trace resumes: the interrupted trace, and the tool and ref of
// the call that interrupted there.
type ResumedCall struct {
	InterruptedTrace string
	Tool, Ref        string
}

// TraceResumedCalls returns the interrupted calls a trace resumes, in a stable order (by
// interrupted trace, tool, ref), read along trace_resumes' key.
func (s *Store) TraceResumedCalls(ctx context.Context, traceID string) ([]ResumedCall, error) {
	rows, err := s.db.Query(ctx, `SELECT interrupted_trace, tool, ref FROM trace_resumes WHERE resumed_trace = $1
		ORDER BY interrupted_trace, tool, ref`, traceID)
	if err != nil {
		return nil, fmt.Errorf("resumed calls of trace %s: %w", traceID, err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ResumedCall])
	if err != nil {
		return nil, fmt.Errorf("resumed calls of trace %s: %w", traceID, err)
	}
	return calls, nil
}
