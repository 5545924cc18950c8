package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// The datasets and experiments API (README: "Datasets and experiments"). A dataset is named in
// paths by its name (or id); an experiment by its id (or name: its newest).

// apiExample is an example as the API takes it: an input, an optional reference output, tags, and
// the run whose recording serves its tools.
type apiExample struct {
	Input       json.RawMessage `json:"input"`
	Reference   json.RawMessage `json:"reference,omitempty"`
	Tags        []string        `json:"tags,omitempty"`
	SourceRunID *uuid.UUID      `json:"source_run_id,omitempty"`
}

func (e apiExample) params() store.ExampleParams {
	return store.ExampleParams{Input: e.Input, Reference: e.Reference, Tags: e.Tags, SourceRunID: e.SourceRunID}
}

// experimentsError maps the experiment service's errors: a caller's mistake is a 422 naming the
// field, a taken name a 409, an unknown dataset or experiment a 404.
func experimentsError(err error) error {
	var ie *experiments.InvalidError
	switch {
	case errors.As(err, &ie):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: ie.Error(), Details: map[string]string{"field": ie.Field}}
	case errors.Is(err, store.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	}
	return runsError(err)
}

func readJSONBody(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// apiDatasetList is GET /api/v1/datasets.
func (s *Server) apiDatasetList(c echo.Context) error {
	list, err := s.store.DatasetList(c.Request().Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []*store.Dataset{}
	}
	return c.JSON(http.StatusOK, map[string]any{"datasets": list})
}

// datasetCreateRequest is the body of POST /api/v1/datasets: examples given, or made of the stored
// runs a filter keeps (from_runs, the runs list's query: action=/flow/x&status=succeeded), at most
// limit of them, newest first.
type datasetCreateRequest struct {
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Examples    []apiExample `json:"examples"`
	FromRuns    *string      `json:"from_runs"`
	Limit       int          `json:"limit"`
}

// apiDatasetCreate is POST /api/v1/datasets.
func (s *Server) apiDatasetCreate(c echo.Context) error {
	var req datasetCreateRequest
	if err := readJSONBody(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	examples := make([]store.ExampleParams, 0, len(req.Examples))
	for _, e := range req.Examples {
		examples = append(examples, e.params())
	}
	if req.FromRuns != nil {
		made, err := s.examplesFromRuns(c, *req.FromRuns, req.Limit)
		if err != nil {
			return err
		}
		examples = append(examples, made...)
	}
	d, err := s.deps.Experiments.CreateDataset(ctx, req.Name, req.Description, principal(c).Username, examples)
	if err != nil {
		return experimentsError(err)
	}
	return c.JSON(http.StatusCreated, d)
}

func (s *Server) examplesFromRuns(c echo.Context, filter string, limit int) ([]store.ExampleParams, error) {
	if limit < 0 || limit > 10000 {
		return nil, &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: "limit: from 1 to 10000 (0: 200)",
			Details: map[string]string{"field": "limit"}}
	}
	if limit == 0 {
		limit = 200
	}
	p, err := experiments.ParseRunFilter(filter)
	if err != nil {
		return nil, experimentsError(err)
	}
	out, err := s.deps.Experiments.FromRuns(c.Request().Context(), p, limit)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: "from_runs: no ended run matches " + filter,
			Details: map[string]string{"field": "from_runs"}}
	}
	return out, nil
}

func (s *Server) datasetParam(c echo.Context) (*store.Dataset, error) {
	d, err := s.deps.Experiments.Dataset(c.Request().Context(), c.Param("name"))
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(http.StatusNotFound, "not_found", "no dataset %q (GET /api/v1/datasets lists them)", c.Param("name"))
	}
	return d, err
}

// versionParam reads ?version=, 0 when absent.
func versionParam(c echo.Context, d *store.Dataset) (int, error) {
	v := c.QueryParam("version")
	if v == "" {
		return d.Version, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > d.Version {
		return 0, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "version " + strconv.Quote(v) + ": dataset " + d.Name +
			" has versions 1 to " + strconv.Itoa(d.Version), Details: map[string]string{"field": "version"}}
	}
	return n, nil
}

// apiDatasetGet is GET /api/v1/datasets/:name[?version=N]: the dataset and the examples of that
// version (the current one by default).
func (s *Server) apiDatasetGet(c echo.Context) error {
	d, err := s.datasetParam(c)
	if err != nil {
		return err
	}
	version, err := versionParam(c, d)
	if err != nil {
		return err
	}
	examples, err := s.store.ExampleList(c.Request().Context(), d.ID, version)
	if err != nil {
		return err
	}
	if examples == nil {
		examples = []*store.Example{}
	}
	return c.JSON(http.StatusOK, map[string]any{"dataset": d, "version": version, "examples": examples})
}

// datasetChangeRequest is the body of POST /api/v1/datasets/:name/examples: examples to add, to
// edit (by key) and to delete (by key), applied as one new version.
type datasetChangeRequest struct {
	Add    []apiExample             `json:"add"`
	Edit   map[uuid.UUID]apiExample `json:"edit"`
	Delete []uuid.UUID              `json:"delete"`
}

