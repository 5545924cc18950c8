package server

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkTraceGet10k measures GET /api/v1/traces/{id} for a 10,000-span trace (seedTrace's
// Genkit-shaped run: nested generate turns of a model call and six tool calls, about 600 bytes of
// input or output on most spans) over real HTTP on loopback, from the request to the last byte
// read, against a real PostgreSQL. The client reads the bytes as sent, without decoding them
// (wire-bytes is their size): full and skeleton (fields=skeleton) trees, with and without gzip.
//
//	go test ./internal/server -run '^$' -bench TraceGet10k -benchmem
func BenchmarkTraceGet10k(b *testing.B) {
	tb := setup(b, opts{ingest: true, dev: true})
	runID := seedTrace(b, tb.store, 10_000)
	var traceID string
	require.NoError(b, tb.store.Pool().QueryRow(context.Background(),
		`SELECT trace_id FROM traces WHERE run_id = $1`, runID).Scan(&traceID))
	tr := &http.Transport{DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	for _, bc := range []struct{ name, query, encoding string }{
		{"full/identity", "", ""},
		{"full/gzip", "", "gzip"},
		{"skeleton/identity", "?fields=skeleton", ""},
		{"skeleton/gzip", "?fields=skeleton", "gzip"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			url := tb.url + "/api/v1/traces/" + traceID + bc.query
			var size int64
			for b.Loop() {
				req, err := http.NewRequest(http.MethodGet, url, nil)
				if err != nil {
					b.Fatal(err)
				}
				if bc.encoding != "" {
					req.Header.Set("Accept-Encoding", bc.encoding)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				size, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				if got := resp.Header.Get("Content-Encoding"); got != bc.encoding {
					b.Fatalf("Content-Encoding %q, want %q", got, bc.encoding)
				}
			}
			b.ReportMetric(float64(size), "wire-bytes")
		})
	}
}

// BenchmarkTraceListWithA10kSpanTrace measures GET /api/v1/traces?limit=50 over real HTTP when
// the newest trace is a 10,000-span run (seedTrace) and 49 small traces follow it: the list's
// per-trace checks (failed spans, interrupted, resumed) must not read the big trace's spans.
//
//	go test ./internal/server -run '^$' -bench TraceListWithA10kSpanTrace -benchmem
func BenchmarkTraceListWithA10kSpanTrace(b *testing.B) {
	tb := setup(b, opts{ingest: true, dev: true})
	ctx := context.Background()
	// The small traces are older than the big one, which seedTrace starts now.
	_, err := tb.store.Pool().Exec(ctx, `
		INSERT INTO spans (trace_id, span_id, name, start_time_unix_nano, end_time_unix_nano, attributes, source)
		SELECT lpad(to_hex(g), 32, 'd'), '00000000000000a1', 'flow', g, g + 10, '{"genkit:type":"action"}', 'otlp'
		FROM generate_series(1, 200) g`)
	require.NoError(b, err)
	_, err = tb.store.Pool().Exec(ctx, `
		INSERT INTO traces (trace_id, display_name, root_span_id, start_time_unix_nano, end_time_unix_nano, span_count, source,
			span_start_min_unix_nano, span_start_max_unix_nano)
		SELECT trace_id, 'flow', span_id, start_time_unix_nano, end_time_unix_nano, 1, 'otlp',
			start_time_unix_nano, start_time_unix_nano FROM spans`)
	require.NoError(b, err)
	seedTrace(b, tb.store, 10_000)
	_, err = tb.store.Pool().Exec(ctx, `ANALYZE spans; ANALYZE traces`)
	require.NoError(b, err)
	client := &http.Client{}
	for b.Loop() {
		resp, err := client.Get(tb.url + "/api/v1/traces?limit=50")
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d, %v", resp.StatusCode, err)
		}
	}
}
