package live_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/store"
)

// BenchmarkChunkLatency measures chunk-to-subscriber latency on loopback: 100 WebSocket
// subscribers on one run while a producer writes 5,000 chunks/s the way the recorder does (a COPY
// every 10 ms, then it publishes them). One iteration runs for 3 seconds; run it with -benchtime=1x.
//
// Two paths, in the same process: inprocess is what the runner does (PublishChunks hands the
// written chunks to the hub), readback is what another instance does (a run.chunks event, then
// the hub reads the chunks from the database).
//
// Metrics: p50-ms, p99-ms and max-ms run from the moment the COPY has returned (the chunks are
// durable and handed to the publish path) to the subscriber having decoded the message;
// write-p50-ms and write-p99-ms run from just before the COPY, so they include the write.
// chunks/s is the rate the producer really achieved.
//
//	go test ./internal/live -run '^$' -bench ChunkLatency -benchtime=1x -benchmem
func BenchmarkChunkLatency(b *testing.B) {
	for _, path := range []string{"inprocess", "readback"} {
		b.Run("path="+path, func(b *testing.B) { benchChunkLatency(b, path == "inprocess") })
	}
}

func benchChunkLatency(b *testing.B, inProcess bool) {
	const (
		subscribers = 100
		perSecond   = 5000
		tick        = 10 * time.Millisecond
		duration    = 3 * time.Second
		ticks       = int(duration / tick)
		perTick     = perSecond * int(tick) / int(time.Second)
		total       = ticks * perTick
	)
	bu := setup(b)
	hub, url := startHub(b, bu.pool, live.Config{})

	for range b.N {
		runID := bu.newRun(b)
		var (
			mu              sync.Mutex
			fromDurable     = make([]time.Duration, 0, subscribers*total)
			fromWrite       = make([]time.Duration, 0, subscribers*total)
			wg              sync.WaitGroup
			durable         [ticks]atomic.Int64 // when tick i's chunks were durable, in Unix ns
			ready           = make(chan struct{}, subscribers)
			conns           = make([]*websocket.Conn, subscribers)
			producerElapsed time.Duration
		)
		for i := range conns {
			conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
			require.NoError(b, err)
			resp.Body.Close()
			conns[i] = conn
			require.NoError(b, conn.WriteJSON(live.Request{Type: "subscribe", Topic: "run:" + runID.String(), After: 0}))
		}
		for _, conn := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				// A browser parses each message once; so does this client, fully, into reused
				// memory so that the load generator's garbage does not tax the server.
				var (
					buf      bytes.Buffer
					m        benchMessage
					localD   = make([]time.Duration, 0, total)
					localW   = make([]time.Duration, 0, total)
					seen     int
					snapshot bool
				)
				for seen < total {
					_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
					_, r, err := conn.NextReader()
					if err != nil {
						break
					}
					buf.Reset()
					if _, err := buf.ReadFrom(r); err != nil {
						break
					}
					m.Data.Chunks = m.Data.Chunks[:0]
					if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
						break
					}
					now := time.Now().UnixNano()
					if m.Kind == event.Snapshot {
						if !snapshot {
							snapshot = true
							ready <- struct{}{}
						}
						continue
					}
					for _, c := range m.Data.Chunks {
						localW = append(localW, time.Duration(now-c.Content.T))
						// A read-back may find chunks committed before the producer noted the time: 0.
						lat := int64(0)
						if d := durable[(c.Seq-1)/int64(perTick)].Load(); d > 0 {
							lat = max(now-d, 0)
						}
						localD = append(localD, time.Duration(lat))
					}
					seen += len(m.Data.Chunks)
				}
				mu.Lock()
				fromDurable = append(fromDurable, localD...)
				fromWrite = append(fromWrite, localW...)
				mu.Unlock()
			}()
		}
		for range subscribers {
			<-ready
		}
		b.ResetTimer()
		seq := int64(0)
		ctx := context.Background()
		start := time.Now()
		t := time.NewTicker(tick)
		for i := range ticks {
			<-t.C
			now := time.Now().UnixNano()
			batch := make([]store.RunChunk, perTick)
			for j := range batch {
				seq++
				batch[j] = store.RunChunk{RunID: runID, Seq: seq, Role: "model", Content: json.RawMessage(fmt.Sprintf(`{"t":%d,"text":"token "}`, now))}
			}
			require.NoError(b, bu.store.ChunkInsert(ctx, batch))
			durable[i].Store(time.Now().UnixNano())
			publish(hub, runID, batch, inProcess)
		}
		producerElapsed = time.Since(start)
		t.Stop()
		wg.Wait()
		b.StopTimer()
		require.Equal(b, 0, int(hub.Dropped.Load()), "no subscriber may be dropped at this rate")
		require.Len(b, fromDurable, subscribers*total, "every subscriber got every chunk")
		slices.Sort(fromDurable)
		slices.Sort(fromWrite)
		pct := func(l []time.Duration, p float64) float64 { return float64(l[int(p*float64(len(l)-1))]) / 1e6 }
		b.ReportMetric(pct(fromDurable, 0.50), "p50-ms")
		b.ReportMetric(pct(fromDurable, 0.99), "p99-ms")
		b.ReportMetric(pct(fromDurable, 1), "max-ms")
		b.ReportMetric(pct(fromWrite, 0.50), "write-p50-ms")
		b.ReportMetric(pct(fromWrite, 0.99), "write-p99-ms")
		b.ReportMetric(float64(total)/producerElapsed.Seconds(), "chunks/s")
	}
}

// benchMessage is what a benchmark subscriber decodes.
type benchMessage struct {
	Kind event.Kind `json:"kind"`
	Seq  int64      `json:"seq"`
	Data struct {
		Chunks []struct {
			Seq     int64 `json:"seq"`
			Content struct {
				T int64 `json:"t"`
			} `json:"content"`
		} `json:"chunks"`
	} `json:"data"`
}

func publish(hub *live.Hub, runID uuid.UUID, batch []store.RunChunk, inProcess bool) {
	if inProcess {
		hub.PublishChunks(runID, batch)
		return
	}
	hub.Publish(runID, event.RunChunksData{LastSeq: batch[len(batch)-1].Seq})
}
