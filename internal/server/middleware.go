package server

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// logRequests logs one structured line per request: 5xx as errors, 4xx as warnings.
func (s *Server) logRequests() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogMethod:    true,
		LogURIPath:   true,
		LogStatus:    true,
		LogLatency:   true,
		LogRequestID: true,
		LogRemoteIP:  true,
		LogError:     true,
		HandleError:  true,
		Skipper: func(c echo.Context) bool {
			p := c.Request().URL.Path
			return p == "/healthz" || p == "/metrics" || strings.HasPrefix(p, "/static/")
		},
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			switch {
			case v.Status >= 500:
				level = slog.LevelError
			case v.Status >= 400:
				level = slog.LevelWarn
			}
			attrs := []slog.Attr{
				slog.String("method", v.Method),
				slog.String("path", v.URIPath),
				slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency),
				slog.String("request_id", v.RequestID),
				slog.String("remote_ip", v.RemoteIP),
			}
			if v.Error != nil {
				attrs = append(attrs, slog.String("err", v.Error.Error()))
			}
			s.log.LogAttrs(c.Request().Context(), level, "request", attrs...)
			return nil
		},
	})
}

// recoverPanics turns a panic in a handler into a 500 with the stack logged once.
func (s *Server) recoverPanics() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				if r := recover(); r != nil {
					if r == http.ErrAbortHandler {
						panic(r)
					}
					s.log.Error("panic in handler", "panic", fmt.Sprint(r), "path", c.Request().URL.Path, "stack", string(debug.Stack()))
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			return next(c)
		}
	}
}

// securityHeaders sets a strict CSP with a per-request nonce, made available to templ, and the
// usual hardening headers.
func securityHeaders() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			nonce := newNonce()
			h := c.Response().Header()
			h.Set("Content-Security-Policy", fmt.Sprintf("default-src 'self'; script-src 'self' 'nonce-%[1]s'; "+
				"style-src 'self' 'nonce-%[1]s'; img-src 'self' data:; connect-src 'self'; font-src 'self'; "+
				"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'", nonce))
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "same-origin")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
			req := c.Request()
			c.SetRequest(req.WithContext(templ.WithNonce(req.Context(), nonce)))
			return next(c)
		}
	}
}

func newNonce() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

// csrf guards every state-changing request from a browser: Sec-Fetch-Site where the browser sends
// it, and otherwise a token in a cookie that forms (field _csrf) and scripts (header X-CSRF-Token)
// send back. API clients that authenticate with a bearer token, and requests with no session
// cookie (but sign-in's), carry no ambient credentials and are not checked; nor, in local mode,
// are non-browser clients, which send neither Origin nor Sec-Fetch-Site.
func (s *Server) csrf() echo.MiddlewareFunc {
	return middleware.CSRFWithConfig(middleware.CSRFConfig{
		TokenLookup:    "header:X-CSRF-Token,form:_csrf",
		CookieName:     "loupe_csrf",
		CookiePath:     "/",
		CookieHTTPOnly: true,
		CookieSameSite: http.SameSiteStrictMode,
		CookieMaxAge:   int((12 * time.Hour).Seconds()),
		Skipper: func(c echo.Context) bool {
			r := c.Request()
			if _, ok := bearerToken(r); ok || isIngestPath(r.URL.Path) {
				return true
			}
			// Without a session cookie a request carries no ambient credentials, so there is
			// nothing to forge: authenticate answers it (401), rather than a misleading CSRF
			// failure. Sign-in itself stays checked, against login CSRF; local mode, where
			// everyone is the admin, checks browsers whatever their cookies.
			if _, err := r.Cookie(sessionCookie); err != nil && !s.cfg.Dev && r.URL.Path != "/login" {
				return true
			}
			return s.cfg.Dev && r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == ""
		},
		ErrorHandler: func(err error, c echo.Context) error {
			return Errorf(http.StatusForbidden, "csrf_failed", "cross-site request refused: reload the page and try again (%v)", err)
		},
	})
}

// csrfToken is the token for forms on this request's page.
func csrfToken(c echo.Context) string {
	tok, _ := c.Get("csrf").(string)
	return tok
}
