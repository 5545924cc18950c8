package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/store"
)

// healthz answers while the process is alive, whatever the database does.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
}

// readyz answers 200 only when the database is reachable, fully migrated and, after it was found
// short of a resource (a full disk), can write again; otherwise 503 with the reason, and while the
// database is unavailable, since when and what is being done about it. The pool reconnects by
// itself, and the embedded PostgreSQL is restarted, so readiness returns when PostgreSQL does.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	notReady := func(reason string) error {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": reason})
	}
	unavailable := func(reason string) error {
		setRetryAfter(c.Response().Header())
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": reason, "reason": "database " + reason})
	}
	databaseDown := func(cause error) error { return unavailable(s.databaseOutage(cause)) }
	if s.deps.Database != nil {
		if _, down := s.deps.Database.Outage(); down {
			return databaseDown(nil)
		}
	}
	if err := s.store.Pool().Ping(ctx); err != nil {
		return databaseDown(err)
	}
	s.outage.recovered()
	if short, since, last, ok := s.shortage.current(); ok {
		err := s.store.WriteProbe(ctx)
		kind, nowShort := classify(err)
		switch {
		case err == nil:
			s.shortage.recovered()
		case kind == shortOf:
			since = s.shortage.failed(time.Now(), nowShort)
			return unavailable(nowShort + " since " + since.UTC().Format(time.RFC3339) + ": " + err.Error())
		case kind == unreachable:
			return databaseDown(err)
		case time.Since(last) <= outageGap:
			// The probe cannot tell (no right to create temporary tables, say): what requests
			// saw stands until they have not seen it for a while.
			return unavailable(short + " since " + since.UTC().Format(time.RFC3339) + " (" + err.Error() + ")")
		default:
			s.shortage.recovered()
		}
	}
	status, err := store.Migrations(ctx, s.store.Pool())
	if kind, _ := classify(err); kind == unreachable {
		return databaseDown(err)
	}
	if err != nil {
		return notReady("cannot read the schema version: " + err.Error())
	}
	if !status.UpToDate() {
		return notReady("database schema is at migration " + itoa(status.Current) + " of " + itoa(status.Latest) + "; run: devui migrate")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
