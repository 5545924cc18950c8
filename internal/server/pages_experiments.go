package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/eval"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

// The datasets and experiments pages. Their forms post, then redirect to a page (POST, redirect,
// GET), or render the page again with the refusal and what was typed.

func (s *Server) canEdit(c echo.Context) bool {
	pr := principal(c)
	return pr != nil && auth.Allows(pr.Role, store.RoleReviewer)
}

func datasetURL(name string) string { return "/datasets/" + url.PathEscape(name) }

// datasetsPage is GET /datasets.
func (s *Server) datasetsPage(c echo.Context) error {
	return s.renderDatasets(c, http.StatusOK, "", templates.DatasetForm{Limit: 200})
}

func (s *Server) renderDatasets(c echo.Context, status int, flash string, form templates.DatasetForm) error {
	list, err := s.store.DatasetList(c.Request().Context())
	if err != nil {
		return err
	}
	p := templates.DatasetsPage{Page: s.page(c, "Datasets", "datasets"), CanEdit: s.canEdit(c), Flash: flash, FlashError: status >= 400, Form: form}
	for _, d := range list {
		p.Rows = append(p.Rows, templates.DatasetRow{Name: d.Name, Description: d.Description, Version: d.Version, Examples: d.Examples,
			Updated: d.UpdatedAt, URL: datasetURL(d.Name)})
	}
	return s.render(c, status, templates.DatasetsView(p))
}

// formMessage is the message a refused form shows: a caller's mistake as it is, anything else
// through the error handler.
func formMessage(err error) (string, bool) {
	var ae *Error
	if errors.As(experimentsError(err), &ae) && ae.Status < 500 {
		return ae.Message, true
	}
	return "", false
}

// datasetCreateForm is POST /datasets.
func (s *Server) datasetCreateForm(c echo.Context) error {
	form := templates.DatasetForm{Name: strings.TrimSpace(c.FormValue("name")), Description: c.FormValue("description"),
		FromRuns: strings.TrimSpace(c.FormValue("from_runs")), Examples: c.FormValue("examples"), Limit: 200}
	refuse := func(msg string) error {
		return s.renderDatasets(c, http.StatusUnprocessableEntity, "Not created: "+msg, form)
	}
	if v := c.FormValue("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return refuse("at most: a number from 1 to 10000")
		}
		form.Limit = n
	}
	var examples []store.ExampleParams
	if strings.TrimSpace(form.Examples) != "" {
		ex, err := experiments.ParseExamples(strings.NewReader(form.Examples))
		if err != nil {
			return refuse(err.Error())
		}
		examples = ex
	}
	if form.FromRuns != "" {
		ex, err := s.examplesFromRuns(c, form.FromRuns, form.Limit)
		if msg, ok := formMessage(err); ok {
			return refuse(msg)
		} else if err != nil {
			return err
		}
		examples = append(examples, ex...)
	}
	d, err := s.deps.Experiments.CreateDataset(c.Request().Context(), form.Name, form.Description, principal(c).Username, examples)
	if msg, ok := formMessage(err); ok {
		return refuse(msg)
	} else if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, datasetURL(d.Name))
}

// datasetPage is GET /datasets/:name[?version=N].
func (s *Server) datasetPage(c echo.Context) error {
	return s.renderDataset(c, http.StatusOK, "")
}

func (s *Server) renderDataset(c echo.Context, status int, flash string) error {
	ctx := c.Request().Context()
	d, err := s.datasetParam(c)
	if err != nil {
		return err
	}
	version, err := versionParam(c, d)
	if err != nil {
		return err
	}
	examples, err := s.store.ExampleList(ctx, d.ID, version)
	if err != nil {
		return err
	}
	exps, err := s.store.ExperimentList(ctx, &d.ID, 50)
	if err != nil {
		return err
	}
	p := templates.DatasetPage{Page: s.page(c, d.Name, "datasets"), Name: d.Name, Description: d.Description, Version: version,
		Current: d.Version, CanEdit: s.canEdit(c), Flash: flash, FlashError: status >= 400, Experiments: experimentRowsOf(exps)}
	for v := 1; v <= d.Version; v++ {
		p.Versions = append(p.Versions, v)
	}
	for _, e := range examples {
		row := templates.ExampleRow{Key: e.Key.String(), ShortKey: e.Key.String()[28:], Input: indentJSON(e.Input), Reference: indentJSON(e.Reference), Tags: e.Tags}
		if e.SourceRunID != nil {
			row.SourceRun, row.SourceRunURL = shortRunID(*e.SourceRunID), "/runs/"+e.SourceRunID.String()
		}
		p.Examples = append(p.Examples, row)
	}
	if p.CanEdit {
		actions, err := s.deps.Runs.Actions(ctx)
		if err != nil {
			return err
		}
		for _, a := range actions {
			if a.Type == "flow" || a.Type == "prompt" || strings.Contains(a.Key, ":/flow/") {
				p.Actions = append(p.Actions, a.Key)
			}
		}
		switch {
		case len(exps) > 0:
			p.DefaultAction = exps[0].Action
		case len(examples) > 0 && len(examples[0].Tags) > 0:
			p.DefaultAction = examples[0].Tags[0]
		}
		evs, err := s.deps.Experiments.AllEvaluators(ctx)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			hint := evaluatorArgHint[ev.Name]
			if ev.App != "" {
				hint, ev.Description = "options (JSON), if it takes any", "Genkit app "+ev.App+": "+ev.Description
			}
			p.Evaluators = append(p.Evaluators, templates.EvaluatorChoice{Name: ev.Name, Description: ev.Description, Arg: hint})
		}
	}
	return s.render(c, status, templates.DatasetView(p))
}

