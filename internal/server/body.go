package server

import (
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

// bodyError is a failure to read a request's body: the client stopped sending before the end it
// announced (it half-closed, or went away). It is the client's doing, never a server error: a
// 400.
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
	return Errorf(http.StatusBadRequest, "incomplete_body", "the request body broke off (%v): the client stopped sending it before its end", be.err)
}

// readBodies marks the errors of reading a request's body as the client's (bodyError).
func (s *Server) readBodies() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body == nil || r.Body == http.NoBody {
				return next(c)
			}
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
