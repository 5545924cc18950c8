package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Interrupt statuses, as in DESIGN.md's contract.
const (
	InterruptPending   = "pending"
	InterruptApproved  = "approved"
	InterruptEdited    = "edited"
	InterruptResponded = "responded"
	InterruptDenied    = "denied"
	InterruptCancelled = "cancelled"
)

// InterruptStatuses lists every interrupt status.
var InterruptStatuses = []string{InterruptPending, InterruptApproved, InterruptEdited, InterruptResponded,
	InterruptDenied, InterruptCancelled}

// Interrupt is one tool request that stopped to ask a person.
type Interrupt struct {
	ID           uuid.UUID       `db:"id" json:"id"`
	RunID        uuid.UUID       `db:"run_id" json:"run_id"`
	Turn         int             `db:"turn" json:"turn"`
	Tool         string          `db:"tool" json:"tool"`
	Ref          string          `db:"ref" json:"ref"`
	Input        json.RawMessage `db:"input" json:"input"`
	Metadata     json.RawMessage `db:"metadata" json:"metadata"`
	InputSchema  json.RawMessage `db:"input_schema" json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `db:"output_schema" json:"output_schema,omitempty"`
	Status       string          `db:"status" json:"status"`
	Resolution   json.RawMessage `db:"resolution" json:"resolution,omitempty"`
	ResolvedBy   *string         `db:"resolved_by" json:"resolved_by,omitempty"`
	ResolvedAt   *time.Time      `db:"resolved_at" json:"resolved_at,omitempty"`
	Comment      *string         `db:"comment" json:"comment,omitempty"`
	Round        int             `db:"round" json:"round"`
	CreatedAt    time.Time       `db:"created_at" json:"created_at"`
	Version      int64           `db:"version" json:"version"`
	// SuggestedResolution is the decision a replay offers as the default: the one a reviewer took
	// on the same interrupt of the original run. Only a replay with apply_resolutions applies it.
	SuggestedResolution json.RawMessage `db:"suggested_resolution" json:"suggested_resolution,omitempty"`
	// ClaimedBy is the reviewer working on a pending interrupt (claimed, or assigned by another),
	// since ClaimedAt; nobody else may resolve it from the inbox meanwhile.
	ClaimedBy *string    `db:"claimed_by" json:"claimed_by,omitempty"`
	ClaimedAt *time.Time `db:"claimed_at" json:"claimed_at,omitempty"`
	// Policy is the policy rule that decided the interrupt, or that gated its tool and left the
	// decision to a person: {"rule", "version", "decision", "reason"}.
	Policy json.RawMessage `db:"policy" json:"policy,omitempty"`
	// ExpiresAt is when the policy's deadline denies the interrupt if nobody decided it.
	ExpiresAt *time.Time `db:"expires_at" json:"expires_at,omitempty"`
}

// InterruptWithAction is an interrupt with its run's action, so that a list can show and filter
// by action without a query per run. The action stays out of the interrupt's JSON.
type InterruptWithAction struct {
	Interrupt
	Action string `db:"action" json:"-"`
}

const interruptColumns = `id, run_id, turn, tool, ref, input, metadata, input_schema, output_schema,
	status, resolution, resolved_by, resolved_at, comment, round, created_at, version, suggested_resolution, claimed_by, claimed_at, policy, expires_at`

// InterruptListPending returns pending interrupts, oldest first.
func (s *Store) InterruptListPending(ctx context.Context, limit int) ([]*Interrupt, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.Query(ctx, `SELECT `+interruptColumns+` FROM interrupts
		WHERE status = 'pending' ORDER BY created_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list pending interrupts: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err != nil {
		return nil, fmt.Errorf("list pending interrupts: %w", err)
	}
	return list, nil
}

// InterruptCountPending counts the interrupts waiting for a reviewer.
func (s *Store) InterruptCountPending(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM interrupts WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending interrupts: %w", err)
	}
	return n, nil
}

// InterruptCreateParams describes one interrupted tool request.
type InterruptCreateParams struct {
	RunID        uuid.UUID
	Turn         int
	Round        int
	Tool         string
	Ref          string
	Input        json.RawMessage
	Metadata     json.RawMessage
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
}

