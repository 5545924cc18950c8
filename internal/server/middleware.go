package server

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/loupe-dev/loupe/internal/store"
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
		Skipper:      func(c echo.Context) bool { return s.ruleOf(c).quiet },
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			switch {
			case v.Status >= 500:
				level = slog.LevelError
			case v.Status >= 400:
				level = slog.LevelWarn
			}
			if !s.log.Enabled(c.Request().Context(), level) {
				return nil // nothing to build: the line would be dropped
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
// usual hardening headers. Telemetry routes (ingest, and Genkit's trace and log reads) answer
// JSON or protobuf to programs, never a page: their CSP allows nothing at all, and needs no nonce,
// which spares the thousands of ingest requests a second a random read, a formatted header and a
// copy of the request (a twenty-fifth of the server's CPU under realtime ingest).
func (s *Server) securityHeaders() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			h["X-Content-Type-Options"] = []string{"nosniff"}
			h["X-Frame-Options"] = []string{"DENY"}
			h["Referrer-Policy"] = []string{"same-origin"}
			h["Cross-Origin-Opener-Policy"] = []string{"same-origin"}
			h["Permissions-Policy"] = []string{"camera=(), microphone=(), geolocation=()"}
			if s.ruleOf(c).access == accessTelemetry {
				h["Content-Security-Policy"] = []string{noContentCSP}
				return next(c)
			}
			nonce := newNonce()
			h["Content-Security-Policy"] = []string{"default-src 'self'; script-src 'self' 'nonce-" + nonce + "'; " +
				"style-src 'self' 'nonce-" + nonce + "'; img-src 'self' data:; connect-src 'self'; font-src 'self'; " +
				"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"}
			req := c.Request()
			c.SetRequest(req.WithContext(templ.WithNonce(req.Context(), nonce)))
			return next(c)
		}
	}
}

// noContentCSP is the CSP of responses that are data, not pages: nothing may load or run.
const noContentCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

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
			if _, ok := bearerToken(r); ok || s.ruleOf(c).access == accessTelemetry {
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
			if errors.As(err, new(*bodyError)) {
				return err // reading the form's token failed on the body itself: no CSRF question
			}
			return Errorf(http.StatusForbidden, "csrf_failed", "cross-site request refused: reload the page and try again (%v)", err)
		},
	})
}

// csrfToken is the token for forms on this request's page.
func csrfToken(c echo.Context) string {
	tok, _ := c.Get("csrf").(string)
	return tok
}

// refuseUnstorableText answers 400 to a request whose path, query parameters or, on a page, form
// fields hold what PostgreSQL cannot store (U+0000, invalid UTF-8), before a handler can pass it
// to a query and fail with a 500: one check for every filter of every list, page and API. JSON
// bodies are checked where they are decoded (decodeJSON), and JSON typed into a form where it is
// parsed. The message names the field, quoted, and never holds the value.
func refuseUnstorableText() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if err := store.CheckText("path", r.URL.Path); err != nil {
				return unstorableParam("the path", "", err)
			}
			if err := checkParams("query parameter", c.QueryParams()); err != nil {
				return err
			}
			// Only pages take forms; the APIs read their bodies as JSON (or protobuf), whatever
			// Content-Type a client such as curl -d says.
			if p := r.URL.Path; strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/") || !hasForm(r) {
				return next(c)
			}
			if _, err := c.FormParams(); err != nil {
				if errors.As(err, new(*bodyError)) {
					return err // the client's body did not arrive: body.go's 400 or 408
				}
				return Errorf(http.StatusBadRequest, "bad_request", "cannot read the form: %v", err)
			}
			if err := checkParams("form field", r.PostForm); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// hasForm reports whether r's body is a form.
func hasForm(r *http.Request) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	return r.Body != nil && r.Body != http.NoBody && (ct == echo.MIMEApplicationForm || ct == echo.MIMEMultipartForm)
}

// checkParams refuses the first name or value in vs, in name order, that PostgreSQL cannot store.
func checkParams(kind string, vs url.Values) error {
	if len(vs) == 0 {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(vs)) {
		if err := store.CheckText("", name); err != nil {
			return unstorableParam(fmt.Sprintf("a %s's name (%q)", kind, name), name, err)
		}
		for _, v := range vs[name] {
			if err := store.CheckText(name, v); err != nil {
				return unstorableParam(fmt.Sprintf("%s %q", kind, name), name, err)
			}
		}
	}
	return nil
}

// unstorableParam is the 400 for a parameter that PostgreSQL cannot store; what names it for
// people, field for details.field.
func unstorableParam(what, field string, err error) error {
	var te *store.TextError
	if !errors.As(err, &te) {
		return err
	}
	e := Errorf(http.StatusBadRequest, "bad_request", "%s %s, which PostgreSQL cannot store", what, te.Problem)
	if field != "" {
		e.Details = map[string]string{"field": field}
	}
	return e
}
