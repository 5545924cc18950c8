package live_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/store"
)

// BenchmarkChunkLatency measures chunk-to-subscriber latency on loopback: 100 WebSocket
// subscribers on one run while a producer writes 5,000 chunks/s the way the recorder does (a COPY
// every 10 ms, then one run.chunks event). Each chunk carries its write time; latency is from just
// before the COPY to the subscriber decoding it. One iteration runs for 3 seconds; run it with
// -benchtime=1x.
//
//	go test ./internal/live -run '^$' -bench ChunkLatency -benchtime=1x -benchmem
func BenchmarkChunkLatency(b *testing.B) {
	const (
		subscribers = 100
		perSecond   = 5000
		tick        = 10 * time.Millisecond
		duration    = 3 * time.Second
	)
	bu := setup(b)
	hub, url := startHub(b, bu.pool, live.Config{})
	runID := bu.newRun(b)
	perTick := perSecond * int(tick) / int(time.Second)

	for range b.N {
		var (
			mu        sync.Mutex
			latencies []time.Duration
			wg        sync.WaitGroup
		)
		total := int(duration/tick) * perTick
		ready := make(chan struct{}, subscribers)
		for range subscribers {
			conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
			require.NoError(b, err)
			resp.Body.Close()
			require.NoError(b, conn.WriteJSON(live.Request{Type: "subscribe", Topic: "run:" + runID.String(), After: 0}))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				local := make([]time.Duration, 0, total)
				seen := 0
				for seen < total {
					_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
					var m struct {
						Kind string `json:"kind"`
						Data struct {
							Chunks []struct {
								Content struct {
									T int64 `json:"t"`
								} `json:"content"`
							} `json:"chunks"`
						} `json:"data"`
					}
					if err := conn.ReadJSON(&m); err != nil {
						break
					}
					if m.Kind == live.KindSnapshot {
						ready <- struct{}{}
						continue
					}
					now := time.Now().UnixNano()
					for _, c := range m.Data.Chunks {
						local = append(local, time.Duration(now-c.Content.T))
					}
					seen += len(m.Data.Chunks)
				}
				mu.Lock()
				latencies = append(latencies, local...)
				mu.Unlock()
			}()
		}
		for range subscribers {
			<-ready
		}
		b.ResetTimer()
		seq := int64(0)
		ctx := context.Background()
		t := time.NewTicker(tick)
		for range int(duration / tick) {
			<-t.C
			now := time.Now().UnixNano()
			batch := make([]store.RunChunk, perTick)
			for i := range batch {
				seq++
				batch[i] = store.RunChunk{RunID: runID, Seq: seq, Role: "model", Content: json.RawMessage(fmt.Sprintf(`{"t":%d,"text":"token "}`, now))}
			}
			require.NoError(b, bu.store.ChunkInsert(ctx, batch))
			hub.Publish(runID, "run.chunks", map[string]any{"last_seq": seq})
		}
		t.Stop()
		wg.Wait()
		b.StopTimer()
		require.Equal(b, 0, int(hub.Dropped.Load()), "no subscriber may be dropped at this rate")
		slices.Sort(latencies)
		require.Len(b, latencies, subscribers*total, "every subscriber got every chunk")
		pct := func(p float64) float64 { return float64(latencies[int(p*float64(len(latencies)-1))]) / 1e6 }
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(pct(1), "max-ms")
		b.ReportMetric(float64(len(latencies))/duration.Seconds(), "deliveries/s")
	}
}
