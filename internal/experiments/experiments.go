// Package experiments regression-tests agents against what they really did: datasets of examples
// made from stored runs (or files), experiments that run an action over a dataset version with each
// example as a durable run whose tools and reviewer decisions come from the example's recording,
// the scores of evaluators, and the comparison of an experiment with a baseline.
//
// An experiment is driven (its runs started, at most its concurrency at once, and each scored when
// it ends) by whichever process holds its lease: the `devui eval run` that started it, or any serve
// or worker after that one died. All of its state is in the database, so a driver that takes over
// goes on where the last one stopped, and each example is started and scored once.
package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/eval"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/pricing"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// ErrInvalid wraps every error that is the caller's mistake (a 4xx).
var ErrInvalid = errors.New("invalid")

// InvalidError is a caller's mistake in one field.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// Config configures the service.
type Config struct {
	// LeaseTTL bounds how long a dead driver keeps an experiment. Default 15s.
	LeaseTTL time.Duration
	// Poll is how often a driver looks for ended runs. Default 20ms.
	Poll   time.Duration
	Prices *pricing.Table
	Logger *slog.Logger
}

// Service keeps datasets and runs experiments.
type Service struct {
	cfg   Config
	store *store.Store
	runs  *runs.Service
	reg   *engine.Registry
	log   *slog.Logger
	owner string
	// http calls Genkit apps' evaluators.
	http *http.Client
	pub  Publisher
}

// New builds the service over the run service, whose registry holds the Go-defined evaluators.
func New(cfg Config, st *store.Store, rs *runs.Service) *Service {
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	if cfg.Prices == nil {
		cfg.Prices = pricing.Builtin()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	return &Service{cfg: cfg, store: st, runs: rs, reg: rs.Registry(), log: cfg.Logger, http: &http.Client{},
		owner: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])}
}

var datasetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// CreateDataset makes a dataset, with the examples given as its version 1 (none: an empty
// dataset at version 0), in one transaction: a refused example leaves no dataset behind.
func (s *Service) CreateDataset(ctx context.Context, name, description, by string, examples []store.ExampleParams) (*store.Dataset, error) {
	if !datasetName.MatchString(name) {
		return nil, &InvalidError{Field: "name", Message: fmt.Sprintf("%q: a dataset's name is 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit", name)}
	}
	if err := store.CheckText("description", description); err != nil {
		return nil, &InvalidError{Field: "description", Message: err.Error()}
	}
	for i := range examples {
		if err := CheckExample(i, &examples[i]); err != nil {
			return nil, err
		}
	}
	var d *store.Dataset
	err := s.store.WithTx(ctx, func(tx *store.Store) error {
		var err error
		if d, err = tx.DatasetCreate(ctx, name, description, by); err != nil {
			return err
		}
		if len(examples) > 0 {
			if _, err := tx.DatasetApply(ctx, d.ID, store.DatasetChange{Add: examples, By: by}); err != nil {
				return err
			}
		}
		return tx.AuditInsert(ctx, by, "dataset.create", "dataset", d.ID.String(), map[string]any{"name": name, "examples": len(examples)})
	})
	if errors.Is(err, store.ErrConflict) {
		return nil, fmt.Errorf("dataset %q exists already: %w", name, store.ErrConflict)
	}
	if err != nil {
		return nil, err
	}
	return s.store.DatasetGetByID(ctx, d.ID)
}

// Dataset returns a dataset by name, or by id.
func (s *Service) Dataset(ctx context.Context, ref string) (*store.Dataset, error) {
	if id, err := uuid.Parse(ref); err == nil {
		return s.store.DatasetGetByID(ctx, id)
	}
	return s.store.DatasetGet(ctx, ref)
}

// CheckExample validates an example's content.
func CheckExample(i int, e *store.ExampleParams) error {
	field := fmt.Sprintf("examples/%d", i)
	if len(e.Input) == 0 {
		e.Input = json.RawMessage("null")
	}
	if !json.Valid(e.Input) {
		return &InvalidError{Field: field + "/input", Message: "not valid JSON"}
	}
	if len(e.Reference) > 0 && !json.Valid(e.Reference) {
		return &InvalidError{Field: field + "/reference", Message: "not valid JSON"}
	}
	for _, raw := range []json.RawMessage{e.Input, e.Reference} {
		if err := store.CheckJSON(field, raw); err != nil {
			return &InvalidError{Field: field, Message: err.Error()}
		}
	}
	for _, t := range e.Tags {
		if strings.TrimSpace(t) == "" || len(t) > 100 {
			return &InvalidError{Field: field + "/tags", Message: fmt.Sprintf("%q: a tag is 1 to 100 characters", t)}
		}
		if err := store.CheckText(field+"/tags", t); err != nil {
			return &InvalidError{Field: field + "/tags", Message: err.Error()}
		}
	}
	return nil
}