// apiDatasetChange is POST /api/v1/datasets/:name/examples.
func (s *Server) apiDatasetChange(c echo.Context) error {
	d, err := s.datasetParam(c)
	if err != nil {
		return err
	}
	var req datasetChangeRequest
	if err := readJSONBody(c, &req); err != nil {
		return err
	}
	change := store.DatasetChange{Edit: map[uuid.UUID]store.ExampleParams{}, Delete: req.Delete, By: principal(c).Username}
	for _, e := range req.Add {
		change.Add = append(change.Add, e.params())
	}
	for k, e := range req.Edit {
		change.Edit[k] = e.params()
	}
	return s.applyDatasetChange(c, d, change)
}

func (s *Server) applyDatasetChange(c echo.Context, d *store.Dataset, change store.DatasetChange) error {
	version, err := s.deps.Experiments.Change(c.Request().Context(), d, change)
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: err.Error(), Details: map[string]string{"field": "edit"}}
	}
	if err != nil {
		return experimentsError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"dataset": d.Name, "version": version})
}

// apiDatasetImport is POST /api/v1/datasets/:name/import: the body is JSONL (one example a line:
// input, reference, tags, source_run_id) or a JSON array (Genkit's eval:extractData output), added
// as one new version.
func (s *Server) apiDatasetImport(c echo.Context) error {
	d, err := s.datasetParam(c)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	examples, err := experiments.ParseExamples(bytes.NewReader(body))
	if err != nil {
		return experimentsError(err)
	}
	return s.applyDatasetChange(c, d, store.DatasetChange{Add: examples, By: principal(c).Username})
}

// apiEvaluatorList is GET /api/v1/evaluators: the built-ins, this program's own, and those of
// the Genkit apps running now.
func (s *Server) apiEvaluatorList(c echo.Context) error {
	evs, err := s.deps.Experiments.AllEvaluators(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"evaluators": evs})
}

// experimentStartRequest is the body of POST /api/v1/experiments.
type experimentStartRequest struct {
	Name        string          `json:"name"`
	Dataset     string          `json:"dataset"`
	Version     int             `json:"version"`
	Action      string          `json:"action"`
	Evaluators  []string        `json:"evaluators"`
	Tools       string          `json:"tools"`
	Model       string          `json:"model"`
	Overrides   *runs.Overrides `json:"overrides"`
	Concurrency int             `json:"concurrency"`
	Baseline    string          `json:"baseline"`
}

// apiExperimentStart is POST /api/v1/experiments: the experiment is stored and the server's
// drivers run it; GET /api/v1/experiments/:id follows it.
func (s *Server) apiExperimentStart(c echo.Context) error {
	var req experimentStartRequest
	if err := readJSONBody(c, &req); err != nil {
		return err
	}
	e, err := s.startExperiment(c, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, e)
}

func (s *Server) startExperiment(c echo.Context, req experimentStartRequest) (*store.Experiment, error) {
	overrides := req.Overrides
	if req.Model != "" {
		if overrides == nil {
			overrides = &runs.Overrides{}
		}
		overrides.Model = req.Model
	}
	e, err := s.deps.Experiments.Start(c.Request().Context(), experiments.StartParams{Name: req.Name, Dataset: req.Dataset, Version: req.Version,
		Action: req.Action, Evaluators: req.Evaluators, Tools: req.Tools, Overrides: overrides, Concurrency: req.Concurrency,
		Baseline: req.Baseline, CreatedBy: principal(c).Username})
	if err != nil {
		return nil, experimentsError(err)
	}
	return e, nil
}

// apiExperimentList is GET /api/v1/experiments[?dataset=NAME]: the newest first, at most 200.
func (s *Server) apiExperimentList(c echo.Context) error {
	var datasetID *uuid.UUID
	if name := c.QueryParam("dataset"); name != "" {
		d, err := s.deps.Experiments.Dataset(c.Request().Context(), name)
		if err != nil {
			return experimentsError(err)
		}
		datasetID = &d.ID
	}
	list, err := s.store.ExperimentList(c.Request().Context(), datasetID, 200)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*store.Experiment{}
	}
	return c.JSON(http.StatusOK, map[string]any{"experiments": list})
}

func (s *Server) experimentSummary(c echo.Context) (*experiments.Summary, error) {
	e, err := s.deps.Experiments.Experiment(c.Request().Context(), c.Param("id"))
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(http.StatusNotFound, "not_found", "no experiment %q", c.Param("id"))
	}
	if err != nil {
		return nil, err
	}
	sum, err := s.deps.Experiments.Summarise(c.Request().Context(), e, c.QueryParam("baseline"))
	if err != nil {
		return nil, experimentsError(err)
	}
	return sum, nil
}

// apiExperimentGet is GET /api/v1/experiments/:id[?baseline=ID]: the experiment's progress, totals
// and examples × evaluators, against its baseline (or the one named), regressions first.
func (s *Server) apiExperimentGet(c echo.Context) error {
	sum, err := s.experimentSummary(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sum)
}
