package templates

import "time"

// DatasetRow is one dataset of the datasets page.
type DatasetRow struct {
	Name, Description string
	Version, Examples int
	Updated           time.Time
	URL               string
}

// DatasetsPage is the datasets page's view model: the list and the form that makes one.
type DatasetsPage struct {
	Page
	Rows []DatasetRow
	// CanEdit: the user may make datasets and run experiments (reviewer or admin).
	CanEdit bool
	// Flash is the outcome of the last form; FlashError marks it a refusal, and Form keeps what
	// was typed.
	Flash      string
	FlashError bool
	Form       DatasetForm
}

// DatasetForm is what the create form was given.
type DatasetForm struct {
	Name, Description, FromRuns, Examples string
	Limit                                 int
}

// ExampleRow is one example of a dataset version.
type ExampleRow struct {
	Key, ShortKey string
	// Input and Reference are the JSON as stored, indented for the edit form.
	Input, Reference string
	Tags             []string
	// SourceRun links the run the example came from; empty for one written by hand.
	SourceRun, SourceRunURL string
}

// ExperimentRow is one experiment in a list.
type ExperimentRow struct {
	ID, Name, Action, Status string
	Scored, Total, Passed    int
	Created                  time.Time
	URL                      string
}

// EvaluatorChoice is a built-in or program evaluator offered by the experiment form.
type EvaluatorChoice struct {
	Name, Description string
	// Arg is a hint for the evaluator's argument ("" when it takes none).
	Arg string
}

// DatasetPage is a dataset's page: one version's examples, its experiments, and the forms that add
// examples and start an experiment.
type DatasetPage struct {
	Page
	Name, Description string
	Version, Current  int
	Versions          []int
	Examples          []ExampleRow
	Experiments       []ExperimentRow
	CanEdit           bool
	Flash             string
	FlashError        bool
	// Actions and Evaluators fill the experiment form; DefaultAction is chosen first (the last
	// experiment's, or the action the examples were recorded from).
	Actions       []string
	DefaultAction string
	Evaluators    []EvaluatorChoice
}

// ScoreCell is one evaluator's verdict on one example.
type ScoreCell struct {
	Evaluator, Mark, Score, Explanation string
	// TraceURL is the evaluation's trace.
	TraceURL      string
	Pass, Missing bool
}

// ResultRow is one example of an experiment beside its baseline.
type ResultRow struct {
	N                        int
	Input, Output, Error     string
	RunStatus, RunURL, RunID string
	// Verdict is pass, fail, regression, fixed, pending or running.
	Verdict string
	Cells   []ScoreCell
	// BaselineVerdict is pass or fail ("" without a baseline); DiffURL compares the two runs.
	BaselineVerdict, DiffURL string
}

// TotalsRow sums up an experiment, or its baseline over the shared examples.
type TotalsRow struct {
	Label, Passed, PassRate, MeanScore, Tokens, Cost, P50, P95 string
	// Evaluators are the per-evaluator pass rates, in the experiment's order.
	Evaluators []string
}

// ExperimentPage is an experiment's page: progress, totals against the baseline, and the examples
// × evaluators, regressions first.
type ExperimentPage struct {
	Page
	ID, Name, Dataset, DatasetURL, Action, Tools, Status string
	DatasetVersion, Scored, Started, Total               int
	Evaluators                                           []string
	Running                                              bool
	Totals                                               []TotalsRow
	Baseline, BaselineURL                                string
	Regressions, Fixed                                   int
	Rows                                                 []ResultRow
	// Others are the experiments of the same dataset to compare with.
	Others []ExperimentRow
}

// PickedRun is one run ticked in the runs list, to be added to a dataset.
type PickedRun struct {
	ID, Short, Action, Status, Input string
}

// FromRunsPage adds the runs ticked in the runs list to a dataset.
type FromRunsPage struct {
	Page
	Runs       []PickedRun
	Datasets   []string
	NewName    string
	Flash      string
	FlashError bool
}
