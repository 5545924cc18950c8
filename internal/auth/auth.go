// Package auth is Loupe's identity: password hashing, session and API tokens, roles, and the
// bootstrap of the first admin. Only hashes of tokens are ever stored, and no secret is logged.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/store"
)

// tokenPrefix marks API tokens so that secret scanners can recognise them.
const tokenPrefix = "loupe_"

// SessionTTL is how long a browser session lives without being used.
const SessionTTL = 14 * 24 * time.Hour

// ErrBadCredentials is returned for a wrong username or password, without saying which.
var ErrBadCredentials = errors.New("wrong username or password")

var rank = map[string]int{store.RoleViewer: 1, store.RoleReviewer: 2, store.RoleAdmin: 3}

// ValidRole reports whether role is one of viewer, reviewer, admin.
func ValidRole(role string) bool { return rank[role] > 0 }

// Allows reports whether a user with role has at least the privileges of need.
func Allows(role, need string) bool { return rank[role] >= rank[need] && rank[need] > 0 }

// ParseGroups reads a comma-separated list of group names (what a policy rule's group: names),
// trimmed, without duplicates, in order; an empty list is none.
func ParseGroups(list string) ([]string, error) {
	out := []string{}
	for _, g := range strings.Split(list, ",") {
		g = strings.TrimSpace(g)
		if g == "" || slices.Contains(out, g) {
			continue
		}
		if !policy.GroupName.MatchString(g) {
			return nil, fmt.Errorf("group %q: a group's name is 1 to 64 letters, digits, '.', '_' or '-'", g)
		}
		out = append(out, g)
	}
	return out, nil
}

var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// HashPassword hashes a password with bcrypt.
func HashPassword(password string) (string, error) {
	if len(password) < 8 {
		return "", errors.New("password must have at least 8 characters")
	}
	if len(password) > 72 {
		return "", errors.New("password must have at most 72 bytes")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// NewToken returns a random token for a cookie or a bearer header, and the hash to store.
func NewToken() (token string, hash []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken is the stored form of a token.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// NewPassword returns a random password for a bootstrapped or generated account.
func NewPassword() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Service signs users in and out and manages accounts.
type Service struct {
	store *store.Store
}

// New returns an auth service over the store.
func New(st *store.Store) *Service { return &Service{store: st} }

// AddUser creates a user with a role and a password.
func (s *Service) AddUser(ctx context.Context, username, password, role string) (*store.User, error) {
	if !usernamePattern.MatchString(username) {
		return nil, fmt.Errorf("username %q: use 1 to 64 letters, digits, '.', '_', '@' or '-'", username)
	}
	if !ValidRole(role) {
		return nil, fmt.Errorf("role %q: want viewer, reviewer or admin", role)
	}
	hash, err := HashPassword(password)
	if err != nil {
		return nil, err
	}
	return s.store.UserCreate(ctx, username, hash, role)
}

// SignIn checks a password and opens a session. It returns the cookie token.
func (s *Service) SignIn(ctx context.Context, username, password string) (string, *store.User, error) {
	u, err := s.store.UserGetByUsername(ctx, username)
	if errors.Is(err, store.ErrNotFound) {
		// Spend the same time as a real check so that timing does not reveal usernames.
		_ = bcrypt.CompareHashAndPassword([]byte("$2a$10$7EqJtq98hPqEX7fNZaFWoOhi5BWX4Z0eP6xk0QJ2xw0nB5V1mU9bK"), []byte(password))
		return "", nil, ErrBadCredentials
	}
	if err != nil {
		return "", nil, err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil || u.Disabled {
		return "", nil, ErrBadCredentials
	}
	token, hash := NewToken()
	if err := s.store.SessionCreate(ctx, hash, u.ID, time.Now().Add(SessionTTL)); err != nil {
		return "", nil, err
	}
	return token, u, nil
}

// ChangePassword is a user changing their own password: the current one must match. Their
// other sessions end; the one with token keepSession ("" for none) stays signed in.
func (s *Service) ChangePassword(ctx context.Context, username, current, next, keepSession string) error {
	u, err := s.store.UserGetByUsername(ctx, username)
	if err != nil {
		return err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(current)) != nil {
		return ErrBadCredentials
	}
	var keep []byte
	if keepSession != "" {
		keep = HashToken(keepSession)
	}
	return s.setPassword(ctx, u, next, keep)
}

// SetPassword replaces a user's password without the current one (an admin's reset, or
// devui user passwd on the server's database) and ends all their sessions.
func (s *Service) SetPassword(ctx context.Context, username, password string) error {
	u, err := s.store.UserGetByUsername(ctx, username)
	if err != nil {
		return err
	}
	return s.setPassword(ctx, u, password, nil)
}

func (s *Service) setPassword(ctx context.Context, u *store.User, password string, keep []byte) error {
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	return s.store.WithTx(ctx, func(tx *store.Store) error {
		if _, err := tx.UserUpdate(ctx, u.ID, store.UserUpdateParams{PasswordHash: &hash}); err != nil {
			return err
		}
		return tx.SessionDeleteOthers(ctx, u.ID, keep)
	})
}

// SignOut ends the session of a cookie token.
func (s *Service) SignOut(ctx context.Context, token string) error {
	return s.store.SessionDelete(ctx, HashToken(token))
}

// SessionUser returns the user of a session cookie token, extending the session.
func (s *Service) SessionUser(ctx context.Context, token string) (*store.User, error) {
	return s.store.SessionUser(ctx, HashToken(token), time.Now().Add(SessionTTL))
}

// TokenUser returns the user of a bearer token.
func (s *Service) TokenUser(ctx context.Context, token string) (*store.User, error) {
	return s.store.APITokenUser(ctx, HashToken(strings.TrimPrefix(token, tokenPrefix)))
}

// CreateToken issues a named API token for a user and returns it; only its hash is kept.
func (s *Service) CreateToken(ctx context.Context, username, name string) (string, error) {
	u, err := s.store.UserGetByUsername(ctx, username)
	if err != nil {
		return "", err
	}
	token, hash := NewToken()
	if err := s.store.APITokenCreate(ctx, u.ID, name, hash); err != nil {
		return "", err
	}
	return tokenPrefix + token, nil
}

// Bootstrap creates the first admin when there are no users, and writes its password to a file
// readable only by this user in dataDir, so that it never appears in a log. It returns the file's
// path, or "" when users already exist.
func (s *Service) Bootstrap(ctx context.Context, dataDir string) (string, error) {
	n, err := s.store.UserCount(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	password := NewPassword()
	if _, err := s.AddUser(ctx, "admin", password, store.RoleAdmin); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return "", nil // another instance bootstrapped at the same moment
		}
		return "", err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("bootstrap admin: %w", err)
	}
	path := filepath.Join(dataDir, "admin-password")
	if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("bootstrap admin: %w", err)
	}
	return path, nil
}
