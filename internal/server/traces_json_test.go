package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// rawClient neither asks for nor undoes compression, so a test sees the bytes on the wire.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func rawGet(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := rawClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

const (
	storedTraceID = "5e1ec7ed0000000000000000000000a1"
	storedRoot    = "00000000000000a1"
	storedTool    = "00000000000000b2"
	// storedAttrs is spaced, ordered and escaped as no encoder would write it.
	storedAttrs = `{ "zeta" : 1,"alpha":[1, 2.50, {"b":true , "a":null}],  "html":"<b>&amp;</b>", "u":"\u00e9 é"}`
	storedTool1 = `{"genkit:state" :"interrupted","genkit:input":  "{\"q\": 1}"}`
)

// storeRawTrace stores a two-span trace whose JSON columns hold storedAttrs and friends, plus pad
// more tool spans with padBytes of attributes each.
func storeRawTrace(t *testing.T, b *bundle, pad, padBytes int) []store.Span {
	t.Helper()
	root := storedRoot
	spans := []store.Span{
		{TraceID: storedTraceID, SpanID: storedRoot, Name: "flow", StartTime: 1_000, EndTime: 9_000,
			Attributes: json.RawMessage(storedAttrs), Events: json.RawMessage(`[ {"name":"e", "attributes": {}} ]`),
			Links: json.RawMessage(`[]`), Resource: json.RawMessage("{\n  \"service.name\": \"svc\"\n}"), Source: store.SpanSourceOTLP},
		{TraceID: storedTraceID, SpanID: storedTool, ParentSpanID: &root, Name: "askUser", StartTime: 2_000, EndTime: 3_000,
			StatusCode: store.StatusOK, Attributes: json.RawMessage(storedTool1), Events: json.RawMessage(`[]`),
			Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{}`), Source: store.SpanSourceOTLP},
	}
	text := strings.Repeat("lorem ipsum dolor sit amet ", max(padBytes/27, 1))
	for i := range pad {
		spans = append(spans, store.Span{TraceID: storedTraceID, SpanID: fmt.Sprintf("%016x", 0xc000+i), ParentSpanID: &root,
			Name: "search", StartTime: int64(4_000 + i), EndTime: int64(5_000 + i), Attributes: mustJSON(map[string]any{"text": text, "i": i}),
			Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`), Resource: json.RawMessage(`{}`), Source: store.SpanSourceOTLP})
	}
	_, err := b.store.SpanIngest(context.Background(), spans)
	require.NoError(t, err)
	return spans
}

// reencodedJSON is what encoding/json made of the tree before: compacted, HTML characters escaped.
func reencodedJSON(t *testing.T, b []byte) string {
	var compact, escaped bytes.Buffer
	require.NoError(t, json.Compact(&compact, b))
	json.HTMLEscape(&escaped, compact.Bytes())
	return escaped.String()
}

// TestTraceAPIServesStoredJSONAsStored: GET /api/v1/traces/{id} sends each span's attributes,
// events and resource byte for byte as stored, not re-compacted; everything else is what
// encoding/json wrote before, so the answer decodes to the same tree.
func TestTraceAPIServesStoredJSONAsStored(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	storeRawTrace(t, b, 0, 0)
	resp, body := rawGet(t, b.url+"/api/v1/traces/"+storedTraceID)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get("Content-Encoding"))
	require.Contains(t, string(body), `"attributes":`+storedAttrs+`,`)
	require.Contains(t, string(body), `"attributes":`+storedTool1+`,`)
	require.Contains(t, string(body), `"events":[ {"name":"e", "attributes": {}} ],`)
	require.Contains(t, string(body), "\"resource\":{\n  \"service.name\": \"svc\"\n},")

	tree, err := b.traces.Tree(context.Background(), storedTraceID)
	require.NoError(t, err)
	want, err := json.Marshal(tree)
	require.NoError(t, err)
	require.Equal(t, string(want), reencodedJSON(t, body))
	require.True(t, bytes.HasSuffix(body, []byte("}\n")))

	var got trace.Tree
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "interrupted", got.Roots[0].Children[0].Status)
	require.False(t, got.Skeleton)

	// ?pretty still indents, through encoding/json.
	resp, body = rawGet(t, b.url+"/api/v1/traces/"+storedTraceID+"?pretty")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "\n  \"roots\": [")
}