// evaluatorArgHint is the placeholder of a built-in evaluator's argument in the experiment form.
var evaluatorArgHint = map[string]string{
	"regex": "pattern, such as ^Booked", "contains": "text (empty: the reference)", "latency": "budget, such as 2s",
	"tokens": "budget, such as 5000", "turns": "limit (empty: the recorded run's)", "judge": "model, such as openai/gpt-4o",
	"schema": "JSON Schema (empty: the reference)",
}

func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return string(raw)
	}
	return string(b)
}

func experimentRowsOf(list []*store.Experiment) []templates.ExperimentRow {
	out := make([]templates.ExperimentRow, 0, len(list))
	for _, e := range list {
		out = append(out, templates.ExperimentRow{ID: e.ID.String(), Name: e.Name, Action: e.Action, Status: e.Status, Scored: e.Scored,
			Total: e.Total, Passed: e.Passed, Created: e.CreatedAt, URL: "/experiments/" + e.ID.String()})
	}
	return out
}

// datasetExamplesForm is POST /datasets/:name/examples: add an example, or edit or delete one (by
// key), as a new version.
func (s *Server) datasetExamplesForm(c echo.Context) error {
	d, err := s.datasetParam(c)
	if err != nil {
		return err
	}
	change := store.DatasetChange{By: principal(c).Username}
	key := func(field string) (uuid.UUID, bool) {
		id, err := uuid.Parse(c.FormValue(field))
		return id, err == nil
	}
	ex := store.ExampleParams{Input: json.RawMessage(strings.TrimSpace(c.FormValue("input"))),
		Reference: json.RawMessage(strings.TrimSpace(c.FormValue("reference")))}
	for _, t := range strings.Split(c.FormValue("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			ex.Tags = append(ex.Tags, t)
		}
	}
	switch {
	case c.FormValue("delete") != "":
		k, ok := key("delete")
		if !ok {
			return s.renderDataset(c, http.StatusUnprocessableEntity, "Not deleted: no such example")
		}
		change.Delete = []uuid.UUID{k}
	case c.FormValue("edit") != "":
		k, ok := key("edit")
		if !ok {
			return s.renderDataset(c, http.StatusUnprocessableEntity, "Not saved: no such example")
		}
		// An edit keeps the example's tags and recording.
		examples, err := s.store.ExampleList(c.Request().Context(), d.ID, d.Version)
		if err != nil {
			return err
		}
		for _, e := range examples {
			if e.Key == k {
				ex.Tags, ex.SourceRunID = e.Tags, e.SourceRunID
			}
		}
		change.Edit = map[uuid.UUID]store.ExampleParams{k: ex}
	default:
		change.Add = []store.ExampleParams{ex}
	}
	if len(ex.Reference) == 0 {
		ex.Reference = nil
	}
	v, err := s.deps.Experiments.Change(c.Request().Context(), d, change)
	if errors.Is(err, store.ErrNotFound) {
		return s.renderDataset(c, http.StatusUnprocessableEntity, "Not saved: the example is not in the current version (changed meanwhile?)")
	}
	if msg, ok := formMessage(err); ok {
		return s.renderDataset(c, http.StatusUnprocessableEntity, "Not saved: "+msg)
	} else if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, datasetURL(d.Name)+"?version="+strconv.Itoa(v))
}