// InterruptCreate stores pending interrupts. Storing the same (run, turn, ref, round) twice keeps
// the first, so a recovered execution that interrupts again does not duplicate them.
func (s *Store) InterruptCreate(ctx context.Context, list []InterruptCreateParams) ([]*Interrupt, error) {
	batch := &pgx.Batch{}
	for _, p := range list {
		md := p.Metadata
		if len(md) == 0 {
			md = json.RawMessage("true")
		}
		batch.Queue(`INSERT INTO interrupts (id, run_id, turn, round, tool, ref, input, metadata, input_schema, output_schema)
			VALUES ($10, $1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (run_id, turn, ref, round) DO UPDATE SET tool = interrupts.tool
			RETURNING `+interruptColumns,
			p.RunID, p.Turn, p.Round, p.Tool, p.Ref, CleanJSON(p.Input), CleanJSON(md), nullJSON(p.InputSchema), nullJSON(p.OutputSchema), NewID())
	}
	br := s.db.SendBatch(ctx, batch)
	defer br.Close()
	out := make([]*Interrupt, 0, len(list))
	for range list {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("create interrupt: %w", err)
		}
		i, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Interrupt])
		if err != nil {
			return nil, fmt.Errorf("create interrupt: %w", err)
		}
		out = append(out, i)
	}
	return out, br.Close()
}

// InterruptGet returns one interrupt. With lock, the row is locked until the transaction ends.
func (s *Store) InterruptGet(ctx context.Context, id uuid.UUID, lock bool) (*Interrupt, error) {
	sql := `SELECT ` + interruptColumns + ` FROM interrupts WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	rows, err := s.db.Query(ctx, sql, id)
	if err != nil {
		return nil, fmt.Errorf("get interrupt %s: %w", id, err)
	}
	i, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err != nil {
		return nil, fmt.Errorf("get interrupt %s: %w", id, notFound(err))
	}
	return i, nil
}

// InterruptListByRun returns a run's interrupts in the order they happened.
func (s *Store) InterruptListByRun(ctx context.Context, runID uuid.UUID) ([]*Interrupt, error) {
	rows, err := s.db.Query(ctx, `SELECT `+interruptColumns+` FROM interrupts WHERE run_id = $1 ORDER BY turn, round, created_at, ref`, runID)
	if err != nil {
		return nil, fmt.Errorf("list interrupts of run %s: %w", runID, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err != nil {
		return nil, fmt.Errorf("list interrupts of run %s: %w", runID, err)
	}
	return list, nil
}

// InterruptListParams filters the interrupt list. Zero values mean "no filter".
type InterruptListParams struct {
	Status string
	Tool   string
	Action string
	// For, when set, keeps the interrupts that reviewer may decide now ("for me"): the role and
	// group the policy rule that routed it requires (an admin may decide any), not claimed by
	// another, and not approved by them already (a rule needing several approvals).
	For   *Decider
	Limit int              // default InterruptListLimit, at most InterruptListMax+1 (a page and one to look ahead)
	After *InterruptCursor // the last interrupt of the previous page
}

// Decider is a reviewer, as the inbox's "for me" filter sees them.
type Decider struct {
	Username string
	Role     string
	Groups   []string
}

// InterruptCursor is a position in the oldest-first interrupt list.
type InterruptCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// InterruptListLimit is the default and InterruptListMax the largest page callers ask for.
const (
	InterruptListLimit = 100
	InterruptListMax   = 500
)

// InterruptList returns interrupts oldest first, with their run's action, in one query; p.After
// continues after a previous page.
func (s *Store) InterruptList(ctx context.Context, p InterruptListParams) ([]*InterruptWithAction, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = InterruptListLimit
	}
	limit = min(limit, InterruptListMax+1)
	var afterAt *time.Time
	var afterID uuid.UUID
	if p.After != nil {
		afterAt, afterID = &p.After.CreatedAt, p.After.ID
	}
	status := `($1 = '' OR i.status = $1)`
	if p.Status == InterruptPending {
		// Spelled out, so that the planner walks the pending index in order and stops at the
		// limit, whatever plan it caches for the statement.
		status = `(i.status = 'pending' AND $1 = 'pending')`
	}
	var forUser, forRole *string
	forGroups := []string{}
	if p.For != nil {
		forUser, forRole = &p.For.Username, &p.For.Role
		if p.For.Groups != nil {
			forGroups = p.For.Groups
		}
	}
	rows, err := s.db.Query(ctx, `SELECT `+qualifyColumns("i.", interruptColumns)+`, r.action FROM interrupts i JOIN runs r ON r.id = i.run_id
		WHERE `+status+` AND ($2 = '' OR i.tool = $2) AND ($3 = '' OR r.action = $3)
			AND ($5::timestamptz IS NULL OR (i.created_at, i.id) > ($5::timestamptz, $6::uuid))
			AND ($7::text IS NULL OR (
				$8::text IN ('reviewer', 'admin')
				AND ($8 = 'admin' OR ((i.policy->>'role' IS NULL OR i.policy->>'role' <> 'admin')
					AND (i.policy->>'group' IS NULL OR i.policy->>'group' = ANY($9::text[]))))
				AND (i.claimed_by IS NULL OR i.claimed_by = $7)
				AND NOT EXISTS (SELECT 1 FROM interrupt_approvals a WHERE a.interrupt_id = i.id AND a.actor = $7)))
		ORDER BY i.created_at, i.id LIMIT $4`, p.Status, p.Tool, p.Action, limit, afterAt, afterID, forUser, forRole, forGroups)
	if err != nil {
		return nil, fmt.Errorf("list interrupts: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[InterruptWithAction])
	if err != nil {
		return nil, fmt.Errorf("list interrupts: %w", err)
	}
	return list, nil
}

// InterruptResolveParams records a reviewer's decision.
type InterruptResolveParams struct {
	ID         uuid.UUID
	Status     string // approved, edited, responded or denied
	Resolution json.RawMessage
	ResolvedBy string
	Comment    string
}

// InterruptResolve records a decision on a pending interrupt. Call it in a transaction after
// InterruptGet with lock, which is where version and status are checked.
func (s *Store) InterruptResolve(ctx context.Context, p InterruptResolveParams) (*Interrupt, error) {
	rows, err := s.db.Query(ctx, `UPDATE interrupts SET status = $2, resolution = $3, resolved_by = $4,
			comment = NULLIF($5, ''), resolved_at = now(), version = version + 1
		WHERE id = $1 AND status = 'pending' RETURNING `+interruptColumns,
		p.ID, p.Status, p.Resolution, p.ResolvedBy, p.Comment)
	if err != nil {
		return nil, fmt.Errorf("resolve interrupt %s: %w", p.ID, err)
	}
	i, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err != nil {
		return nil, fmt.Errorf("resolve interrupt %s: %w", p.ID, notFound(err))
	}
	return i, nil
}

// InterruptCountPendingByRun counts a run's interrupts that still wait for a decision.
func (s *Store) InterruptCountPendingByRun(ctx context.Context, runID uuid.UUID) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM interrupts WHERE run_id = $1 AND status = 'pending'`, runID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending interrupts of run %s: %w", runID, err)
	}
	return n, nil
}

