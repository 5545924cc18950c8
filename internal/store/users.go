package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Roles, from least to most privileged.
const (
	RoleViewer   = "viewer"
	RoleReviewer = "reviewer"
	RoleAdmin    = "admin"
)

// ErrConflict is returned when a write collides with an existing row, such as a taken username.
var ErrConflict = errors.New("conflict")

// User is a person who signs in.
type User struct {
	ID           uuid.UUID `db:"id" json:"id"`
	Username     string    `db:"username" json:"username"`
	PasswordHash string    `db:"password_hash" json:"-"`
	Role         string    `db:"role" json:"role"`
	Disabled     bool      `db:"disabled" json:"disabled"`
	// Groups are the named groups the user belongs to, which a policy rule may require of the
	// reviewers who decide an interrupt.
	Groups    []string  `db:"groups" json:"groups"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
}

const userColumns = `id, username, password_hash, role, disabled, groups, created_at, updated_at`

// UserCreate inserts a user. A taken username is ErrConflict.
func (s *Store) UserCreate(ctx context.Context, username, passwordHash, role string) (*User, error) {
	rows, err := s.db.Query(ctx, `INSERT INTO users (username, password_hash, role) VALUES ($1, $2, $3)
		RETURNING `+userColumns, username, passwordHash, role)
	if err != nil {
		return nil, fmt.Errorf("create user %q: %w", username, err)
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[User])
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return nil, fmt.Errorf("create user %q: username taken: %w", username, ErrConflict)
		}
		return nil, fmt.Errorf("create user %q: %w", username, err)
	}
	return u, nil
}

// UserGetByUsername returns one user by name.
func (s *Store) UserGetByUsername(ctx context.Context, username string) (*User, error) {
	rows, err := s.db.Query(ctx, `SELECT `+userColumns+` FROM users WHERE username = $1`, username)
	if err != nil {
		return nil, fmt.Errorf("get user %q: %w", username, err)
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[User])
	if err != nil {
		return nil, fmt.Errorf("get user %q: %w", username, notFound(err))
	}
	return u, nil
}

// UserList returns every user, by name.
func (s *Store) UserList(ctx context.Context) ([]*User, error) {
	rows, err := s.db.Query(ctx, `SELECT `+userColumns+` FROM users ORDER BY username`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[User])
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return users, nil
}

// UserCount counts users, to know whether the first admin must be bootstrapped.
func (s *Store) UserCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// UserUpdateParams changes a user; nil fields stay as they are.
type UserUpdateParams struct {
	Role         *string
	Disabled     *bool
	PasswordHash *string
	Groups       *[]string
}

// UserUpdate changes a user's role, disabled flag or password. Disabling a user ends their sessions.
func (s *Store) UserUpdate(ctx context.Context, id uuid.UUID, p UserUpdateParams) (*User, error) {
	rows, err := s.db.Query(ctx, `UPDATE users SET
			role = coalesce($2, role),
			disabled = coalesce($3, disabled),
			password_hash = coalesce($4, password_hash),
			groups = coalesce($5, groups),
			updated_at = now()
		WHERE id = $1 RETURNING `+userColumns, id, p.Role, p.Disabled, p.PasswordHash, p.Groups)
	if err != nil {
		return nil, fmt.Errorf("update user %s: %w", id, err)
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[User])
	if err != nil {
		return nil, fmt.Errorf("update user %s: %w", id, notFound(err))
	}
	if u.Disabled {
		if _, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, id); err != nil {
			return nil, fmt.Errorf("end sessions of %s: %w", id, err)
		}
	}
	return u, nil
}

// SessionCreate stores a browser session under the hash of its cookie token.
func (s *Store) SessionCreate(ctx context.Context, tokenHash []byte, userID uuid.UUID, expires time.Time) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO sessions (token_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
		tokenHash, userID, expires); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// SessionUser returns the enabled user of a live session and extends it.
func (s *Store) SessionUser(ctx context.Context, tokenHash []byte, extendTo time.Time) (*User, error) {
	rows, err := s.db.Query(ctx, `UPDATE sessions SET last_seen_at = now(), expires_at = greatest(expires_at, $2)
		FROM users u
		WHERE sessions.token_hash = $1 AND sessions.expires_at > now() AND u.id = sessions.user_id AND NOT u.disabled
		RETURNING u.id, u.username, u.password_hash, u.role, u.disabled, u.groups, u.created_at, u.updated_at`, tokenHash, extendTo)
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[User])
	if err != nil {
		return nil, fmt.Errorf("get session: %w", notFound(err))
	}
	return u, nil
}

// SessionDelete ends a session.
func (s *Store) SessionDelete(ctx context.Context, tokenHash []byte) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// APITokenCreate stores a bearer token for a user under its hash.
func (s *Store) APITokenCreate(ctx context.Context, userID uuid.UUID, name string, tokenHash []byte) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO api_tokens (user_id, name, token_hash) VALUES ($1, $2, $3)`,
		userID, name, tokenHash); err != nil {
		return fmt.Errorf("create api token: %w", err)
	}
	return nil
}

