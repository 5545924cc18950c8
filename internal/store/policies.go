package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Policy is one stored version of the approval policy (internal/policy).
type Policy struct {
	Version   int64     `db:"version" json:"version"`
	Source    string    `db:"source" json:"source"`
	Origin    string    `db:"origin" json:"origin"`
	CreatedBy string    `db:"created_by" json:"created_by"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

const policyColumns = `version, source, origin, created_by, created_at`

// PolicyInForce returns the version in force (policy_in_force). ErrNotFound when none is.
func (s *Store) PolicyInForce(ctx context.Context) (*Policy, error) {
	rows, err := s.db.Query(ctx, `SELECT `+qualifyColumns("p.", policyColumns)+` FROM policy_in_force f JOIN policies p USING (version)`)
	if err != nil {
		return nil, fmt.Errorf("policy in force: %w", err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Policy])
	if err != nil {
		return nil, fmt.Errorf("policy in force: %w", notFound(err))
	}
	return p, nil
}

// PolicyInForceVersion returns the number of the version in force, 0 when none is: a cheap check
// of whether a compiled policy is still the one in force.
func (s *Store) PolicyInForceVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.db.QueryRow(ctx, `SELECT coalesce((SELECT version FROM policy_in_force), 0)`).Scan(&v); err != nil {
		return 0, fmt.Errorf("policy version in force: %w", err)
	}
	return v, nil
}

// PolicyGet returns a stored version. ErrNotFound when there is no such version.
func (s *Store) PolicyGet(ctx context.Context, version int64) (*Policy, error) {
	rows, err := s.db.Query(ctx, `SELECT `+policyColumns+` FROM policies WHERE version = $1`, version)
	if err != nil {
		return nil, fmt.Errorf("get policy version %d: %w", version, err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Policy])
	if err != nil {
		return nil, fmt.Errorf("get policy version %d: %w", version, notFound(err))
	}
	return p, nil
}

// PolicySaveParams is a new version of the policy.
type PolicySaveParams struct {
	Source    string
	Origin    string
	CreatedBy string
	// Draft stores the version without putting it in force (PolicyActivate does, later).
	Draft bool
}

// PolicySave stores the source as a new version and puts it in force, unless the version in
// force has this source already: then it returns that version and false. A draft is stored beside
// the version in force, unless the newest version has its source already (returned, with false).
// Concurrent saves are serialised (two servers loading one file at start store one version).
func (s *Store) PolicySave(ctx context.Context, p PolicySaveParams) (*Policy, bool, error) {
	var out *Policy
	created := false
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('loupe.policies'))`); err != nil {
			return fmt.Errorf("save policy: %w", err)
		}
		same, err := tx.PolicyInForce(ctx)
		if p.Draft {
			same, err = tx.policyNewest(ctx)
		}
		switch {
		case err == nil && same.Source == p.Source:
			out = same
			return nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
		rows, err := tx.db.Query(ctx, `INSERT INTO policies (source, origin, created_by) VALUES ($1, $2, $3)
			RETURNING `+policyColumns, p.Source, p.Origin, p.CreatedBy)
		if err != nil {
			return fmt.Errorf("save policy: %w", err)
		}
		out, err = pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Policy])
		if err != nil {
			return fmt.Errorf("save policy: %w", err)
		}
		created = true
		if p.Draft {
			return tx.AuditInsert(ctx, p.CreatedBy, "policy.draft", "policy", fmt.Sprint(out.Version), map[string]any{"origin": p.Origin})
		}
		if err := tx.policySetInForce(ctx, out.Version, p.CreatedBy); err != nil {
			return err
		}
		return tx.AuditInsert(ctx, p.CreatedBy, "policy.save", "policy", fmt.Sprint(out.Version), map[string]any{"origin": p.Origin})
	})
	return out, created, err
}

// PolicyActivate puts a stored version in force; changed is false when it was in force already.
// ErrNotFound when there is no such version.
func (s *Store) PolicyActivate(ctx context.Context, version int64, by string) (p *Policy, changed bool, err error) {
	err = s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('loupe.policies'))`); err != nil {
			return fmt.Errorf("activate policy version %d: %w", version, err)
		}
		if p, err = tx.PolicyGet(ctx, version); err != nil {
			return err
		}
		cur, err := tx.PolicyInForceVersion(ctx)
		if err != nil || cur == version {
			return err
		}
		if err := tx.policySetInForce(ctx, version, by); err != nil {
			return err
		}
		changed = true
		return tx.AuditInsert(ctx, by, "policy.activate", "policy", fmt.Sprint(version), map[string]any{"replaced": cur})
	})
	return p, changed, err
}

func (s *Store) policySetInForce(ctx context.Context, version int64, by string) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO policy_in_force (version, set_by) VALUES ($1, $2)
		ON CONFLICT (singleton) DO UPDATE SET version = excluded.version, set_by = excluded.set_by, since = now()`, version, by); err != nil {
		return fmt.Errorf("put policy version %d in force: %w", version, err)
	}
	return nil
}

// policyNewest returns the newest stored version, in force or not.
func (s *Store) policyNewest(ctx context.Context) (*Policy, error) {
	rows, err := s.db.Query(ctx, `SELECT `+policyColumns+` FROM policies ORDER BY version DESC LIMIT 1`)
	if err != nil {
		return nil, fmt.Errorf("newest policy: %w", err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Policy])
	if err != nil {
		return nil, fmt.Errorf("newest policy: %w", notFound(err))
	}
	return p, nil
}