// datasetExperimentForm is POST /datasets/:name/experiments: start an experiment, then show it.
func (s *Server) datasetExperimentForm(c echo.Context) error {
	d, err := s.datasetParam(c)
	if err != nil {
		return err
	}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	req := experimentStartRequest{Name: strings.TrimSpace(form.Get("name")), Dataset: d.ID.String(), Action: form.Get("action"),
		Tools: form.Get("tools"), Model: strings.TrimSpace(form.Get("model")), Baseline: form.Get("baseline")}
	for _, name := range form["evaluator"] {
		spec := eval.Spec{Name: name, Arg: strings.TrimSpace(form.Get("arg_" + name))}
		req.Evaluators = append(req.Evaluators, spec.String())
	}
	e, err := s.startExperiment(c, req)
	if msg, ok := formMessage(err); ok {
		return s.renderDataset(c, http.StatusUnprocessableEntity, "Not started: "+msg)
	} else if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/experiments/"+e.ID.String())
}

// experimentPage is GET /experiments/:id[?baseline=ID].
func (s *Server) experimentPage(c echo.Context) error {
	sum, err := s.experimentSummary(c)
	if err != nil {
		return err
	}
	e := sum.Experiment
	others, err := s.store.ExperimentList(c.Request().Context(), &e.DatasetID, 50)
	if err != nil {
		return err
	}
	p := templates.ExperimentPage{Page: s.page(c, e.Name, "datasets"), ID: e.ID.String(), Name: e.Name, Dataset: sum.Dataset.Name,
		DatasetURL: datasetURL(sum.Dataset.Name) + "?version=" + strconv.Itoa(e.DatasetVersion), Action: e.Action, Tools: e.Tools,
		Status: e.Status, DatasetVersion: e.DatasetVersion, Scored: e.Scored, Started: e.Started, Total: e.Total, Evaluators: e.Evaluators,
		Running: e.Status == store.ExperimentRunning, Regressions: sum.Regressions, Fixed: sum.Fixed, Others: experimentRowsOf(others)}
	p.Totals = append(p.Totals, totalsRow("this", &sum.Totals, e.Evaluators))
	if sum.Baseline != nil {
		p.Baseline, p.BaselineURL = sum.Baseline.Name, "/experiments/"+sum.Baseline.ID.String()
		p.Totals = append(p.Totals, totalsRow("baseline "+sum.Baseline.Name, sum.BaselineTotals, e.Evaluators))
	}
	for _, r := range sum.Rows {
		row := templates.ResultRow{N: r.Ord + 1, Input: store.Shorten(compactJSON(r.Input), 120), Verdict: verdictOf(r)}
		if r.RunID != nil && *r.RunID != uuid.Nil {
			row.RunURL, row.RunID = "/runs/"+r.RunID.String(), shortRunID(*r.RunID)
		}
		if r.RunStatus != nil {
			row.RunStatus = *r.RunStatus
		}
		if r.Error != nil && row.RunStatus != store.RunSucceeded {
			row.Error = store.Shorten(*r.Error, 300)
		}
		for _, ev := range e.Evaluators {
			row.Cells = append(row.Cells, scoreCellOf(r.Scores, ev))
		}
		if b := r.Baseline; b != nil && sum.Baseline != nil {
			row.BaselineVerdict = "fail"
			if b.Status != store.ResultScored {
				row.BaselineVerdict = b.Status
			} else if experimentsPassed(b, len(sum.Baseline.Evaluators)) {
				row.BaselineVerdict = "pass"
			}
			if b.RunID != nil && r.RunID != nil && *b.RunID != uuid.Nil && *r.RunID != uuid.Nil {
				row.DiffURL = "/runs/" + b.RunID.String() + "/diff/" + r.RunID.String()
			}
		}
		p.Rows = append(p.Rows, row)
	}
	return s.render(c, http.StatusOK, templates.ExperimentView(p))
}

// experimentsPassed says whether every evaluator passed a scored result.
func experimentsPassed(r *store.Result, evaluators int) bool {
	if len(r.Scores) < evaluators {
		return false
	}
	for _, sc := range r.Scores {
		if !sc.Pass {
			return false
		}
	}
	return true
}

func verdictOf(r *experiments.Row) string {
	switch {
	case r.Status != store.ResultScored:
		return r.Status
	case r.Regression:
		return "regression"
	case r.Fixed:
		return "fixed"
	case r.Pass:
		return "pass"
	}
	return "fail"
}

func scoreCellOf(scores []store.Score, evaluator string) templates.ScoreCell {
	for _, sc := range scores {
		if sc.Evaluator != evaluator {
			continue
		}
		cell := templates.ScoreCell{Evaluator: evaluator, Pass: sc.Pass, Mark: "✗", Explanation: sc.Explanation}
		if sc.Pass {
			cell.Mark = "✓"
		}
		if sc.Score != nil {
			cell.Score = strconv.FormatFloat(*sc.Score, 'f', 2, 64)
		}
		if sc.TraceID != nil {
			cell.TraceURL = "/traces/" + *sc.TraceID
		}
		return cell
	}
	return templates.ScoreCell{Evaluator: evaluator, Missing: true}
}

