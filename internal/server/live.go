package server

import (
	"github.com/labstack/echo/v4"
)

// liveSocket is GET /ws, the live WebSocket. The authenticate middleware has run, exactly as for
// the pages (a session cookie, a bearer token, or local mode); the hub checks the Origin. No
// timeout middleware wraps this route: the connection lives as long as the page.
func (s *Server) liveSocket(c echo.Context) error {
	if principal(c) == nil {
		return Errorf(401, "unauthenticated", "sign in first")
	}
	s.deps.Live.ServeHTTP(c.Response(), c.Request())
	return nil
}
