package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/eval"
	"github.com/loupe-dev/loupe/internal/genkitapp"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// Progress is reported by Drive after every step: how many examples were started and scored.
type Progress func(e *store.Experiment)

// Drive runs an experiment to its end in this process: it takes the experiment's lease (waiting
// while another live driver holds it), starts its examples' runs, at most its concurrency at
// once, and scores each run when it ends. It returns when every example is scored, or ctx ends
// (the lease is given up and another driver may go on).
func (s *Service) Drive(ctx context.Context, id uuid.UUID, progress Progress) (*store.Experiment, error) {
	for {
		e, err := s.store.ExperimentClaim(ctx, id, s.owner, s.cfg.LeaseTTL)
		if err != nil {
			return nil, err
		}
		if e != nil {
			return s.drive(ctx, e, progress)
		}
		cur, err := s.store.ExperimentGet(ctx, id)
		if err != nil {
			return nil, err
		}
		if cur.Status != store.ExperimentRunning {
			return cur, nil
		}
		if progress != nil {
			progress(cur)
		}
		select {
		case <-ctx.Done():
			return cur, ctx.Err()
		case <-time.After(s.cfg.LeaseTTL / 3):
		}
	}
}

// RunDrivers drives, until ctx ends, every running experiment that no live process drives: those
// whose driver died (a `devui eval run` killed mid-way), and those started from the UI or the API.
func (s *Service) RunDrivers(ctx context.Context) {
	t := time.NewTicker(max(s.cfg.LeaseTTL/3, 100*time.Millisecond))
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		for {
			e, err := s.store.ExperimentClaim(ctx, uuid.Nil, s.owner, s.cfg.LeaseTTL)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("experiments: claim", "err", err)
				}
				break
			}
			if e == nil {
				break
			}
			wg.Go(func() {
				if _, err := s.drive(ctx, e, nil); err != nil && ctx.Err() == nil {
					s.log.Warn("experiments: drive", "experiment", e.ID, "err", err)
				}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) drive(ctx context.Context, e *store.Experiment, progress Progress) (*store.Experiment, error) {
	defer func() { _ = s.store.ExperimentRelease(context.WithoutCancel(ctx), e.ID, s.owner) }()
	var overrides *runs.Overrides
	if len(e.Overrides) > 0 {
		overrides = &runs.Overrides{}
		if err := json.Unmarshal(e.Overrides, overrides); err != nil {
			return nil, fmt.Errorf("experiment %s: decode overrides: %w", e.ID, err)
		}
	}
	specs := make([]eval.Spec, len(e.Evaluators))
	for i, sp := range e.Evaluators {
		specs[i] = eval.ParseSpec(sp)
	}
	renewed := time.Now()
	pub := s.progressPublisher(e.ID)
	for {
		if time.Since(renewed) > s.cfg.LeaseTTL/3 {
			ok, err := s.store.ExperimentRenew(ctx, e.ID, s.owner, s.cfg.LeaseTTL)
			if err != nil {
				return nil, err
			}
			if !ok {
				return s.store.ExperimentGet(ctx, e.ID) // cancelled, or taken over
			}
			renewed = time.Now()
		}
		// The ended runs are scored while the free places are filled: a batch being scored
		// holds no example back from starting.
		var scored, running, started int
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() (err error) {
			scored, err = s.scoreEnded(gctx, e, specs, pub)
			return err
		})
		g.Go(func() (err error) {
			if running, err = s.store.ResultsRunning(gctx, e.ID); err != nil {
				return err
			}
			if free := e.Concurrency - running; free > 0 {
				started, err = s.startSome(gctx, e, overrides, free)
			}
			return err
		})
		if err := g.Wait(); err != nil {
			return nil, err
		}
		if running == 0 && started == 0 && scored == 0 {
			cur, err := s.store.ExperimentGet(ctx, e.ID)
			if err != nil {
				return nil, err
			}
			if cur.Scored == cur.Total {
				if err := s.store.ExperimentEnd(ctx, e.ID, store.ExperimentFinished); err != nil {
					return nil, err
				}
				cur, err = s.store.ExperimentGet(ctx, e.ID)
				if err == nil {
					pub.flush(cur)
					if progress != nil {
						progress(cur)
					}
				}
				return cur, err
			}
		}
		if scored > 0 || started > 0 {
			pub.changed()
		}
		if progress != nil && (scored > 0 || started > 0) || pub.due() {
			if cur, err := s.store.ExperimentGet(ctx, e.ID); err == nil {
				if pub.due() {
					pub.flush(cur)
				}
				if progress != nil && (scored > 0 || started > 0) {
					progress(cur)
				}
			}
		}
		if scored == 0 && started == 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(s.cfg.Poll):
			}
		}
	}
}