func totalsRow(label string, t *experiments.Totals, evaluators []string) templates.TotalsRow {
	row := templates.TotalsRow{Label: label, Passed: fmt.Sprintf("%d/%d", t.Passed, t.Scored), PassRate: fmt.Sprintf("%.1f%%", 100*t.PassRate),
		MeanScore: "—", Tokens: strconv.FormatInt(t.InputTokens+t.OutputTokens, 10), Cost: "—", P50: "—", P95: "—"}
	if t.MeanScore != nil {
		row.MeanScore = fmt.Sprintf("%.3f", *t.MeanScore)
	}
	if t.CostUSD != nil {
		row.Cost = fmt.Sprintf("$%.4f", *t.CostUSD)
	}
	if t.P50Ms != nil {
		row.P50 = (time.Duration(*t.P50Ms) * time.Millisecond).String()
	}
	if t.P95Ms != nil {
		row.P95 = (time.Duration(*t.P95Ms) * time.Millisecond).String()
	}
	for _, ev := range evaluators {
		if et, ok := t.Evaluators[ev]; ok {
			row.Evaluators = append(row.Evaluators, fmt.Sprintf("%.1f%%", 100*et.PassRate))
		} else {
			row.Evaluators = append(row.Evaluators, "—")
		}
	}
	return row
}

// pickedRuns reads the runs ticked in the runs list (?run=ID, repeated), at most 500.
func pickedRuns(values []string) ([]uuid.UUID, error) {
	if len(values) == 0 {
		return nil, Errorf(http.StatusBadRequest, "bad_request", "tick the runs to add in the runs list's first column; none was picked")
	}
	if len(values) > 500 {
		return nil, Errorf(http.StatusBadRequest, "bad_request", "at most 500 runs at once; %d picked", len(values))
	}
	ids := make([]uuid.UUID, 0, len(values))
	for _, v := range values {
		id, ok := parseID(v)
		if !ok {
			return nil, Errorf(http.StatusBadRequest, "bad_id", "run %q is not a run id", v)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// datasetFromRunsPage is GET /datasets/from-runs?run=A&run=B: the runs ticked in the runs list,
// and a form that adds them to a dataset, new or existing.
func (s *Server) datasetFromRunsPage(c echo.Context) error {
	return s.renderFromRuns(c, http.StatusOK, c.QueryParams()["run"], "", "")
}

func (s *Server) renderFromRuns(c echo.Context, status int, picked []string, flash, name string) error {
	ids, err := pickedRuns(picked)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	p := templates.FromRunsPage{Page: s.page(c, "Add runs to a dataset", "datasets"), Flash: flash, FlashError: status >= 400, NewName: name}
	for _, id := range ids {
		r, err := s.store.RunGet(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return Errorf(http.StatusNotFound, "not_found", "no run %s", id)
		}
		if err != nil {
			return err
		}
		p.Runs = append(p.Runs, templates.PickedRun{ID: r.ID.String(), Short: shortRunID(r.ID), Action: r.Action, Status: r.Status,
			Input: store.Shorten(compactJSON(r.Input), 120)})
	}
	list, err := s.store.DatasetList(ctx)
	if err != nil {
		return err
	}
	for _, d := range list {
		p.Datasets = append(p.Datasets, d.Name)
	}
	return s.render(c, status, templates.FromRunsView(p))
}

// datasetFromRunsForm is POST /datasets/from-runs: the picked runs as examples, in a new dataset
// (new_name) or as the next version of an existing one (dataset).
func (s *Server) datasetFromRunsForm(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	picked := form["run"]
	ids, err := pickedRuns(picked)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := strings.TrimSpace(form.Get("new_name"))
	refuse := func(msg string) error {
		return s.renderFromRuns(c, http.StatusUnprocessableEntity, picked, "Not added: "+msg, name)
	}
	examples, err := s.deps.Experiments.FromRunIDs(ctx, ids)
	if msg, ok := formMessage(err); ok {
		return refuse(msg)
	} else if err != nil {
		return err
	}
	by := principal(c).Username
	if name != "" {
		d, err := s.deps.Experiments.CreateDataset(ctx, name, "", by, examples)
		if msg, ok := formMessage(err); ok {
			return refuse(msg)
		} else if err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, datasetURL(d.Name))
	}
	d, err := s.deps.Experiments.Dataset(ctx, form.Get("dataset"))
	if errors.Is(err, store.ErrNotFound) {
		return refuse("pick a dataset, or name a new one")
	} else if err != nil {
		return err
	}
	v, err := s.deps.Experiments.Change(ctx, d, store.DatasetChange{Add: examples, By: by})
	if msg, ok := formMessage(err); ok {
		return refuse(msg)
	} else if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, datasetURL(d.Name)+"?version="+strconv.Itoa(v))
}
