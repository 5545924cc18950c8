package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"
)

// DefaultBodyReadTimeout is how long a client has to send a request's body, from its headers on.
const DefaultBodyReadTimeout = 30 * time.Second

// bodyError is a failure to read a request's body: the client stopped sending before the end it
// announced (it half-closed, or went away) or was too slow. It is the client's doing, never a
// server error: a 400, or a 408 for a body that did not arrive in time.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "read the request body: " + e.err.Error() }

func (e *bodyError) Unwrap() error { return e.err }

// bodyErrorOf is the answer to err when reading the request's body failed with it, and nil
// otherwise.
func (s *Server) bodyErrorOf(err error) *Error {
	var be *bodyError
	if !errors.As(err, &be) {
		return nil
	}
	if errors.Is(be.err, os.ErrDeadlineExceeded) {
		return Errorf(http.StatusRequestTimeout, "body_timeout", "the request body did not arrive within %s", s.cfg.BodyReadTimeout)
	}
	return Errorf(http.StatusBadRequest, "incomplete_body", "the request body broke off (%v): the client stopped sending it before its end", be.err)
}

// readBodies gives a request's body a deadline, BodyReadTimeout from when the request's headers
// were read, and marks the errors of reading it as the client's (bodyError). The deadline is set
// on the request's connection (http.ResponseController), only for a request that has a body:
// net/http lifts it itself once the body is read to its end, when it starts waiting for the
// client's next bytes, so it never cuts a streamed answer or a WebSocket. (A read deadline on a
// request without a body would: that wait has begun before the handler runs.)
func (s *Server) readBodies() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body == nil || r.Body == http.NoBody {
				return next(c)
			}
			// A ResponseWriter without a connection (a test's recorder) has no deadline to set.
			_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
			r.Body = &clientBody{r.Body}
			return next(c)
		}
	}
}

// clientBody is a request body whose read errors are the client's (bodyError).
type clientBody struct{ io.ReadCloser }

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err: err}
	}
	return n, err
}
