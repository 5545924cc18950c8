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
