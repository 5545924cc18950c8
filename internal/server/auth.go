package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// sessionCookie holds the browser session token.
const sessionCookie = "loupe_session"

// Principal is who makes a request.
type Principal struct {
	Username string
	Role     string
	// Groups are the user's groups, which a policy rule may require of an interrupt's deciders.
	Groups []string
	// Local is true in local mode, where nobody signs in.
	Local bool
}

// decider is the principal as an interrupt's decider: their role and groups, which the policy
// rule that routed an interrupt may require.
func decider(c echo.Context) *policy.Decider {
	p := principal(c)
	if p == nil {
		return &policy.Decider{}
	}
	return &policy.Decider{Role: p.Role, Groups: p.Groups}
}

// principal returns the request's principal; authenticate always sets one on protected routes.
func principal(c echo.Context) *Principal {
	p, _ := c.Get("principal").(*Principal)
	return p
}

// bearerToken is the token of an "Authorization: Bearer <token>" header; the scheme is
// case-insensitive (RFC 9110).
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate identifies the caller: everyone is the local admin in local mode; otherwise a bearer
// token or a session cookie is required. API clients get 401; browsers are sent to sign in.
func (s *Server) authenticate() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if s.cfg.Dev {
				c.Set("principal", &Principal{Username: "local", Role: store.RoleAdmin, Local: true})
				return next(c)
			}
			ctx := c.Request().Context()
			if token, ok := bearerToken(c.Request()); ok {
				u, err := s.auth.TokenUser(ctx, token)
				if errors.Is(err, store.ErrNotFound) && s.ruleOf(c).access == accessTelemetry {
					return next(c) // not a user's token: the handler checks LOUPE_INGEST_TOKEN
				}
				if errors.Is(err, store.ErrNotFound) {
					return Errorf(http.StatusUnauthorized, "unauthenticated", "the bearer token is unknown or its user is disabled")
				}
				if err != nil {
					return err
				}
				c.Set("principal", &Principal{Username: u.Username, Role: u.Role, Groups: u.Groups})
				return next(c)
			}
			if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
				u, err := s.auth.SessionUser(ctx, ck.Value)
				if err == nil {
					c.Set("principal", &Principal{Username: u.Username, Role: u.Role, Groups: u.Groups})
					return next(c)
				}
				if !errors.Is(err, store.ErrNotFound) {
					return err
				}
			}
			if a := s.ruleOf(c).access; a == accessPublic || a == accessTelemetry {
				return next(c)
			}
			if wantsJSON(c) || c.Request().Method != http.MethodGet {
				return Errorf(http.StatusUnauthorized, "unauthenticated", "sign in first: send Authorization: Bearer <token> (create one with: devui user token <username>)")
			}
			return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
		}
	}
}

// requireRole refuses callers below a role with 403.
func requireRole(role string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := principal(c)
			if p == nil || !auth.Allows(p.Role, role) {
				return Errorf(http.StatusForbidden, "forbidden", "this needs the %s role", role)
			}
			return next(c)
		}
	}
}

func (s *Server) loginPage(c echo.Context) error {
	return s.render(c, http.StatusOK, templates.LoginPage(templates.Login{
		Page: s.page(c, "Sign in", ""),
		Next: safeNext(c.QueryParam("next")),
	}))
}

func (s *Server) login(c echo.Context) error {
	username, password := c.FormValue("username"), c.FormValue("password")
	next := safeNext(c.FormValue("next"))
	token, _, err := s.auth.SignIn(c.Request().Context(), username, password)
	if errors.Is(err, auth.ErrBadCredentials) {
		return s.render(c, http.StatusUnauthorized, templates.LoginPage(templates.Login{
			Page: s.page(c, "Sign in", ""), Next: next, Username: username, Error: err.Error(),
		}))
	}
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name: sessionCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: c.Scheme() == "https", Expires: time.Now().Add(auth.SessionTTL),
	})
	return c.Redirect(http.StatusSeeOther, next)
}

func (s *Server) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		if err := s.auth.SignOut(c.Request().Context(), ck.Value); err != nil {
			return err
		}
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true})
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps a post-sign-in redirect on this site.
func safeNext(next string) string {
	// Browsers drop tabs and newlines from URLs, so "/\t/evil.example" would read as
	// "//evil.example": no control characters either.
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) ||
		strings.ContainsFunc(next, unicode.IsControl) {
		return "/"
	}
	return next
}