// Change applies added, edited and deleted examples to a dataset as one new version.
func (s *Service) Change(ctx context.Context, d *store.Dataset, c store.DatasetChange) (int, error) {
	for i := range c.Add {
		if err := CheckExample(i, &c.Add[i]); err != nil {
			return 0, err
		}
	}
	for k, e := range c.Edit {
		if err := CheckExample(0, &e); err != nil {
			return 0, err
		}
		c.Edit[k] = e
	}
	return s.store.DatasetApply(ctx, d.ID, c)
}

// FromRuns makes examples of stored runs: their input, their output as the reference, their action
// and status as tags, and the run as the recording.
func (s *Service) FromRuns(ctx context.Context, p store.RunListParams, limit int) ([]store.ExampleParams, error) {
	var out []store.ExampleParams
	for limit <= 0 || len(out) < limit {
		p.Limit = 500
		if limit > 0 {
			p.Limit = min(500, limit-len(out))
		}
		page, next, err := s.store.RunList(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if r.Status == store.RunQueued || r.Status == store.RunRunning {
				continue // no whole recording yet
			}
			id := r.ID
			out = append(out, store.ExampleParams{Input: r.Input, Reference: r.Output, Tags: []string{r.Action, r.Status}, SourceRunID: &id})
		}
		if next == nil {
			break
		}
		p.After = next
	}
	return out, nil
}

// FromRunIDs makes examples of the runs given (as FromRuns does), in that order; a run that is
// unknown or still in flight is refused by its id.
func (s *Service) FromRunIDs(ctx context.Context, ids []uuid.UUID) ([]store.ExampleParams, error) {
	out := make([]store.ExampleParams, 0, len(ids))
	for _, id := range ids {
		r, err := s.store.RunGet(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &InvalidError{Field: "runs", Message: fmt.Sprintf("no run %s", id)}
		}
		if err != nil {
			return nil, err
		}
		if r.Status == store.RunQueued || r.Status == store.RunRunning {
			return nil, &InvalidError{Field: "runs", Message: fmt.Sprintf("run %s is %s: only a run that has ended (or waits for a person) has a whole recording", id, r.Status)}
		}
		out = append(out, store.ExampleParams{Input: r.Input, Reference: r.Output, Tags: []string{r.Action, r.Status}, SourceRunID: &r.ID})
	}
	return out, nil
}

// StartParams asks for an experiment.
type StartParams struct {
	Name    string
	Dataset string // name or id
	Version int    // 0: the current version
	// Action is the action to run on each example's input: a key or a flow's name.
	Action      string
	Evaluators  []string // specs: name[:arg]
	Tools       string   // recorded (default) or live
	Overrides   *runs.Overrides
	Concurrency int    // default 4
	Baseline    string // an experiment's name (its newest) or id
	CreatedBy   string
}

// Start validates the request and stores the experiment, with one pending result per example of
// the dataset version, in one transaction. Drive (or a driver) runs it.
func (s *Service) Start(ctx context.Context, p StartParams) (*store.Experiment, error) {
	d, err := s.Dataset(ctx, p.Dataset)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &InvalidError{Field: "dataset", Message: fmt.Sprintf("no dataset %q", p.Dataset)}
	}
	if err != nil {
		return nil, err
	}
	version := p.Version
	if version == 0 {
		version = d.Version
	}
	if version < 1 || version > d.Version {
		return nil, &InvalidError{Field: "version", Message: fmt.Sprintf("dataset %s has versions 1 to %d", d.Name, d.Version)}
	}
	if p.Action == "" {
		return nil, &InvalidError{Field: "action", Message: "required: the action to run on each example, such as /flow/travelAgent"}
	}
	if len(p.Evaluators) == 0 {
		return nil, &InvalidError{Field: "evaluators", Message: "name one evaluator at least; the built-ins are " + strings.Join(eval.BuiltinNames(), ", ")}
	}
	for _, spec := range p.Evaluators {
		sp := eval.ParseSpec(spec)
		if genkitapp.IsEvaluatorKey(sp.Name) {
			if err := s.checkAppEvaluator(ctx, sp); err != nil {
				return nil, err
			}
			continue
		}
		if err := s.checkEvaluator(sp); err != nil {
			return nil, err
		}
	}
	if p.Tools == "" {
		p.Tools = store.ReplayToolsRecorded
	}
	if p.Action, err = s.runs.ResolveExperimentAction(ctx, p.Action, p.Tools); err != nil {
		return nil, invalidOf(err)
	}
	if err := s.runs.CheckRerunOverrides(ctx, p.Overrides); err != nil {
		return nil, invalidOf(err)
	}
	if p.Concurrency == 0 {
		p.Concurrency = 4
	}
	if p.Concurrency < 1 || p.Concurrency > 256 {
		return nil, &InvalidError{Field: "concurrency", Message: fmt.Sprintf("%d: from 1 to 256", p.Concurrency)}
	}
	var baseline *uuid.UUID
	if p.Baseline != "" {
		b, err := s.Experiment(ctx, p.Baseline)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &InvalidError{Field: "baseline", Message: fmt.Sprintf("no experiment %q", p.Baseline)}
		}
		if err != nil {
			return nil, err
		}
		baseline = &b.ID
	}
	examples, err := s.store.ExampleList(ctx, d.ID, version)
	if err != nil {
		return nil, err
	}
	if len(examples) == 0 {
		return nil, &InvalidError{Field: "dataset", Message: fmt.Sprintf("dataset %s has no examples in version %d", d.Name, version)}
	}
	var overrides json.RawMessage
	if p.Overrides != nil {
		if overrides, err = json.Marshal(p.Overrides); err != nil {
			return nil, err
		}
	}
	if p.Name == "" {
		p.Name = fmt.Sprintf("%s-%s", d.Name, time.Now().UTC().Format("20060102-150405"))
	}
	var e *store.Experiment
	err = s.store.WithTx(ctx, func(tx *store.Store) error {
		e, err = tx.ExperimentCreate(ctx, store.ExperimentCreateParams{
			Name: p.Name, DatasetID: d.ID, DatasetVersion: version, Action: p.Action, Evaluators: p.Evaluators,
			Tools: p.Tools, Overrides: overrides, Concurrency: p.Concurrency, BaselineID: baseline, CreatedBy: p.CreatedBy, Examples: examples,
		})
		if err != nil {
			return err
		}
		return tx.AuditInsert(ctx, p.CreatedBy, "experiment.start", "experiment", e.ID.String(),
			map[string]any{"dataset": d.Name, "version": version, "action": p.Action, "evaluators": p.Evaluators, "tools": p.Tools})
	})
	return e, err
}

