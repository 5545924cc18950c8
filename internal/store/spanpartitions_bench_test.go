package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
)

// BenchmarkSpanIngestPartitions measures ingest with few and with many day partitions of spans
// kept (a store that keeps a year of traces keeps 400): batches of 20 new spans (the fast path's
// COPY), and Genkit's realtime shape, groups of 4 spans sent started then ended (the merge), in
// spans/s. Ingest must not slow with the partitions kept: each statement that plans a read of
// spans without pruning it plans every partition.
//
//	go test ./internal/store -run '^$' -bench SpanIngestPartitions -benchtime 5x
func BenchmarkSpanIngestPartitions(b *testing.B) {
	ctx := context.Background()
	for _, days := range []int{3, 400} {
		st := storetest.New(b)
		now := time.Now()
		_, err := st.SpanPartitionsEnsure(ctx, now.Add(-time.Duration(days-3)*store.SpanPartitionDay), now, store.SpanPartitionsDaily)
		require.NoError(b, err)
		for _, mode := range []string{"new20", "realtime4"} {
			b.Run(fmt.Sprintf("partitions=%d/%s", days, mode), func(b *testing.B) {
				const total = 4000
				for b.Loop() {
					spans := benchSpans(total, 20)
					start := time.Now().UnixNano()
					for i := range spans {
						spans[i].StartTime, spans[i].EndTime = start+int64(i), start+int64(i)+5
					}
					for i := 0; i < total; i += map[string]int{"new20": 20, "realtime4": 4}[mode] {
						var err error
						if mode == "new20" {
							_, err = st.SpanIngest(ctx, spans[i:i+20])
						} else {
							group := append([]store.Span(nil), spans[i:i+4]...)
							for j := range group {
								group[j].EndTime = 0
							}
							if _, err = st.SpanIngest(ctx, group); err == nil {
								_, err = st.SpanIngest(ctx, spans[i:i+4])
							}
						}
						require.NoError(b, err)
					}
				}
				b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "spans/s")
			})
		}
	}
}