// driverParallel is how many examples a driver starts, or scores, at once: each is a few round
// trips to the database, and one at a time they held an experiment to the pace of one connection.
const driverParallel = 8

// startSome starts up to n pending examples, each run and its result's start in one transaction,
// several at once.
func (s *Service) startSome(ctx context.Context, e *store.Experiment, overrides *runs.Overrides, n int) (int, error) {
	works, err := s.store.ResultsToStart(ctx, e.ID, n)
	if err != nil {
		return 0, err
	}
	var started atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(driverParallel)
	for _, w := range works {
		g.Go(func() error {
			ok, err := s.startOne(gctx, e, overrides, w)
			if ok {
				started.Add(1)
			}
			return err
		})
	}
	err = g.Wait()
	return int(started.Load()), err
}

// startOne starts one example's run, and reports whether it started it (or scored it as failed
// because it cannot run).
func (s *Service) startOne(ctx context.Context, e *store.Experiment, overrides *runs.Overrides, w *store.ResultWork) (bool, error) {
	// A recorded run deleted since leaves the example an empty recording (StartExperimentRun).
	_, err := s.runs.StartExperimentRun(ctx, runs.ExperimentRunParams{
		Action: e.Action, Input: w.Input, SourceRunID: w.SourceRunID, Tools: e.Tools, Overrides: overrides,
		Labels: map[string]string{store.LabelExperiment: e.ID.String()}, CreatedBy: "experiment " + e.Name,
		InTx: func(tx *store.Store, run *store.Run) error {
			ok, err := tx.ResultStart(ctx, e.ID, w.ExampleID, run.ID)
			if err == nil && !ok {
				err = errStartedAlready
			}
			return err
		},
	})
	switch {
	case errors.Is(err, errStartedAlready):
		return false, nil
	case errors.Is(err, runs.ErrInvalid):
		// The example cannot run (its input fails the action's schema): score it as failed.
		if serr := s.failExample(ctx, e, w.ExampleID, err); serr != nil {
			return false, serr
		}
	case err != nil:
		return false, err
	}
	return true, nil
}

var errStartedAlready = errors.New("example started already")

// failExample scores an example that could not run: every evaluator fails it.
// The start and the score are one transaction: the driver scores ended examples while it starts
// others, and must never see this one started with no run (it would score it as deleted).
func (s *Service) failExample(ctx context.Context, e *store.Experiment, exampleID uuid.UUID, cause error) error {
	scores := make([]store.Score, len(e.Evaluators))
	for i, name := range e.Evaluators {
		scores[i] = store.Score{Evaluator: name, Explanation: "the example could not run: " + cause.Error()}
	}
	return s.store.WithTx(ctx, func(tx *store.Store) error {
		if _, err := tx.ResultStart(ctx, e.ID, exampleID, uuid.Nil); err != nil {
			return err
		}
		_, err := tx.ResultScore(ctx, store.ResultScoreParams{ExperimentID: e.ID, ExampleID: exampleID, RunStatus: store.RunFailed,
			Error: cause.Error(), Scores: scores})
		return err
	})
}

// scoreEnded scores the examples whose run has ended, several at once, handing each to pub.
func (s *Service) scoreEnded(ctx context.Context, e *store.Experiment, specs []eval.Spec, pub *progressPub) (int, error) {
	exs, runIDs, err := s.store.ResultsEnded(ctx, e.ID, 64)
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	n := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(driverParallel)
	for i, ex := range exs {
		g.Go(func() error {
			p, err := s.score(gctx, e, specs, ex, runIDs[i])
			if err != nil {
				return err
			}
			if _, err := s.store.ResultScore(gctx, *p); err != nil {
				return err
			}
			mu.Lock()
			pub.scored(ex, runIDs[i], p)
			n++
			mu.Unlock()
			if p.RunStatus == store.RunInterrupted {
				// Scored as waiting for a person: the experiment is done with it, and its
				// question would wait in the reviewers' inbox for nobody.
				if _, err := s.runs.Cancel(gctx, *runIDs[i], "experiment "+e.Name); err != nil && !errors.Is(err, runs.ErrConflict) {
					s.log.Warn("experiments: cancel an example's run left waiting for a person", "run", *runIDs[i], "err", err)
				}
			}
			return nil
		})
	}
	err = g.Wait()
	return n, err
}

