package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkGenkitRealtimeIngest drives POST /api/traces through the whole server handler (all
// middleware, decoding, database write) the way Genkit JS's realtime mode does: each span posted
// at start (endTime 0), then at end. One op is one span, two requests.
func BenchmarkGenkitRealtimeIngest(b *testing.B) {
	tb := setup(b, opts{ingest: true, dev: true})
	h := tb.srv.Handler()
	traceID := "0123456789abcdef0123456789abcdef"
	body := func(i int, end int64) []byte {
		return fmt.Appendf(nil, `{"traceId":%q,"spans":{"%016x":{"spanId":"%016x","traceId":%q,"startTime":1700000000000,"endTime":%d,
			"attributes":{"genkit:name":"step","genkit:type":"action","genkit:state":"success","genkit:input":"{\"q\":\"%s\"}"},
			"displayName":"step","instrumentationLibrary":{"name":"genkit-tracer","version":"v1"},"spanKind":"INTERNAL",
			"sameProcessAsParentSpan":{"value":true},"status":{"code":0},"timeEvents":{"timeEvent":[]}}}}`,
			traceID, i+1, i+1, traceID, end, bytes.Repeat([]byte("x"), 600))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for _, end := range []int64{0, 1700000000100} {
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:4000/api/traces", bytes.NewReader(body(i, end)))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	}
}
