package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/runs"
)

// replayRequest is the body of POST /runs/{id}/replay.
type replayRequest struct {
	Mode             string          `json:"mode"`
	Turn             *int            `json:"turn"`
	Overrides        *runs.Overrides `json:"overrides"`
	Edits            []runs.Edit     `json:"edits"`
	Tools            string          `json:"tools"`
	ApplyResolutions bool            `json:"apply_resolutions"`
}

func (s *Server) apiRunReplay(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	var req replayRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Mode == "" {
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "mode is required: one of " + runs.ReplayModes,
			Details: map[string]string{"field": "mode"}}
	}
	run, err := s.deps.Runs.Replay(c.Request().Context(), runs.ReplayParams{
		RunID: id, Mode: req.Mode, Turn: req.Turn, Overrides: req.Overrides, Edits: req.Edits,
		Tools: req.Tools, ApplyResolutions: req.ApplyResolutions, CreatedBy: principal(c).Username,
	})
	if err != nil {
		return runsError(err)
	}
	return c.JSON(http.StatusCreated, apiRunOf(run, s.prices))
}

func (s *Server) apiRunLineage(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	info, err := s.deps.Runs.Lineage(c.Request().Context(), id)
	if err != nil {
		return runsError(err)
	}
	return c.JSON(http.StatusOK, apiLineageOf(info))
}

func (s *Server) apiRunDiff(c echo.Context) error {
	d, err := s.runDiff(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}