// TestTraceAPIGzip: the trace API gzips when the client accepts gzip, small and large (BestSpeed)
// answers alike, and the gzip decodes to the identity answer; q=0 refuses it.
func TestTraceAPIGzip(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	storeRawTrace(t, b, 600, 2048) // about 1.3 MB: over bigTraceJSON
	for _, path := range []string{
		"/api/v1/traces/" + storedTraceID,
		"/api/v1/traces/" + storedTraceID + "?fields=skeleton",
		"/api/v1/traces/" + storedTraceID + "/spans/" + storedRoot,
	} {
		resp, plain := rawGet(t, b.url+path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Empty(t, resp.Header.Get("Content-Encoding"), path)

		resp, zipped := rawGet(t, b.url+path, "Accept-Encoding", "br;q=1.0, gzip;q=0.8, *;q=0.1")
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"), path)
		require.Contains(t, resp.Header.Values("Vary"), "Accept-Encoding", path)
		zr, err := gzip.NewReader(bytes.NewReader(zipped))
		require.NoError(t, err)
		unzipped, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.Equal(t, string(plain), string(unzipped), path)
		if !strings.Contains(path, "/spans/") {
			require.Less(t, len(zipped), len(plain)/3, path)
		}

		resp, refused := rawGet(t, b.url+path, "Accept-Encoding", "gzip;q=0, identity")
		require.Empty(t, resp.Header.Get("Content-Encoding"), path)
		require.Equal(t, string(plain), string(refused), path)
	}
	var sizes struct{ full, skeleton int }
	_, full := rawGet(t, b.url+"/api/v1/traces/"+storedTraceID)
	_, sk := rawGet(t, b.url+"/api/v1/traces/"+storedTraceID+"?fields=skeleton")
	sizes.full, sizes.skeleton = len(full), len(sk)
	require.Greater(t, sizes.full, bigTraceJSON)
	require.Less(t, sizes.skeleton*5, sizes.full)
}

// TestTraceAPISkeletonThenPayloads: fields=skeleton sends the tree without any span's
// attributes, events, links or resource, each span saying how large they are, and
// GET /api/v1/traces/{id}/spans/{span} then sends one span's payloads as stored.
func TestTraceAPISkeletonThenPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{ingest: true, dev: true})
	spans := storeRawTrace(t, b, 3, 100)

	resp, body := rawGet(t, b.url+"/api/v1/traces/"+storedTraceID+"?fields=skeleton")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	for _, key := range []string{`"attributes"`, `"events"`, `"links"`, `"resource"`, "lorem", "alpha"} {
		require.NotContains(t, string(body), key)
	}
	var sk map[string]any
	require.NoError(t, json.Unmarshal(body, &sk))
	require.Equal(t, true, sk["skeleton"])
	require.EqualValues(t, 5, sk["span_count"])
	require.Equal(t, storedTraceID, sk["trace"].(map[string]any)["trace_id"])

	var tree trace.Tree
	require.NoError(t, json.Unmarshal(body, &tree))
	require.Len(t, tree.Roots, 1)
	root := tree.Roots[0]
	require.Equal(t, storedRoot, root.SpanID)
	require.Equal(t, int64(8_000), root.DurationNS)
	require.Len(t, root.Children, 4)
	require.Equal(t, "interrupted", root.Children[0].Status, "read in SQL without sending the attributes")
	require.Equal(t, "unset", root.Children[1].Status)
	for i, n := range append([]*trace.Node{root}, root.Children...) {
		sp := spans[i]
		require.Equal(t, sp.SpanID, n.SpanID)
		require.Equal(t, int64(len(sp.Attributes)+len(sp.Events)+len(sp.Links)+len(sp.Resource)), n.PayloadBytes, sp.SpanID)
		require.Nil(t, n.Attributes)
	}

	// The full tree has the same shape.
	var full trace.Tree
	require.Equal(t, http.StatusOK, getJSON(t, b.url+"/api/v1/traces/"+storedTraceID+"?fields=all", &full))
	require.Len(t, full.Roots[0].Children, 4)
	require.Equal(t, "interrupted", full.Roots[0].Children[0].Status)
	require.Zero(t, full.Roots[0].PayloadBytes)

	// A span's payloads, on demand, as stored.
	resp, body = rawGet(t, b.url+"/api/v1/traces/"+strings.ToUpper(storedTraceID)+"/spans/"+storedTool)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"attributes":`+storedTool1+`,`)
	require.NotContains(t, string(body), `"children"`)
	var span trace.Node
	require.NoError(t, json.Unmarshal(body, &span))
	require.Equal(t, storedTool, span.SpanID)
	require.Equal(t, storedRoot, *span.ParentSpanID)
	require.Equal(t, "interrupted", span.Status)
	require.Equal(t, int64(1_000), span.DurationNS)
	resp, body = rawGet(t, b.url+"/api/v1/traces/"+storedTraceID+"/spans/"+storedRoot)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `"attributes":`+storedAttrs+`,`)

	for path, status := range map[string]int{
		"/api/v1/traces/" + storedTraceID + "/spans/00000000000000ff":         http.StatusNotFound,
		"/api/v1/traces/" + storedTraceID + "/spans/xyz":                      http.StatusBadRequest,
		"/api/v1/traces/" + strings.Repeat("ab", 16) + "/spans/" + storedRoot: http.StatusNotFound,
		"/api/v1/traces/" + storedTraceID + "?fields=payloads":                http.StatusBadRequest,
		"/api/v1/traces/" + strings.Repeat("ab", 16) + "?fields=skeleton":     http.StatusNotFound,
	} {
		resp, body := rawGet(t, b.url+path)
		require.Equal(t, status, resp.StatusCode, "%s: %s", path, body)
		require.Equal(t, "application/json", strings.Split(resp.Header.Get("Content-Type"), ";")[0], path)
	}
}

func TestAcceptsGzip(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]bool{
		"":                        false,
		"gzip":                    true,
		"GZip":                    true,
		"gzip, deflate, br, zstd": true,
		"br;q=1.0, gzip;q=0.8":    true,
		"x-gzip":                  true,
		"gzip;q=0":                false,
		"gzip; q=0.000, *":        false,
		"*":                       true,
		"*;q=0":                   false,
		"deflate, br":             false,
		"identity":                false,
		"gzipped":                 false,
		"gzip;q=0, gzip;q=1":      true,
		"br, gzip;q=nonsense":     true,
	} {
		require.Equal(t, want, acceptsGzip(header), header)
	}
}

// FuzzAcceptsGzip: any Accept-Encoding is read without panicking, and one that does not mention
// gzip or * never selects it.
func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0", "br;q=1.0, gzip;q=0.8, *;q=0.1", "*;q=0", ";;,,=q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		got := acceptsGzip(header)
		if got && !strings.Contains(strings.ToLower(header), "gzip") && !strings.Contains(header, "*") {
			t.Fatalf("acceptsGzip(%q) without gzip or *", header)
		}
	})
}