// PolicyList returns the stored versions, newest first, without their sources.
func (s *Store) PolicyList(ctx context.Context, limit int) ([]*Policy, error) {
	rows, err := s.db.Query(ctx, `SELECT version, '' AS source, origin, created_by, created_at FROM policies
		ORDER BY version DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Policy])
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	return out, nil
}

// InterruptSetPolicy records the rule that decided or routed an interrupt.
func (s *Store) InterruptSetPolicy(ctx context.Context, id uuid.UUID, policy json.RawMessage) error {
	if _, err := s.db.Exec(ctx, `UPDATE interrupts SET policy = $2 WHERE id = $1`, id, policy); err != nil {
		return fmt.Errorf("record the policy of interrupt %s: %w", id, err)
	}
	return nil
}

// InterruptCase is a stored interrupt with what a policy looks at: its run's action, input and
// labels.
type InterruptCase struct {
	Interrupt
	Action   string            `db:"action"`
	RunInput json.RawMessage   `db:"run_input"`
	Labels   map[string]string `db:"labels"`
}

// InterruptListRecent returns the newest interrupts, with their runs' action, input and labels,
// for a what-if of a draft policy.
func (s *Store) InterruptListRecent(ctx context.Context, limit int) ([]*InterruptCase, error) {
	rows, err := s.db.Query(ctx, `SELECT `+qualifyColumns("i.", interruptColumns)+`, r.action, r.input AS run_input,
			coalesce(r.labels, '{}') AS labels
		FROM interrupts i JOIN runs r ON r.id = i.run_id
		ORDER BY i.created_at DESC, i.id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list recent interrupts: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[InterruptCase])
	if err != nil {
		return nil, fmt.Errorf("list recent interrupts: %w", err)
	}
	return out, nil
}

// InterruptApproval is one reviewer's approval of an interrupt that needs several.
type InterruptApproval struct {
	Actor     string    `db:"actor" json:"actor"`
	Comment   *string   `db:"comment" json:"comment,omitempty"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// InterruptApprove records actor's approval of an interrupt that needs several, and returns its
// approvals so far, oldest first; added is false when actor had approved it already. Call it in
// the transaction that locked the interrupt.
func (s *Store) InterruptApprove(ctx context.Context, id uuid.UUID, actor, comment string) (list []*InterruptApproval, added bool, err error) {
	tag, err := s.db.Exec(ctx, `INSERT INTO interrupt_approvals (interrupt_id, actor, comment) VALUES ($1, $2, NULLIF($3, ''))
		ON CONFLICT DO NOTHING`, id, actor, comment)
	if err != nil {
		return nil, false, fmt.Errorf("record an approval of interrupt %s: %w", id, err)
	}
	if list, err = s.InterruptApprovals(ctx, id); err != nil {
		return nil, false, err
	}
	return list, tag.RowsAffected() == 1, nil
}

// InterruptApprovals returns an interrupt's approvals so far, oldest first.
func (s *Store) InterruptApprovals(ctx context.Context, id uuid.UUID) ([]*InterruptApproval, error) {
	rows, err := s.db.Query(ctx, `SELECT actor, comment, created_at FROM interrupt_approvals WHERE interrupt_id = $1
		ORDER BY created_at, actor`, id)
	if err != nil {
		return nil, fmt.Errorf("approvals of interrupt %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[InterruptApproval])
	if err != nil {
		return nil, fmt.Errorf("approvals of interrupt %s: %w", id, err)
	}
	return out, nil
}

// InterruptTouch bumps a pending interrupt's version: something about it changed (an approval of
// several was recorded) that a reviewer's open form must learn.
func (s *Store) InterruptTouch(ctx context.Context, id uuid.UUID) (*Interrupt, error) {
	rows, err := s.db.Query(ctx, `UPDATE interrupts SET version = version + 1 WHERE id = $1 AND status = 'pending'
		RETURNING `+interruptColumns, id)
	if err != nil {
		return nil, fmt.Errorf("touch interrupt %s: %w", id, err)
	}
	i, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err != nil {
		return nil, fmt.Errorf("touch interrupt %s: %w", id, notFound(err))
	}
	return i, nil
}

// InterruptSetExpiry gives a pending interrupt a deadline, after from now.
func (s *Store) InterruptSetExpiry(ctx context.Context, id uuid.UUID, after time.Duration) error {
	if _, err := s.db.Exec(ctx, `UPDATE interrupts SET expires_at = now() + $2::interval WHERE id = $1 AND status = 'pending'`, id, after); err != nil {
		return fmt.Errorf("set the deadline of interrupt %s: %w", id, err)
	}
	return nil
}

// InterruptListExpired returns pending interrupts whose deadline has passed, oldest deadline first.
func (s *Store) InterruptListExpired(ctx context.Context, limit int) ([]*Interrupt, error) {
	rows, err := s.db.Query(ctx, `SELECT `+interruptColumns+` FROM interrupts
		WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= now() ORDER BY expires_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list expired interrupts: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Interrupt])
	if err != nil {
		return nil, fmt.Errorf("list expired interrupts: %w", err)
	}
	return out, nil
}
