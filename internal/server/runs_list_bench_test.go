package server

import (
	"context"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// BenchmarkRunsPageSortedByTokens100k is the whole runs page sorted by tokens (largest first), as
// a browser asks for it: GET /runs?sort=tokens over HTTP on loopback to the real server (demo
// agents registered, live hub on, run workers off), at 100,000 runs, for the first page and for a
// later page through its keyset cursor. The store's query alone is
// internal/store's BenchmarkRunListSortedByTokens100k; this adds the pending counts, sessions,
// actions, render and HTTP. Each request is timed from sending it to reading the last byte of the
// answer, and the p50 and p95 of those times are reported (p50-ms, p95-ms), with the page's size.
// The runs are seeded in SQL, with varied tokens, turns, actions, models and waits, one in 50
// waiting for a reviewer with a pending interrupt. Set LOUPE_BENCH_RUNS to seed another number.
//
//	go test ./internal/server -run '^$' -bench RunsPageSortedByTokens100k -benchtime 200x
func BenchmarkRunsPageSortedByTokens100k(b *testing.B) {
	ctx := context.Background()
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("LOUPE_BENCH_RUNS")); err == nil && v > 0 {
		n = v
	}
	srv, pool, st := inboxBench(b)
	_, err := pool.Exec(ctx, `
		WITH r AS (
			INSERT INTO runs (id, action, input, status, model, turns, input_tokens, output_tokens, waited_ms, created_at, started_at, finished_at, updated_at)
			SELECT gen_random_uuid(), '/flow/bench' || (i % 7), jsonb_build_object('topic', 'topic ' || i, 'depth', i % 3),
				CASE WHEN i % 50 = 0 THEN 'interrupted' ELSE 'succeeded' END, 'demo/model' || (i % 3), i % 9,
				(hashtext(i::text) & 65535), (hashtext((i * 7)::text) & 4095), CASE WHEN i % 10 = 0 THEN i % 5000 ELSE 0 END,
				now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval,
				CASE WHEN i % 50 <> 0 THEN now() - (i || ' seconds')::interval + interval '2 seconds' END,
				now() - (i || ' seconds')::interval + interval '1 second'
			FROM generate_series(1, $1) AS i RETURNING id, status)
		INSERT INTO interrupts (run_id, turn, tool, ref, input, metadata)
		SELECT id, 0, 'bookFlight', 'bookFlight-1', '{"destination":"Lisbon"}', '{"message":"Book it?"}' FROM r WHERE status = 'interrupted'`, n)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `ANALYZE runs, interrupts`)
	require.NoError(b, err)
	_, next, err := st.RunList(ctx, store.RunListParams{Sort: store.RunSortTokens, Limit: 50})
	require.NoError(b, err)
	require.NotNil(b, next)
	base := "http://" + srv.Addr() + "/runs?sort=tokens"
	client := &http.Client{Timeout: time.Minute}
	get := func(b *testing.B, url string) int {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(b, err)
		req.Header.Set("Accept", "text/html")
		resp, err := client.Do(req)
		require.NoError(b, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d: %s", url, resp.StatusCode, body)
		}
		return len(body)
	}
	for _, page := range []struct{ name, url string }{
		{"first-page", base},
		{"next-page", base + "&cursor=" + encodeCursor(next)},
	} {
		b.Run(page.name, func(b *testing.B) {
			get(b, page.url) // a connection, and the statements prepared
			var times []time.Duration
			size := 0
			for b.Loop() {
				start := time.Now()
				size = get(b, page.url)
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			ms := func(q float64) float64 {
				return float64(times[min(int(q*float64(len(times))), len(times)-1)]) / float64(time.Millisecond)
			}
			b.ReportMetric(ms(0.50), "p50-ms")
			b.ReportMetric(ms(0.95), "p95-ms")
			b.ReportMetric(float64(size), "html-bytes")
		})
	}
}
