package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/eval"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/services"
	"github.com/loupe-dev/loupe/internal/store"
)

// The dataset and eval commands (README: "Datasets and experiments").

func newDatasetCommand(cfg *config) *cobra.Command {
	cmd := groupCommand("dataset", "Datasets of examples to run experiments on: made of stored runs or of a file, versioned")
	var (
		description, fromRuns, file string
		limit                       int
		eng                         engineOptions
	)
	examplesOf := func(cmd *cobra.Command, svc *experiments.Service) ([]store.ExampleParams, error) {
		var out []store.ExampleParams
		if file != "" {
			f, err := os.Open(file)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			ex, err := experiments.ParseExamples(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			out = append(out, ex...)
		}
		if cmd.Flags().Changed("from-runs") {
			p, err := experiments.ParseRunFilter(fromRuns)
			if err != nil {
				return nil, fmt.Errorf("--from-runs: %w", err)
			}
			ex, err := svc.FromRuns(cmd.Context(), p, limit)
			if err != nil {
				return nil, err
			}
			if len(ex) == 0 {
				return nil, fmt.Errorf("--from-runs %q: no ended run matches (%s runs list shows the runs)", fromRuns, cfg.program.name())
			}
			out = append(out, ex...)
		}
		return out, nil
	}
	create := &cobra.Command{
		Use:   "create NAME [--from-runs 'action=/flow/x&status=succeeded'] [--limit N] [--file examples.jsonl]",
		Short: "Make a dataset, of stored runs (their input, their output as the reference, their recording) and/or of a JSONL file or Genkit's eval:extractData output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			eng.workers = 0
			return withServices(cmd, cfg, eng, func(svcs *services.Services) error {
				examples, err := examplesOf(cmd, svcs.Experiments)
				if err != nil {
					return err
				}
				d, err := svcs.Experiments.CreateDataset(cmd.Context(), args[0], description, cliActor(), examples)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "dataset %s: version %d, %d examples\n", d.Name, d.Version, d.Examples)
				return nil
			})
		},
	}
	create.Flags().StringVar(&description, "description", "", "what the dataset is for")
	add := &cobra.Command{
		Use:   "add NAME [--from-runs FILTER] [--limit N] [--file examples.jsonl]",
		Short: "Add examples to a dataset, as its next version",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" && !cmd.Flags().Changed("from-runs") {
				return errors.New("add what? give --file or --from-runs")
			}
			eng.workers = 0
			return withServices(cmd, cfg, eng, func(svcs *services.Services) error {
				d, err := svcs.Experiments.Dataset(cmd.Context(), args[0])
				if err != nil {
					return datasetNotFound(cfg, args[0], err)
				}
				examples, err := examplesOf(cmd, svcs.Experiments)
				if err != nil {
					return err
				}
				v, err := svcs.Experiments.Change(cmd.Context(), d, store.DatasetChange{Add: examples, By: cliActor()})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "dataset %s: version %d, %d examples added\n", d.Name, v, len(examples))
				return nil
			})
		},
	}
	for _, c := range []*cobra.Command{create, add} {
		c.Flags().StringVar(&fromRuns, "from-runs", "", "the stored runs to make examples of, as the runs list's query: action=/flow/x&status=succeeded&since=24h (also model, q, session, until); in-flight runs are left out")
		c.Flags().IntVar(&limit, "limit", 200, "at most this many runs, newest first")
		c.Flags().StringVar(&file, "file", "", "examples from a file: JSONL ({\"input\", \"reference\", \"tags\", \"source_run_id\"} a line) or a JSON array such as genkit eval:extractData writes")
		eng.bind(c.Flags(), 0)
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the datasets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, cfg, func(st *store.Store) error {
				list, err := st.DatasetList(cmd.Context())
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tVERSION\tEXAMPLES\tUPDATED\tDESCRIPTION")
				for _, d := range list {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", d.Name, d.Version, d.Examples, d.UpdatedAt.Format(time.DateTime), d.Description)
				}
				return tw.Flush()
			})
		},
	}
	var version int
	show := &cobra.Command{
		Use:   "show NAME [--version N]",
		Short: "Print a dataset's examples as JSONL (the form dataset create --file reads)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, cfg, func(st *store.Store) error {
				d, err := st.DatasetGet(cmd.Context(), args[0])
				if err != nil {
					return datasetNotFound(cfg, args[0], err)
				}
				v := version
				if v == 0 {
					v = d.Version
				}
				if v < 1 || v > d.Version {
					return fmt.Errorf("--version %d: dataset %s has versions 1 to %d", version, d.Name, d.Version)
				}
				examples, err := st.ExampleList(cmd.Context(), d.ID, v)
				if err != nil {
					return err
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				for _, e := range examples {
					if err := enc.Encode(map[string]any{"key": e.Key, "input": e.Input, "reference": e.Reference, "tags": e.Tags,
						"source_run_id": e.SourceRunID}); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	show.Flags().IntVar(&version, "version", 0, "the version to print (default: the current one)")
	cmd.AddCommand(create, add, list, show)
	return cmd
}

func datasetNotFound(cfg *config, name string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no dataset %q (%s dataset list lists them)", name, cfg.program.name())
	}
	return err
}

// evalRunOptions are the flags of eval run.
type evalRunOptions struct {
	name, dataset, action, tools, model, baseline, prices string
	version, concurrency                                  int
	evaluators                                            []string
	minPassRate                                           float64
	asJSON, quiet                                         bool
	eng                                                   engineOptions
}

func newEvalCommand(cfg *config) *cobra.Command {
	cmd := groupCommand("eval", "Experiments: run an action over a dataset, score it with evaluators, compare it with a baseline")
	var o evalRunOptions
	run := &cobra.Command{
		Use:   "run --dataset NAME --action ACTION --evaluator NAME[:ARG]... [--baseline EXPERIMENT] [--min-pass-rate 0.95]",
		Short: "Run an action over a dataset as an experiment (each example a durable run, its tools served from its recording), score it and print a table; exits 4 on a regression or a pass rate below --min-pass-rate",
		Long: `Run an action over a dataset as an experiment: each example is a durable run of its own,
labelled with the experiment, executed by this process (and any worker of the program).

By default (--tools recorded) every tool call is served from the recording of the run the example
came from, and every interrupt gets the reviewer's recorded decision: an experiment never repeats
an effect. A call the recording does not have fails its example ("not in the recording"); with
--tools live the tools run for real.

Evaluators: ` + strings.Join(eval.BuiltinNames(), ", ") + `, the program's own, and a
running Genkit app's as APP:/evaluator/NAME (devui eval evaluators lists them). Some take an argument: regex:^Booked, latency:2s, tokens:5000,
turns:3, judge:MODEL, contains:TEXT, schema:{...} or schema:@FILE.

Exit status: 0 when the experiment passed, 4 when an example that passed in --baseline fails now
or the pass rate is below --min-pass-rate, 1 on any other error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return evalRun(cmd, cfg, &o) },
	}
	run.Flags().StringVar(&o.name, "name", "", "the experiment's name (default: the dataset's and the time)")
	run.Flags().StringVar(&o.dataset, "dataset", "", "the dataset (required)")
	run.Flags().IntVar(&o.version, "version", 0, "the dataset's version (default: the current one)")
	run.Flags().StringVar(&o.action, "action", "", "the action to run on each example's input: a flow's name or a key such as /flow/x (required)")
	run.Flags().StringArrayVar(&o.evaluators, "evaluator", nil, "an evaluator, NAME or NAME:ARG (repeatable, at least one)")
	run.Flags().StringVar(&o.tools, "tools", store.ReplayToolsRecorded, "recorded: tools answered from each example's recording; live: tools run for real")
	run.Flags().StringVar(&o.model, "model", "", "run with this model instead of the flow's")
	run.Flags().IntVar(&o.concurrency, "concurrency", 4, "examples run at once, 1 to 256")
	run.Flags().StringVar(&o.baseline, "baseline", "", "an experiment (id, or name: its newest) to compare with; a regression exits 4")
	run.Flags().Float64Var(&o.minPassRate, "min-pass-rate", 0, "exit 4 when fewer examples than this share (0 to 1) pass every evaluator")
	run.Flags().BoolVar(&o.asJSON, "json", false, "print the summary as JSON instead of a table")
	run.Flags().BoolVar(&o.quiet, "quiet", false, "no progress line on stderr")
	run.Flags().StringVar(&o.prices, "prices", os.Getenv("LOUPE_PRICES"), "model prices for the cost column (as serve --prices; env LOUPE_PRICES)")
	o.eng.bind(run.Flags(), 4)

	var showBaseline string
	var showJSON bool
	show := &cobra.Command{
		Use:   "show EXPERIMENT [--baseline EXPERIMENT] [--json]",
		Short: "Print an experiment's table: totals and each example's scores, regressions first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			eng := engineOptions{}
			return withServices(cmd, cfg, eng, func(svcs *services.Services) error {
				e, err := svcs.Experiments.Experiment(cmd.Context(), args[0])
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("no experiment %q (%s eval list lists them)", args[0], cfg.program.name())
				}
				if err != nil {
					return err
				}
				sum, err := svcs.Experiments.Summarise(cmd.Context(), e, showBaseline)
				if err != nil {
					return err
				}
				return printSummary(cmd.OutOrStdout(), sum, showJSON)
			})
		},
	}
	show.Flags().StringVar(&showBaseline, "baseline", "", "compare with this experiment instead of the one it ran against")
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the experiments, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, cfg, func(st *store.Store) error {
				list, err := st.ExperimentList(cmd.Context(), nil, 100)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tACTION\tSTATUS\tSCORED\tSTARTED")
				for _, e := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", e.ID, e.Name, e.Action, e.Status, e.Scored, e.Total, e.CreatedAt.Format(time.DateTime))
				}
				return tw.Flush()
			})
		},
	}
	evaluators := &cobra.Command{
		Use:   "evaluators",
		Short: "List the evaluators: the built-ins, this program's own and the running Genkit apps'",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withServices(cmd, cfg, engineOptions{}, func(svcs *services.Services) error {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "EVALUATOR\tKIND\tWHAT IT CHECKS")
				evs, err := svcs.Experiments.AllEvaluators(cmd.Context())
				if err != nil {
					return err
				}
				for _, ev := range evs {
					kind := "built-in"
					switch {
					case ev.App != "":
						kind = "genkit app"
					case !ev.Builtin:
						kind = "program"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", ev.Name, kind, ev.Description)
				}
				return tw.Flush()
			})
		},
	}
	cmd.AddCommand(run, show, list, evaluators)
	return cmd
}

// evalRun starts an experiment and drives it here, printing progress, then its table.
func evalRun(cmd *cobra.Command, cfg *config, o *evalRunOptions) error {
	if o.dataset == "" || o.action == "" || len(o.evaluators) == 0 {
		return errors.New("eval run needs --dataset, --action and one --evaluator at least, as in: eval run --dataset shop --action /flow/shop --evaluator trajectory --evaluator exact")
	}
	if o.minPassRate < 0 || o.minPassRate > 1 {
		return fmt.Errorf("--min-pass-rate %v: want a share from 0 to 1, such as 0.95", o.minPassRate)
	}
	if o.eng.workers < 1 {
		return errors.New("--workers must be at least 1: eval run executes the examples' runs")
	}
	specs := make([]string, len(o.evaluators))
	for i, spec := range o.evaluators {
		sp := eval.ParseSpec(spec)
		if sp.Name == "schema" && strings.HasPrefix(sp.Arg, "@") {
			raw, err := os.ReadFile(sp.Arg[1:])
			if err != nil {
				return fmt.Errorf("--evaluator %s: %w", spec, err)
			}
			sp.Arg = strings.TrimSpace(string(raw))
		}
		specs[i] = sp.String()
	}
	table, err := loadPrices(o.prices)
	if err != nil {
		return err
	}
	return withDatabase(cmd.Context(), cfg, true, func(db *database, log *slog.Logger) error {
		sc, err := servicesConfig(cfg.program, o.eng, db.pool, log)
		if err != nil {
			return err
		}
		sc.Experiments.Prices = table
		svcs, err := services.Start(cmd.Context(), sc)
		if err != nil {
			return err
		}
		defer svcs.Stop()
		var overrides *runs.Overrides
		if o.model != "" {
			overrides = &runs.Overrides{Model: o.model}
		}
		e, err := svcs.Experiments.Start(cmd.Context(), experiments.StartParams{Name: o.name, Dataset: o.dataset, Version: o.version,
			Action: o.action, Evaluators: specs, Tools: o.tools, Overrides: overrides, Concurrency: o.concurrency,
			Baseline: o.baseline, CreatedBy: cliActor()})
		if err != nil {
			return err
		}
		info := cmd.ErrOrStderr()
		fmt.Fprintf(info, "experiment %s (%s): %d examples of %s v%d, tools %s\n", e.Name, e.ID, e.Total, o.dataset, e.DatasetVersion, e.Tools)
		progress := func(cur *store.Experiment) {
			if !o.quiet {
				fmt.Fprintf(info, "\r%s %d/%d scored, %d started ", bar(cur.Scored, cur.Total, 30), cur.Scored, cur.Total, cur.Started)
			}
		}
		e, err = svcs.Experiments.Drive(cmd.Context(), e.ID, progress)
		if !o.quiet {
			fmt.Fprintln(info)
		}
		if err != nil {
			return err
		}
		sum, err := svcs.Experiments.Summarise(cmd.Context(), e, "")
		if err != nil {
			return err
		}
		if err := printSummary(cmd.OutOrStdout(), sum, o.asJSON); err != nil {
			return err
		}
		return gate(sum, o.minPassRate)
	})
}

// gate is eval run's verdict for CI: an exit status of 4 on a regression against the baseline or
// a pass rate under the minimum.
func gate(sum *experiments.Summary, minPassRate float64) error {
	var why []string
	if sum.Regressions > 0 {
		why = append(why, fmt.Sprintf("%d examples that passed in %s fail now", sum.Regressions, sum.Baseline.Name))
	}
	if sum.Totals.PassRate < minPassRate {
		why = append(why, fmt.Sprintf("pass rate %.3f is under --min-pass-rate %.3f", sum.Totals.PassRate, minPassRate))
	}
	if sum.Experiment.Status != store.ExperimentFinished {
		why = append(why, "the experiment did not finish: "+sum.Experiment.Status)
	}
	if len(why) == 0 {
		return nil
	}
	return &exitError{code: 4, msg: "eval: " + strings.Join(why, "; ")}
}

// bar draws a progress bar of width cells.
func bar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = done * width / total
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// printSummary prints an experiment as JSON or as a table: totals, the baseline's beside them,
// then every example (regressions first) with each evaluator's verdict.
func printSummary(w io.Writer, sum *experiments.Summary, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	e, t := sum.Experiment, sum.Totals
	fmt.Fprintf(w, "experiment %s (%s) on %s v%d: %s, %d/%d scored\n", e.Name, e.ID, sum.Dataset.Name, e.DatasetVersion, e.Status, t.Scored, t.Examples)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tPASSED\tPASS RATE\tMEAN SCORE\tTOKENS\tCOST\tP50\tP95")
	totalsRow := func(name string, t *experiments.Totals) {
		fmt.Fprintf(tw, "%s\t%d/%d\t%.3f\t%s\t%d\t%s\t%s\t%s\n", name, t.Passed, t.Scored, t.PassRate, optFloat(t.MeanScore, "%.3f"),
			t.InputTokens+t.OutputTokens, optFloat(t.CostUSD, "$%.4f"), optMs(t.P50Ms), optMs(t.P95Ms))
	}
	totalsRow("this", &sum.Totals)
	if sum.BaselineTotals != nil {
		totalsRow("baseline "+sum.Baseline.Name, sum.BaselineTotals)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if sum.Baseline != nil {
		fmt.Fprintf(w, "against %s: %d regressions, %d fixed\n", sum.Baseline.Name, sum.Regressions, sum.Fixed)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	head := "#\tRUN\tSTATUS\tVERDICT"
	for _, ev := range e.Evaluators {
		head += "\t" + strings.ToUpper(ev)
	}
	fmt.Fprintln(tw, head)
	for _, r := range sum.Rows {
		verdict := "fail"
		switch {
		case r.Status != store.ResultScored:
			verdict = r.Status
		case r.Regression:
			verdict = "REGRESSION"
		case r.Fixed:
			verdict = "fixed"
		case r.Pass:
			verdict = "pass"
		}
		runID, status := "-", "-"
		if r.RunID != nil {
			runID = shortRunID(*r.RunID)
		}
		if r.RunStatus != nil {
			status = *r.RunStatus
		}
		line := fmt.Sprintf("%d\t%s\t%s\t%s", r.Ord+1, runID, status, verdict)
		for _, ev := range e.Evaluators {
			line += "\t" + scoreCell(r.Scores, ev)
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The first failure's explanation of each failing example: what a CI log reader needs.
	for _, r := range sum.Rows {
		if r.RunStatus != nil && *r.RunStatus != store.RunSucceeded && r.Error != nil {
			fmt.Fprintf(w, "#%d the run ended %s: %s\n", r.Ord+1, *r.RunStatus, store.Shorten(*r.Error, 300))
		}
		for _, sc := range r.Scores {
			if !sc.Pass && r.Status == store.ResultScored {
				fmt.Fprintf(w, "#%d %s: %s\n", r.Ord+1, sc.Evaluator, sc.Explanation)
				break
			}
		}
	}
	return nil
}

func scoreCell(scores []store.Score, evaluator string) string {
	for _, sc := range scores {
		if sc.Evaluator == evaluator {
			mark := "✗"
			if sc.Pass {
				mark = "✓"
			}
			if sc.Score != nil {
				return fmt.Sprintf("%s %.2f", mark, *sc.Score)
			}
			return mark
		}
	}
	return "-"
}

func optFloat(v *float64, format string) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf(format, *v)
}

func optMs(v *int64) string {
	if v == nil {
		return "—"
	}
	return (time.Duration(*v) * time.Millisecond).String()
}