func (s *Service) score(ctx context.Context, e *store.Experiment, specs []eval.Spec, ex *store.Example, runID *uuid.UUID) (*store.ResultScoreParams, error) {
	p := &store.ResultScoreParams{ExperimentID: e.ID, ExampleID: ex.ID}
	var run *store.Run
	if runID != nil && *runID != uuid.Nil {
		r, err := s.store.RunGet(ctx, *runID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		run = r
	}
	if run == nil {
		p.RunStatus, p.Error = store.RunFailed, "the example's run was deleted"
		for _, sp := range specs {
			p.Scores = append(p.Scores, store.Score{Evaluator: sp.String(), Explanation: p.Error})
		}
		return p, nil
	}
	c, err := s.buildCase(ctx, ex, run)
	if err != nil {
		return nil, err
	}
	p.RunStatus, p.Output, p.Error = run.Status, run.Output, c.Error
	latency := c.LatencyMs
	p.LatencyMs, p.InputTokens, p.OutputTokens = &latency, run.InputTokens, run.OutputTokens
	if cost, ok := s.cfg.Prices.Cost(run.Usage); ok {
		p.CostUSD = &cost
	}
	ref := caseRef{testCaseID: ex.Key.String()}
	if run.TraceID != nil {
		ref.traceID = *run.TraceID
	}
	for _, sp := range specs {
		p.Scores = append(p.Scores, s.evaluate(ctx, e, sp, c, ref))
	}
	return p, nil
}

// buildCase reads what an evaluator is given about an example's run.
func (s *Service) buildCase(ctx context.Context, ex *store.Example, run *store.Run) (*eval.Case, error) {
	c := &eval.Case{Input: ex.Input, Reference: ex.Reference, Output: run.Output, Status: run.Status, Turns: run.Turns,
		InputTokens: run.InputTokens, OutputTokens: run.OutputTokens}
	if len(run.Error) > 0 {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(run.Error, &e) == nil && e.Message != "" {
			c.Error = e.Message
		} else {
			c.Error = string(run.Error)
		}
	}
	if run.StartedAt != nil {
		end := time.Now()
		if run.FinishedAt != nil {
			end = *run.FinishedAt
		} else if run.Status == store.RunInterrupted {
			end = run.UpdatedAt
		}
		c.LatencyMs = max(end.Sub(*run.StartedAt).Milliseconds()-run.WaitedMs, 0)
	}
	calls, err := s.store.ToolCallList(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	c.ToolCalls = trajectoryOf(calls)
	if ex.SourceRunID != nil {
		src, err := s.store.RunGet(ctx, *ex.SourceRunID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			c.ReferenceTurns = src.Turns
			ref, err := s.store.ToolCallList(ctx, src.ID)
			if err != nil {
				return nil, err
			}
			c.ReferenceToolCalls = trajectoryOf(ref)
		}
	}
	return c, nil
}

// trajectoryOf is a run's tool calls in order: by turn, and within a turn (whose calls run in
// parallel, in no set order) by tool and input.
func trajectoryOf(calls []*store.ToolCall) []eval.ToolCall {
	sorted := append([]*store.ToolCall(nil), calls...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Turn != b.Turn {
			return a.Turn < b.Turn
		}
		if a.Tool != b.Tool {
			return a.Tool < b.Tool
		}
		return string(a.Input) < string(b.Input)
	})
	out := make([]eval.ToolCall, len(sorted))
	for i, c := range sorted {
		out[i] = eval.ToolCall{Tool: c.Tool, Input: c.Input}
	}
	return out
}

// evaluate scores a case with one evaluator, in a span of its own (the evaluator's trace), or a
// Genkit app's evaluator in the app (the app's trace); an evaluator's error fails the example with
// the error as the explanation.
func (s *Service) evaluate(ctx context.Context, e *store.Experiment, sp eval.Spec, c *eval.Case, ref caseRef) store.Score {
	if genkitapp.IsEvaluatorKey(sp.Name) {
		return s.evaluateApp(ctx, e.ID, sp, c, ref)
	}
	out, _, _ := s.evaluateCase(ctx, e.ID, sp, c)
	return out
}

func (s *Service) evaluateDefined(ctx context.Context, name string, c *eval.Case) (*eval.Score, error) {
	in, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	raw, err := s.reg.Run(ctx, engine.ActionKey(engine.ActionTypeEvaluator, name), in, nil)
	if err != nil {
		return nil, err
	}
	var res eval.Score
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decode the score of evaluator %s: %w", name, err)
	}
	return &res, nil
}

// judge asks a registered model for a text answer.
func (s *Service) judge(ctx context.Context, model, prompt string) (string, error) {
	resp, err := engine.Generate(ctx, s.reg, engine.WithModelName(model), engine.WithPrompt(prompt))
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}