// invalidOf makes the run service's refusals of a caller's mistake this package's.
func invalidOf(err error) error {
	var ve *runs.ValidationError
	var unknown *runs.UnknownActionError
	switch {
	case errors.As(err, &ve):
		return &InvalidError{Field: ve.Field, Message: ve.Message}
	case errors.As(err, &unknown):
		return &InvalidError{Field: "action", Message: err.Error()}
	}
	return err
}

// Experiment returns an experiment by id, or the newest of that name.
func (s *Service) Experiment(ctx context.Context, ref string) (*store.Experiment, error) {
	if id, err := uuid.Parse(ref); err == nil {
		return s.store.ExperimentGet(ctx, id)
	}
	return s.store.ExperimentGetByName(ctx, ref)
}

// checkEvaluator accepts a built-in with a valid argument, or an evaluator this program defined.
func (s *Service) checkEvaluator(spec eval.Spec) error {
	if b, ok := eval.Builtins[spec.Name]; ok {
		if b.Check != nil {
			if err := b.Check(spec.Arg); err != nil {
				return &InvalidError{Field: "evaluators", Message: fmt.Sprintf("%s: %v", spec, err)}
			}
		}
		return nil
	}
	if s.reg.Lookup(engine.ActionKey(engine.ActionTypeEvaluator, spec.Name)) != nil {
		return nil
	}
	return &InvalidError{Field: "evaluators", Message: fmt.Sprintf("%q is no evaluator: the built-ins are %s%s; a Genkit app's are named <app>:/evaluator/<name>", spec.Name,
		strings.Join(eval.BuiltinNames(), ", "), s.definedList())}
}

func (s *Service) definedList() string {
	var names []string
	for _, d := range s.reg.List() {
		if d.Type == engine.ActionTypeEvaluator {
			names = append(names, d.Name)
		}
	}
	if len(names) == 0 {
		return " (this program defines none of its own)"
	}
	slices.Sort(names)
	return "; this program defines " + strings.Join(names, ", ")
}

// Evaluators lists the evaluators this program can score with: the built-ins and its own.
func (s *Service) Evaluators() []EvaluatorInfo {
	var out []EvaluatorInfo
	for _, n := range eval.BuiltinNames() {
		out = append(out, EvaluatorInfo{Name: n, Builtin: true, Description: eval.Builtins[n].Doc})
	}
	for _, d := range s.reg.List() {
		if d.Type == engine.ActionTypeEvaluator {
			out = append(out, EvaluatorInfo{Name: d.Name, Description: d.Description})
		}
	}
	return out
}

// AllEvaluators lists Evaluators and the evaluators of the Genkit apps running now.
func (s *Service) AllEvaluators(ctx context.Context) ([]EvaluatorInfo, error) {
	out := s.Evaluators()
	apps, err := genkitapp.EvaluatorList(ctx, s.store)
	if err != nil {
		return nil, err
	}
	for _, a := range apps {
		app, _, _ := genkitapp.SplitKey(a.Key)
		out = append(out, EvaluatorInfo{Name: a.Key, App: app, Description: a.Description})
	}
	return out, nil
}

// EvaluatorInfo describes an evaluator.
type EvaluatorInfo struct {
	Name        string `json:"name"`
	Builtin     bool   `json:"builtin"`
	Description string `json:"description"`
	// App is the Genkit app whose evaluator it is, called through its reflection API.
	App string `json:"app,omitempty"`
}
