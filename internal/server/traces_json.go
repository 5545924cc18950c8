package server

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/trace"
)

// The trace reads that answer stored JSON (GET /api/v1/traces/{id} and its spans) write their
// answer themselves, streamed as it is encoded, and compress it themselves too, at a level chosen
// by its size: the server's gzip middleware, at the default level, would spend several times
// longer compressing a 10,000-span trace than reading and writing it. The compressor is
// klauspost/compress's gzip, the standard library's API: at BestSpeed it compresses the 11.7 MB of
// a 10,000-span trace in a few milliseconds where compress/gzip took 15 to 20, and smaller.

// bigTraceJSON is the answer size from which gzip trades ratio for speed (BestSpeed).
const bigTraceJSON = 1 << 20

var gzipWriters = map[int]*sync.Pool{
	gzip.DefaultCompression: {New: func() any { w, _ := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression); return w }},
	gzip.BestSpeed:          {New: func() any { w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed); return w }},
}

// writeTraceJSON answers 200 with the JSON that write writes, gzipped when the client accepts
// gzip; size is about how large the JSON will be.
func (s *Server) writeTraceJSON(c echo.Context, size int, write func(io.Writer) error) error {
	res := c.Response()
	h := res.Header()
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
	if !acceptsGzip(c.Request().Header.Get(echo.HeaderAcceptEncoding)) {
		res.WriteHeader(http.StatusOK)
		return write(res)
	}
	level := gzip.DefaultCompression
	if size >= bigTraceJSON {
		level = gzip.BestSpeed
	}
	pool := gzipWriters[level]
	gz := pool.Get().(*gzip.Writer)
	defer func() {
		gz.Reset(io.Discard)
		pool.Put(gz)
	}()
	gz.Reset(res)
	h.Set(echo.HeaderContentEncoding, "gzip")
	res.WriteHeader(http.StatusOK)
	if err := write(gz); err != nil {
		return err
	}
	return gz.Close()
}

// treeSize estimates the size of a tree's JSON: its payloads and a few hundred bytes a span.
func treeSize(t *trace.Tree) int {
	size := 0
	stack := append([]*trace.Node(nil), t.Roots...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], n.Children...)
		size += 320 + len(n.Name) + len(n.Attributes) + len(n.Events) + len(n.Links) + len(n.Resource)
	}
	return size
}

// acceptsGzip reports whether an Accept-Encoding header value accepts gzip: it names gzip (or
// x-gzip) without q=0, or, naming neither, * without q=0.
func acceptsGzip(header string) bool {
	named, star := -1, -1 // -1 not named, 0 refused, 1 accepted
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		var dst *int
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip":
			dst = &named
		case "*":
			dst = &star
		default:
			continue
		}
		ok := 1
		for param := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(param, "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f <= 0 {
					ok = 0
				}
			}
		}
		*dst = max(*dst, ok)
	}
	if named >= 0 {
		return named == 1
	}
	return star == 1
}
