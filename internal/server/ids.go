package server

import (
	"encoding/hex"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// parseID reads a 128-bit id from a path: 32 hex digits, or a UUID's 36 characters (8-4-4-4-12),
// in either case. It is the one parser of every route's id: run, interrupt and user ids are UUIDs
// and trace ids 32 hex digits, but a run's trace id is its run id's digits, so that both spellings
// name the same thing on every route (/runs/{id} and /traces/{id} alike).
func parseID(s string) (uuid.UUID, bool) {
	var id uuid.UUID
	switch len(s) {
	case 32:
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return id, false
		}
		s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	default:
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return uuid.UUID{}, false
	}
	return id, true
}

// pathID parses the uuid path parameter name.
func pathID(c echo.Context, name string) (uuid.UUID, error) {
	id, ok := parseID(c.Param(name))
	if !ok {
		return uuid.Nil, Errorf(http.StatusBadRequest, "bad_id", "%s %q is not a valid id (want a UUID or 32 hex digits)", name, c.Param(name))
	}
	return id, nil
}

// traceParam parses the trace id path parameter name, and returns it as stored: 32 lowercase hex
// digits.
func traceParam(c echo.Context, name string) (string, error) {
	raw := c.Param(name)
	id, ok := parseID(raw)
	switch {
	case !ok:
		return "", Errorf(http.StatusBadRequest, "bad_id", "trace id %q is not 32 hex digits (or a UUID)", raw)
	case id == uuid.Nil:
		return "", Errorf(http.StatusBadRequest, "bad_id", "trace id %q is all zeros, an invalid trace id", raw)
	}
	return hex.EncodeToString(id[:]), nil
}
