package experiments_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// BenchmarkExperiment1000 runs an experiment of 1,000 examples of the 3-turn shop flow (a lookup,
// a refund a person approved, an answer), every tool answered from the recording and every
// approval applied from it, scored by two built-in evaluators (trajectory and exact), with 32 runs
// at once on 32 workers. It reports examples/s. Ten runs are recorded; the examples cycle over
// them.
func BenchmarkExperiment1000(b *testing.B) {
	const examples = 1000
	h := &harness{st: store.New(storetest.NewPool(b)), shop: defineShop(nil)}
	var err error
	h.runs, err = runs.New(runs.Config{Workers: 32, LeaseTTL: 5 * time.Second}, h.st, h.shop.reg)
	require.NoError(b, err)
	require.NoError(b, h.runs.Start(context.Background()))
	b.Cleanup(h.runs.Stop)
	h.exp = experiments.New(experiments.Config{LeaseTTL: 5 * time.Second}, h.st, h.runs)
	ctx := context.Background()
	recordings := h.recordRunsB(b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	ten, err := h.exp.FromRunIDs(ctx, recordings)
	require.NoError(b, err)
	all := make([]store.ExampleParams, 0, examples)
	for len(all) < examples {
		all = append(all, ten...)
	}
	_, err = h.exp.CreateDataset(ctx, "bench", "", "bench", all)
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		began := time.Now()
		e, err := h.exp.Start(ctx, experiments.StartParams{Dataset: "bench", Action: "/flow/shop", Concurrency: 32,
			Evaluators: []string{"trajectory", "exact"}})
		require.NoError(b, err)
		e, err = h.exp.Drive(ctx, e.ID, nil)
		require.NoError(b, err)
		require.Equal(b, examples, e.Passed, "every example passes")
		b.ReportMetric(float64(examples)/time.Since(began).Seconds(), "examples/s")
	}
}
