package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrClaimed says that another reviewer has claimed the interrupt.
var ErrClaimed = errors.New("claimed by another reviewer")

// InterruptClaimParams claims a pending interrupt for To on behalf of By (By == To for a claim,
// another name for an assignment). Force takes it over from whoever has it.
type InterruptClaimParams struct {
	ID    uuid.UUID
	To    string
	Force bool
}

// InterruptClaim gives a pending interrupt to p.To. It fails with ErrClaimed (and returns the
// interrupt as it is) when someone else has it and p.Force is false, and with ErrNotFound when it
// is not pending. A claim does not change the version: a form opened before it is not stale.
func (s *Store) InterruptClaim(ctx context.Context, p InterruptClaimParams) (*Interrupt, error) {
	rows, err := s.db.Query(ctx, `UPDATE interrupts SET claimed_by = $2, claimed_at = now()
		WHERE id = $1 AND status = 'pending' AND (claimed_by IS NULL OR claimed_by = $2 OR $3)
		RETURNING `+interruptColumns, p.ID, p.To, p.Force)
	if err != nil {
		return nil, fmt.Errorf("claim interrupt %s: %w", p.ID, err)
	}
	it, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err == nil {
		return it, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("claim interrupt %s: %w", p.ID, err)
	}
	cur, err := s.InterruptGet(ctx, p.ID, false)
	if err != nil {
		return nil, err
	}
	if cur.Status != InterruptPending {
		return cur, fmt.Errorf("claim interrupt %s: it is %s: %w", p.ID, cur.Status, ErrNotFound)
	}
	return cur, fmt.Errorf("claim interrupt %s: %w", p.ID, ErrClaimed)
}

// InterruptRelease gives a pending interrupt back to the queue. Only its claimant releases it,
// unless force.
func (s *Store) InterruptRelease(ctx context.Context, id uuid.UUID, by string, force bool) (*Interrupt, error) {
	rows, err := s.db.Query(ctx, `UPDATE interrupts SET claimed_by = NULL, claimed_at = NULL
		WHERE id = $1 AND status = 'pending' AND (claimed_by = $2 OR $3 OR claimed_by IS NULL)
		RETURNING `+interruptColumns, id, by, force)
	if err != nil {
		return nil, fmt.Errorf("release interrupt %s: %w", id, err)
	}
	it, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err == nil {
		return it, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("release interrupt %s: %w", id, err)
	}
	cur, err := s.InterruptGet(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if cur.Status != InterruptPending {
		return cur, fmt.Errorf("release interrupt %s: it is %s: %w", id, cur.Status, ErrNotFound)
	}
	return cur, fmt.Errorf("release interrupt %s: %w", id, ErrClaimed)
}

// InterruptFacet is how many pending interrupts one tool has in one action.
type InterruptFacet struct {
	Tool   string `db:"tool"`
	Action string `db:"action"`
	Count  int    `db:"n"`
}

// InterruptPendingFacets counts the pending interrupts by tool and action, in one query: the
// inbox's filter choices and its empty state ("no item matches; 4 others wait") come from it.
func (s *Store) InterruptPendingFacets(ctx context.Context) ([]InterruptFacet, error) {
	rows, err := s.db.Query(ctx, `SELECT i.tool, r.action, count(*)::int AS n FROM interrupts i JOIN runs r ON r.id = i.run_id
		WHERE i.status = 'pending' GROUP BY i.tool, r.action ORDER BY i.tool, r.action`)
	if err != nil {
		return nil, fmt.Errorf("count pending interrupts: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[InterruptFacet])
	if err != nil {
		return nil, fmt.Errorf("count pending interrupts: %w", err)
	}
	return list, nil
}

// InterruptHistoryParams filters resolved interrupts. Zero values mean "no filter".
type InterruptHistoryParams struct {
	Tool   string
	Action string
	Status string // approved, edited, responded, denied or cancelled
	By     string // who resolved it
	Query  string // a substring of the comment, case-insensitive
	Limit  int
	Before *InterruptHistoryCursor
}

// InterruptHistoryCursor is a position in the newest-first history.
type InterruptHistoryCursor struct {
	ResolvedAt time.Time
	ID         uuid.UUID
}

// InterruptHistory returns resolved interrupts, most recently resolved first, with their run's
// action; p.Before continues after a previous page.
func (s *Store) InterruptHistory(ctx context.Context, p InterruptHistoryParams) ([]*InterruptWithAction, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = InterruptListLimit
	}
	limit = min(limit, InterruptListMax+1)
	var beforeAt *time.Time
	var beforeID uuid.UUID
	if p.Before != nil {
		beforeAt, beforeID = &p.Before.ResolvedAt, p.Before.ID
	}
	rows, err := s.db.Query(ctx, `SELECT `+qualifyColumns("i.", interruptColumns)+`, r.action FROM interrupts i JOIN runs r ON r.id = i.run_id
		WHERE i.status <> 'pending' AND ($1 = '' OR i.tool = $1) AND ($2 = '' OR r.action = $2) AND ($3 = '' OR i.status = $3)
			AND ($4 = '' OR i.resolved_by = $4) AND ($5 = '' OR strpos(lower(coalesce(i.comment, '')), lower($5)) > 0)
			AND ($7::timestamptz IS NULL OR (i.resolved_at, i.id) < ($7::timestamptz, $8::uuid))
		ORDER BY i.resolved_at DESC, i.id DESC LIMIT $6`, p.Tool, p.Action, p.Status, p.By, p.Query, limit, beforeAt, beforeID)
	if err != nil {
		return nil, fmt.Errorf("list resolved interrupts: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[InterruptWithAction])
	if err != nil {
		return nil, fmt.Errorf("list resolved interrupts: %w", err)
	}
	return list, nil
}
