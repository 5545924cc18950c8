package experiments

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/google/uuid"

	"github.com/loupe-dev/loupe/internal/store"
)

// Totals sum up an experiment's scored examples.
type Totals struct {
	Examples int `json:"examples"`
	Scored   int `json:"scored"`
	// Passed counts the examples every evaluator passed; PassRate is Passed / Scored.
	Passed       int                       `json:"passed"`
	PassRate     float64                   `json:"pass_rate"`
	MeanScore    *float64                  `json:"mean_score,omitempty"`
	Evaluators   map[string]EvaluatorTotal `json:"evaluators"`
	InputTokens  int64                     `json:"input_tokens"`
	OutputTokens int64                     `json:"output_tokens"`
	CostUSD      *float64                  `json:"cost_usd,omitempty"`
	P50Ms        *int64                    `json:"p50_ms,omitempty"`
	P95Ms        *int64                    `json:"p95_ms,omitempty"`
}

// EvaluatorTotal is one evaluator's pass rate and mean score over the scored examples.
type EvaluatorTotal struct {
	Passed    int      `json:"passed"`
	PassRate  float64  `json:"pass_rate"`
	MeanScore *float64 `json:"mean_score,omitempty"`
}

// Row is one example of an experiment beside the same example (by key) of its baseline.
type Row struct {
	*store.Result
	Pass     bool          `json:"pass"`
	Baseline *store.Result `json:"baseline,omitempty"`
	// Regression: the baseline passed the example and this experiment fails it; Fixed: the reverse.
	Regression bool `json:"regression"`
	Fixed      bool `json:"fixed"`
}

// Summary is an experiment's page: totals, and its examples, regressions first.
type Summary struct {
	Experiment *store.Experiment `json:"experiment"`
	Dataset    *store.Dataset    `json:"dataset"`
	Totals     Totals            `json:"totals"`
	Baseline   *store.Experiment `json:"baseline,omitempty"`
	// BaselineTotals sum the baseline up over the examples both experiments share.
	BaselineTotals *Totals `json:"baseline_totals,omitempty"`
	Regressions    int     `json:"regressions"`
	Fixed          int     `json:"fixed"`
	Rows           []*Row  `json:"rows"`
}

// Summarise builds an experiment's summary, against baselineRef (an experiment's id or name; empty:
// the baseline it was started with).
func (s *Service) Summarise(ctx context.Context, e *store.Experiment, baselineRef string) (*Summary, error) {
	results, err := s.store.ResultList(ctx, e.ID)
	if err != nil {
		return nil, err
	}
	d, err := s.store.DatasetGetByID(ctx, e.DatasetID)
	if err != nil {
		return nil, err
	}
	sum := &Summary{Experiment: e, Dataset: d, Totals: totals(results, len(e.Evaluators))}
	var base *store.Experiment
	switch {
	case baselineRef != "":
		if base, err = s.Experiment(ctx, baselineRef); errors.Is(err, store.ErrNotFound) {
			return nil, &InvalidError{Field: "baseline", Message: "no experiment " + baselineRef}
		} else if err != nil {
			return nil, err
		}
	case e.BaselineID != nil:
		if base, err = s.store.ExperimentGet(ctx, *e.BaselineID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	byKey := map[uuid.UUID]*store.Result{}
	if base != nil && base.ID != e.ID {
		sum.Baseline = base
		bres, err := s.store.ResultList(ctx, base.ID)
		if err != nil {
			return nil, err
		}
		for _, r := range bres {
			byKey[r.ExampleKey] = r
		}
	}
	var shared []*store.Result
	for _, r := range results {
		row := &Row{Result: r, Pass: passed(r, len(e.Evaluators))}
		if b := byKey[r.ExampleKey]; b != nil {
			row.Baseline = b
			shared = append(shared, b)
			if r.Status == store.ResultScored && b.Status == store.ResultScored {
				bp := passed(b, len(sum.Baseline.Evaluators))
				row.Regression, row.Fixed = bp && !row.Pass, !bp && row.Pass
			}
		}
		if row.Regression {
			sum.Regressions++
		}
		if row.Fixed {
			sum.Fixed++
		}
		sum.Rows = append(sum.Rows, row)
	}
	if sum.Baseline != nil {
		t := totals(shared, len(sum.Baseline.Evaluators))
		sum.BaselineTotals = &t
	}
	sort.SliceStable(sum.Rows, func(i, j int) bool {
		a, b := sum.Rows[i], sum.Rows[j]
		if a.Regression != b.Regression {
			return a.Regression
		}
		return a.Ord < b.Ord
	})
	return sum, nil
}

// passed says whether every evaluator scored the example and passed it.
func passed(r *store.Result, evaluators int) bool {
	if r.Status != store.ResultScored || len(r.Scores) < evaluators {
		return false
	}
	for _, sc := range r.Scores {
		if !sc.Pass {
			return false
		}
	}
	return true
}

func totals(results []*store.Result, evaluators int) Totals {
	t := Totals{Examples: len(results), Evaluators: map[string]EvaluatorTotal{}}
	var (
		scoreSum, cost float64
		scoreN         int
		priced         = true
		lat            []int64
		evSum          = map[string]float64{}
		evN            = map[string]int{}
	)
	for _, r := range results {
		if r.Status != store.ResultScored {
			continue
		}
		t.Scored++
		if passed(r, evaluators) {
			t.Passed++
		}
		for _, sc := range r.Scores {
			et := t.Evaluators[sc.Evaluator]
			if sc.Pass {
				et.Passed++
			}
			t.Evaluators[sc.Evaluator] = et
			if sc.Score != nil {
				scoreSum += *sc.Score
				scoreN++
				evSum[sc.Evaluator] += *sc.Score
				evN[sc.Evaluator]++
			}
		}
		if r.InputTokens != nil {
			t.InputTokens += *r.InputTokens
		}
		if r.OutputTokens != nil {
			t.OutputTokens += *r.OutputTokens
		}
		if r.CostUSD != nil {
			cost += *r.CostUSD
		} else if r.InputTokens != nil && *r.InputTokens+*r.OutputTokens > 0 {
			priced = false
		}
		if r.LatencyMs != nil {
			lat = append(lat, *r.LatencyMs)
		}
	}
	if t.Scored > 0 {
		t.PassRate = float64(t.Passed) / float64(t.Scored)
		for name, et := range t.Evaluators {
			et.PassRate = float64(et.Passed) / float64(t.Scored)
			if n := evN[name]; n > 0 {
				m := evSum[name] / float64(n)
				et.MeanScore = &m
			}
			t.Evaluators[name] = et
		}
		if priced {
			t.CostUSD = &cost
		}
	}
	if scoreN > 0 {
		m := scoreSum / float64(scoreN)
		t.MeanScore = &m
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		p50, p95 := lat[(len(lat)-1)*50/100], lat[(len(lat)-1)*95/100]
		t.P50Ms, t.P95Ms = &p50, &p95
	}
	return t
}
