package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// seedExperiment stores a scored experiment of a dataset's examples straight through the store:
// each example failed by the evaluators whose index divides it (a mix of passes and failures).
func seedExperiment(b *testing.B, st *store.Store, d *store.Dataset, name string, evaluators []string, baseline *store.Experiment, failEvery int) *store.Experiment {
	ctx := context.Background()
	examples, err := st.ExampleList(ctx, d.ID, d.Version)
	require.NoError(b, err)
	var e *store.Experiment
	p := store.ExperimentCreateParams{Name: name, DatasetID: d.ID, DatasetVersion: d.Version, Action: "/flow/travelAgent",
		Evaluators: evaluators, Tools: store.ReplayToolsRecorded, Concurrency: 4, Examples: examples}
	if baseline != nil {
		p.BaselineID = &baseline.ID
	}
	require.NoError(b, st.WithTx(ctx, func(tx *store.Store) error {
		e, err = tx.ExperimentCreate(ctx, p)
		return err
	}))
	for i, ex := range examples {
		run, err := st.RunCreate(ctx, store.RunCreateParams{Action: "/flow/travelAgent", Input: ex.Input, CreatedBy: "bench"})
		require.NoError(b, err)
		_, err = st.ResultStart(ctx, e.ID, ex.ID, run.ID)
		require.NoError(b, err)
		lat := int64(100 + i%50)
		sp := store.ResultScoreParams{ExperimentID: e.ID, ExampleID: ex.ID, RunStatus: store.RunSucceeded,
			Output: json.RawMessage(`"You're booked to Lisbon"`), LatencyMs: &lat, InputTokens: 300, OutputTokens: 60}
		for j, ev := range evaluators {
			score := 1.0
			pass := i%failEvery != j
			if !pass {
				score = 0.25
			}
			sp.Scores = append(sp.Scores, store.Score{Evaluator: ev, Score: &score, Pass: pass, Explanation: "call 2: the reference run made book {\"id\":1}, this run book {\"id\":2}"})
		}
		_, err = st.ResultScore(ctx, sp)
		require.NoError(b, err)
	}
	require.NoError(b, st.ExperimentEnd(ctx, e.ID, store.ExperimentFinished))
	e, err = st.ExperimentGet(ctx, e.ID)
	require.NoError(b, err)
	return e
}

// BenchmarkExperimentPage1000x3 serves the page of an experiment of 1,000 examples × 3 evaluators
// against a baseline of the same 1,000: totals, regressions first, every cell.
func BenchmarkExperimentPage1000x3(b *testing.B) {
	bd := setup(b, opts{dev: true, runs: true})
	ctx := context.Background()
	examples := make([]store.ExampleParams, 1000)
	for i := range examples {
		examples[i] = store.ExampleParams{Input: json.RawMessage(fmt.Sprintf(`{"destination":"city %d"}`, i)), Reference: json.RawMessage(`"booked"`)}
	}
	d, err := bd.srv.deps.Experiments.CreateDataset(ctx, "bench", "", "bench", examples)
	require.NoError(b, err)
	evaluators := []string{"exact", "trajectory", "latency:2s"}
	base := seedExperiment(b, bd.store, d, "base", evaluators, nil, 17)
	e := seedExperiment(b, bd.store, d, "other", evaluators, base, 7)
	url := bd.url + "/experiments/" + e.ID.String()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/html")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(b, err)
		resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode)
	}
}