// APITokenUser returns the enabled user who owns a bearer token.
func (s *Store) APITokenUser(ctx context.Context, tokenHash []byte) (*User, error) {
	rows, err := s.db.Query(ctx, `UPDATE api_tokens SET last_used_at = now() FROM users u
		WHERE api_tokens.token_hash = $1 AND u.id = api_tokens.user_id AND NOT u.disabled
		RETURNING u.id, u.username, u.password_hash, u.role, u.disabled, u.groups, u.created_at, u.updated_at`, tokenHash)
	if err != nil {
		return nil, fmt.Errorf("get api token: %w", err)
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[User])
	if err != nil {
		return nil, fmt.Errorf("get api token: %w", notFound(err))
	}
	return u, nil
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID          int64           `db:"id" json:"id"`
	At          time.Time       `db:"at" json:"at"`
	Actor       string          `db:"actor" json:"actor"`
	Action      string          `db:"action" json:"action"`
	SubjectType string          `db:"subject_type" json:"subject_type"`
	SubjectID   string          `db:"subject_id" json:"subject_id"`
	Details     json.RawMessage `db:"details" json:"details"`
}

// AuditInsert appends to the audit log. details is marshalled to JSON.
func (s *Store) AuditInsert(ctx context.Context, actor, action, subjectType, subjectID string, details any) error {
	raw, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	if details == nil {
		raw = []byte("{}")
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO audit_log (actor, action, subject_type, subject_id, details)
		VALUES ($1, $2, $3, $4, $5)`, actor, action, subjectType, subjectID, raw); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// AuditList returns the audit entries of one subject, oldest first.
func (s *Store) AuditList(ctx context.Context, subjectType, subjectID string) ([]*AuditEntry, error) {
	rows, err := s.db.Query(ctx, `SELECT id, at, actor, action, subject_type, subject_id, details FROM audit_log
		WHERE subject_type = $1 AND subject_id = $2 ORDER BY at, id`, subjectType, subjectID)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	entries, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[AuditEntry])
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return entries, nil
}

// AuditListByInterrupts returns the audit entries of several interrupts in one query, keyed by
// interrupt, each oldest first as AuditList orders them. An interrupt without entries has no key.
func (s *Store) AuditListByInterrupts(ctx context.Context, interruptIDs []uuid.UUID) (map[uuid.UUID][]*AuditEntry, error) {
	out := make(map[uuid.UUID][]*AuditEntry, len(interruptIDs))
	if len(interruptIDs) == 0 {
		return out, nil
	}
	// subject_id is text, so the keys are matched as written, the way AuditList matches them.
	byText := make(map[string]uuid.UUID, len(interruptIDs))
	subjects := make([]string, 0, len(interruptIDs))
	for _, id := range interruptIDs {
		byText[id.String()] = id
		subjects = append(subjects, id.String())
	}
	rows, err := s.db.Query(ctx, `SELECT id, at, actor, action, subject_type, subject_id, details FROM audit_log
		WHERE subject_type = 'interrupt' AND subject_id = ANY($1) ORDER BY at, id`, subjects)
	if err != nil {
		return nil, fmt.Errorf("list audit of %d interrupts: %w", len(interruptIDs), err)
	}
	entries, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[AuditEntry])
	if err != nil {
		return nil, fmt.Errorf("list audit of %d interrupts: %w", len(interruptIDs), err)
	}
	for _, e := range entries {
		id := byText[e.SubjectID]
		out[id] = append(out[id], e)
	}
	return out, nil
}

// SessionDeleteOthers ends every session of a user except the one whose token hashes to keep
// (nil keeps none): after a password change, whoever knew the old one is signed out.
func (s *Store) SessionDeleteOthers(ctx context.Context, userID uuid.UUID, keep []byte) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1 AND ($2::bytea IS NULL OR token_hash <> $2)`, userID, keep); err != nil {
		return fmt.Errorf("end sessions of %s: %w", userID, err)
	}
	return nil
}
