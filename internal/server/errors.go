package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// Error is a client-facing error: an HTTP status, a stable machine-readable code, a message that
// names the problem, and optional details. It is rendered as {"error":{"code","message","details"}}
// for API clients and as an error page for browsers.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an Error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// handleError is the one place where errors become HTTP responses.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	apiErr := s.toError(c.Request().Context(), err)
	reqID := c.Response().Header().Get(echo.HeaderXRequestID)
	switch {
	case apiErr.Code == codeDatabaseUnavailable:
		// Not a bug: the message says what is wrong and when to come back.
		s.log.Error("request failed: database unavailable", "err", err, "path", c.Request().URL.Path, "request_id", reqID)
		setRetryAfter(c.Response().Header())
	case apiErr.Status >= 500:
		s.log.Error("request failed", "err", err, "path", c.Request().URL.Path, "request_id", reqID)
		apiErr.Message = "internal error; the server log has the details under request id " + reqID
		apiErr.Details = nil
	}
	var werr error
	if wantsJSON(c) {
		werr = c.JSON(apiErr.Status, map[string]*Error{"error": apiErr})
	} else {
		page := templates.ErrorPage{
			Page:      s.page(c, http.StatusText(apiErr.Status), ""),
			Code:      apiErr.Status,
			Message:   apiErr.Message,
			RequestID: reqID,
		}
		werr = s.render(c, apiErr.Status, templates.ErrorView(page))
	}
	if werr != nil {
		s.log.Error("write error response", "err", werr)
	}
}

// toError maps any error to an Error: ours as they are, a body the client did not finish sending
// to 400 or 408 (body.go), echo's by status, the store's not-found to 404, a cancelled request to
// 499-style 400, a database that cannot be reached to 503 (unavailable.go), and everything else
// to 500.
func (s *Server) toError(ctx context.Context, err error) *Error {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	if bodyErr := s.bodyErrorOf(err); bodyErr != nil {
		return bodyErr
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge {
		return Errorf(he.Code, "too_large", "request body exceeds the limit of %d bytes (--body-limit)", s.cfg.BodyLimit)
	}
	if errors.As(err, &he) {
		msg := fmt.Sprint(he.Message)
		if he.Internal != nil && he.Code < 500 {
			msg = msg + ": " + he.Internal.Error()
		}
		return &Error{Status: he.Code, Code: codeFor(he.Code), Message: msg}
	}
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	}
	if errors.Is(err, store.ErrBadCursor) {
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error(), Details: map[string]any{"field": "cursor"}}
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Status: http.StatusBadRequest, Code: "cancelled", Message: "the request was cancelled"}
	}
	if dbErr := s.databaseUnavailable(ctx, err); dbErr != nil {
		return dbErr
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

func codeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusUnprocessableEntity:
		return "invalid"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	if status >= 500 {
		return "internal"
	}
	return "error"
}

// wantsJSON reports whether the client is an API client rather than a browser page load.
func wantsJSON(c echo.Context) bool {
	r := c.Request()
	p := r.URL.Path
	if strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/") || p == "/readyz" || p == "/healthz" {
		return true
	}
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}

// render renders a templ component into a buffer first, so that a failing template becomes a clean
// 500 rather than half a page.
func (s *Server) render(c echo.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request().Context(), &buf); err != nil {
		return fmt.Errorf("render %s: %w", c.Request().URL.Path, err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// page fills the layout's view model for this request.
func (s *Server) page(c echo.Context, title, section string) templates.Page {
	p := templates.Page{Title: title, Section: section, Dev: s.cfg.Dev, CSRF: csrfToken(c)}
	if pr := principal(c); pr != nil && !pr.Local {
		p.User = pr.Username
	}
	if pr := principal(c); pr != nil {
		p.Admin = auth.Allows(pr.Role, store.RoleAdmin)
	}
	p.Live = s.deps.Live != nil
	return p
}