// InterruptCountPendingByRuns counts the pending interrupts of each of the runs, for the runs that
// have any.
func (s *Store) InterruptCountPendingByRuns(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID]int, error) {
	out := map[uuid.UUID]int{}
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `SELECT run_id, count(*)::int FROM interrupts WHERE run_id = ANY($1) AND status = 'pending'
		GROUP BY run_id`, runIDs)
	if err != nil {
		return nil, fmt.Errorf("count pending interrupts of %d runs: %w", len(runIDs), err)
	}
	type count struct {
		RunID uuid.UUID
		N     int
	}
	counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
	if err != nil {
		return nil, fmt.Errorf("count pending interrupts of %d runs: %w", len(runIDs), err)
	}
	for _, c := range counts {
		out[c.RunID] = c.N
	}
	return out, nil
}

// InterruptCancelPending cancels a run's pending interrupts.
func (s *Store) InterruptCancelPending(ctx context.Context, runID uuid.UUID, by string) (int64, error) {
	tag, err := s.db.Exec(ctx, `UPDATE interrupts SET status = 'cancelled', resolved_at = now(), resolved_by = $2,
		version = version + 1 WHERE run_id = $1 AND status = 'pending'`, runID, by)
	if err != nil {
		return 0, fmt.Errorf("cancel interrupts of run %s: %w", runID, err)
	}
	return tag.RowsAffected(), nil
}

// qualifyColumns qualifies a column list with a table alias.
func qualifyColumns(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = alias + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}
