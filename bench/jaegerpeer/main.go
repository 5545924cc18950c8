// Command jaegerpeer times GET /api/traces/{id} on Jaeger v1.76 (cmd/jaeger, built from the Go
// module proxy; see go.mod's tool line) against GET /api/v1/traces/{id} on a running Loupe, for
// the same 10,000-span trace, in the same run, from the same client.
//
// It starts Jaeger as a real process with its in-memory store, its OTLP/HTTP receiver and its
// query API on loopback ports it picks (a config file it writes; nothing else of Jaeger's listens),
// sends both servers the same trace as OTLP/HTTP JSON (POST /v1/traces, in batches), waits until
// each answers with every span, and then times the two GETs alternately, request to last byte,
// on kept-alive connections, reading the bytes as sent without decoding them (as
// BenchmarkTraceGet10k does in internal/server). bench/jaeger-compare.sh builds Jaeger, starts a
// throwaway devui and runs this.
//
//	go run . -jaeger bin/jaeger -loupe http://127.0.0.1:PORT -spans 10000 -count 30
//
// With -jaeger "" only Loupe's side runs (make bench-smoke does that, at a few hundred spans,
// so that this program does not rot while Jaeger's build stays out of CI's path).
//
// The trace has the shape of internal/server's seedTrace: a flow span, then nested generate turns
// of a model call and six tool calls each, about 540 bytes of input or output on most spans.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	jaeger, loupe string
	spans, count  int
	warmup, batch int
	workDir       string
	order         string
	timeout       time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.jaeger, "jaeger", "bin/jaeger", `the Jaeger binary (cmd/jaeger v1.76.0); "" times Loupe alone`)
	flag.StringVar(&o.loupe, "loupe", "", "a running Loupe (devui serve), loopback only, e.g. http://127.0.0.1:4000")
	flag.IntVar(&o.spans, "spans", 10000, "spans in the trace")
	flag.IntVar(&o.count, "count", 30, "timed GETs per server and encoding")
	flag.IntVar(&o.warmup, "warmup", 3, "untimed GETs per server and encoding first")
	flag.IntVar(&o.batch, "batch", 500, "spans per OTLP request")
	flag.StringVar(&o.order, "order", "alternate", "alternate: one GET of each server and encoding in turn; blocks: all of one, then the next")
	flag.StringVar(&o.workDir, "work-dir", "", "where Jaeger's config and log go (default: a new temp dir)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	mode := flag.String("mode", "get", "get: time the GET of one large trace; ingest: batched OTLP ingest throughput (see ingest.go)")
	var in ingestOptions
	flag.IntVar(&in.clients, "clients", 8, "ingest: concurrent closed-loop clients")
	flag.IntVar(&in.batch, "batch-spans", 20, "ingest: spans per request")
	flag.DurationVar(&in.duration, "duration", 10*time.Second, "ingest: how long each server is loaded")
	flag.StringVar(&in.db, "db", "", "ingest: Loupe's DATABASE_URL (the stored count, and the raw COPY ceiling)")
	flag.DurationVar(&in.pause, "pause", 3*time.Second, "ingest: rest between servers")
	flag.IntVar(&in.sample, "sample", 200, "ingest: Jaeger traces read back to check")
	flag.IntVar(&in.loupePID, "loupe-pid", 0, "ingest: devui serve's pid, to report its CPU per span (Linux)")
	flag.IntVar(&in.pgPID, "pg-pid", 0, "ingest: the postmaster's pid, to report PostgreSQL's CPU per span, its backends included (Linux)")
	flag.Parse()
	var err error
	switch *mode {
	case "get":
		err = run(o)
	case "ingest":
		err = runIngest(o, in)
	default:
		err = fmt.Errorf("-mode %q: get or ingest", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jaegerpeer:", err)
		os.Exit(1)
	}
}

// server is one side of the comparison.
type server struct {
	name   string
	pid    int    // the process, when this program started it (Jaeger)
	ingest string // OTLP/HTTP traces endpoint
	get    string // the trace's URL
	count  func(body []byte) (int, error)
}

func run(o options) error {
	if o.loupe == "" {
		return errors.New("-loupe is required")
	}
	if err := loopbackOnly(o.loupe); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	traceID := newID(16)
	batches := otlpTrace(traceID, o.spans, o.batch)

	servers := []server{{
		name:   "Loupe",
		ingest: o.loupe + "/v1/traces",
		get:    o.loupe + "/api/v1/traces/" + traceID,
		count:  loupeSpanCount,
	}}
	if o.jaeger != "" {
		j, stop, err := startJaeger(ctx, o)
		if err != nil {
			return err
		}
		defer stop()
		servers = append(servers, j(traceID))
	}

	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}
	for _, s := range servers {
		start := time.Now()
		for _, body := range batches {
			if err := post(ctx, client, s.ingest, body); err != nil {
				return fmt.Errorf("%s: send the trace: %w", s.name, err)
			}
		}
		sent := time.Since(start)
		if err := waitSpans(ctx, client, s, o.spans); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %d spans sent in %d requests (%s), all %d queryable after %s\n",
			s.name, o.spans, len(batches), sent.Round(time.Millisecond), o.spans, time.Since(start).Round(time.Millisecond))
	}

	type key struct{ server, enc string }
	times := map[key][]time.Duration{}
	sizes := map[key]int64{}
	refused := map[key]bool{} // asked for gzip, answered uncompressed
	encs := []string{"identity", "gzip"}
	one := func(s server, enc string, timed bool) error {
		d, n, got, err := timeGet(ctx, client, s.get, enc)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		k := key{s.name, enc}
		switch got {
		case "":
			refused[k] = enc != "identity"
		case enc:
		default:
			return fmt.Errorf("%s: asked for %s, got Content-Encoding %q", s.name, enc, got)
		}
		sizes[k] = n
		if timed {
			times[k] = append(times[k], d)
		}
		return nil
	}
	switch o.order {
	case "alternate":
		// One request of each server and encoding in turn, so that the machine's load (it is
		// shared) falls on both sides alike.
		for i := -o.warmup; i < o.count; i++ {
			for _, s := range servers {
				for _, enc := range encs {
					if err := one(s, enc, i >= 0); err != nil {
						return err
					}
				}
			}
		}
	case "blocks":
		// Each server and encoding on its own, one after the other: a server's work after its
		// answer (Jaeger's garbage collection) does not fall into the other's requests.
		for _, s := range servers {
			for _, enc := range encs {
				for i := -o.warmup; i < o.count; i++ {
					if err := one(s, enc, i >= 0); err != nil {
						return err
					}
				}
			}
		}
	default:
		return fmt.Errorf("-order %q: alternate or blocks", o.order)
	}

	fmt.Printf("%d-span trace, %d timed GETs per row (after %d untimed, order %s), request to last byte\n\n", o.spans, o.count, o.warmup, o.order)
	fmt.Printf("%-7s %-9s %10s %10s %10s %10s %12s\n", "server", "encoding", "median", "p10", "p90", "min", "wire-bytes")
	med, fastest := map[key]float64{}, map[key]float64{}
	for _, s := range servers {
		for _, enc := range encs {
			k := key{s.name, enc}
			ts := times[k]
			label := enc
			if refused[k] {
				label = enc + "(no)" // the server did not compress
			}
			med[k], fastest[k] = ms(quantile(ts, 0.5)), ms(slices.Min(ts))
			fmt.Printf("%-7s %-9s %8.1fms %8.1fms %8.1fms %8.1fms %12d\n", s.name, label,
				med[k], ms(quantile(ts, 0.1)), ms(quantile(ts, 0.9)), ms(slices.Min(ts)), sizes[k])
		}
	}
	if len(servers) < 2 {
		return nil
	}
	fmt.Printf("\nJaeger/Loupe (medians; target >= 3x)\n")
	for _, p := range []struct{ label, l, j string }{
		{"identity / identity", "identity", "identity"},
		{"gzip asked of both", "gzip", "gzip"},
	} {
		r := med[key{"Jaeger", p.j}] / med[key{"Loupe", p.l}]
		verdict := "MISSED"
		if r >= 3 {
			verdict = "MET"
		}
		fmt.Printf("  %-20s %6.1fx  %s   (fastest requests: %.1fx)\n", p.label, r, verdict,
			fastest[key{"Jaeger", p.j}]/fastest[key{"Loupe", p.l}])
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func quantile(ts []time.Duration, q float64) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := int(math.Round(q * float64(len(s)-1)))
	if q == 0.5 && len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[i]
}

// timeGet GETs url with the given Accept-Encoding and reads the answer to its last byte.
func timeGet(ctx context.Context, client *http.Client, url, enc string) (time.Duration, int64, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, "", err
	}
	req.Header.Set("Accept", "application/json")
	if enc != "identity" {
		req.Header.Set("Accept-Encoding", enc)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	d := time.Since(start)
	resp.Body.Close()
	if err != nil {
		return 0, 0, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, "", fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return d, n, resp.Header.Get("Content-Encoding"), nil
}

func post(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: status %d: %s", url, resp.StatusCode, out)
	}
	return nil
}

// waitSpans polls the trace until the server answers with want spans.
func waitSpans(ctx context.Context, client *http.Client, s server, want int) error {
	last := -1
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.get, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				if n, err := s.count(body); err == nil {
					last = n
					if n == want {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %d of %d spans queryable when time ran out", s.name, last, want)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var spanCountRE = regexp.MustCompile(`"span_count":(\d+)`)

// loupeSpanCount reads the span_count that ends Loupe's tree (the tree nests as deep as the trace,
// so it is not decoded).
func loupeSpanCount(body []byte) (int, error) {
	m := spanCountRE.FindAllSubmatch(body, -1)
	if len(m) == 0 {
		return 0, errors.New("no span_count")
	}
	return strconv.Atoi(string(m[len(m)-1][1]))
}

func jaegerSpanCount(body []byte) (int, error) {
	var v struct {
		Data []struct {
			Spans []struct{} `json:"spans"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, err
	}
	n := 0
	for _, t := range v.Data {
		n += len(t.Spans)
	}
	return n, nil
}

// ---- the trace ----

type kv struct {
	Key   string `json:"key"`
	Value struct {
		StringValue string `json:"stringValue"`
	} `json:"value"`
}

type otlpSpan struct {
	TraceID           string `json:"traceId"`
	SpanID            string `json:"spanId"`
	ParentSpanID      string `json:"parentSpanId,omitempty"`
	Name              string `json:"name"`
	Kind              int    `json:"kind"`
	StartTimeUnixNano string `json:"startTimeUnixNano"`
	EndTimeUnixNano   string `json:"endTimeUnixNano"`
	Attributes        []kv   `json:"attributes"`
	Status            struct {
		Code int `json:"code"`
	} `json:"status"`
}

func attrs(pairs ...string) []kv {
	out := make([]kv, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		a := kv{Key: pairs[i]}
		a.Value.StringValue = pairs[i+1]
		out = append(out, a)
	}
	return out
}

// otlpTrace builds the trace as OTLP/HTTP JSON request bodies of at most batch spans each.
func otlpTrace(traceID string, n, batch int) [][]byte {
	spans := make([]otlpSpan, 0, n)
	t0 := int64(1_700_000_000_000_000_000)
	add := func(parent, name string, a []kv, start, end int64) string {
		s := otlpSpan{TraceID: traceID, SpanID: fmt.Sprintf("%016x", len(spans)+1), ParentSpanID: parent, Name: name, Kind: 1,
			StartTimeUnixNano: strconv.FormatInt(start, 10), EndTimeUnixNano: strconv.FormatInt(end, 10), Attributes: a}
		spans = append(spans, s)
		return s.SpanID
	}
	payload := strings.Repeat("evidence ", 60)
	root := add("", "researchAgent", attrs("genkit:type", "action", "genkit:metadata:subtype", "flow",
		"gen_ai.operation.name", "invoke_agent", "genkit:input", `{"topic":"bench"}`), t0, t0+int64(n)*1e6)
	parent := root
	for turn := 0; len(spans) < n; turn++ {
		start := t0 + int64(turn)*8e6
		g := add(parent, "generate", attrs("genkit:type", "util", "genkit:name", "generate", "loupe.turn.index", strconv.Itoa(turn),
			"gen_ai.operation.name", "invoke_agent", "genkit:input", `{"messages":["`+payload+`"]}`),
			start, t0+int64(n)*1e6-int64(turn))
		if len(spans) < n {
			add(g, "demo/research", attrs("gen_ai.operation.name", "chat", "genkit:metadata:subtype", "model", "gen_ai.request.model", "demo/research",
				"gen_ai.usage.input_tokens", "120", "gen_ai.usage.output_tokens", "18", "genkit:output", `{"text":"`+payload+`"}`), start+1e5, start+1e6)
		}
		for k := 0; k < 6 && len(spans) < n; k++ {
			add(g, "search", attrs("gen_ai.operation.name", "execute_tool", "gen_ai.tool.name", "search", "genkit:metadata:subtype", "tool",
				"genkit:input", `{"query":"q"}`, "genkit:output", `{"summary":"`+payload+`"}`), start+1e6+int64(k)*1e5, start+2e6+int64(k)*1e5)
		}
		parent = g
	}
	var out [][]byte
	for i := 0; i < len(spans); i += batch {
		body := map[string]any{"resourceSpans": []any{map[string]any{
			"resource":   map[string]any{"attributes": attrs("service.name", "research-bench")},
			"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": "bench"}, "spans": spans[i:min(i+batch, len(spans))]}},
		}}}
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ---- Jaeger ----

// jaegerConfig is cmd/jaeger's all-in-one configuration cut down to what is measured: the memory
// store, the query API (HTTP and gRPC, both on loopback), the OTLP/HTTP receiver, the batch
// processor and the storage exporter. The collector's own metrics are off (their Prometheus
// endpoint would take port 8888) and so is the query service's tracing of itself (on by default
// in v2: it would add spans of its own to every request measured).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn

extensions:
  jaeger_query:
    enable_tracing: false
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
%s

receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
        max_request_body_size: 67108864

processors:
  batch:

exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// startJaeger starts Jaeger with its memory store on three free loopback ports and waits until its
// query API answers.
func startJaeger(ctx context.Context, o options) (func(traceID string) server, func(), error) {
	return startJaegerStore(ctx, o, "memory")
}

// startJaegerStore is startJaeger with the memory store or badger.
func startJaegerStore(ctx context.Context, o options, store string) (func(traceID string) server, func(), error) {
	bin, err := filepath.Abs(o.jaeger)
	if err != nil {
		return nil, nil, err
	}
	dir := o.workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "jaegerpeer-"); err != nil {
			return nil, nil, err
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, nil, err
	}
	query, grpc, otlp := ports[0], ports[1], ports[2]
	cfg := filepath.Join(dir, "jaeger.yaml")
	backend := "        memory:\n          max_traces: 100000"
	if store == "badger" {
		// Durable, on disk in the work dir, as Jaeger's own config-badger.yaml keeps it.
		data := filepath.Join(dir, "badger")
		backend = fmt.Sprintf("        badger:\n          directories:\n            keys: %q\n            values: %q\n          ephemeral: false", data, data)
	}
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, query, grpc, backend, otlp), 0o644); err != nil {
		return nil, nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "jaeger.log"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "--config", "file:"+cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if o.workDir == "" {
			os.RemoveAll(dir)
		}
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", query)
	fmt.Fprintf(os.Stderr, "Jaeger (%s): %s --config %s (query %s, OTLP/HTTP 127.0.0.1:%d); log %s\n", store, bin, cfg, base, otlp, logf.Name())
	started := time.Now()
	for {
		resp, err := http.Get(base + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			tail, _ := os.ReadFile(logf.Name())
			logf.Close()
			return nil, nil, fmt.Errorf("jaeger exited (%v) before its query API answered:\n%s", err, lastLines(tail, 30))
		case <-ctx.Done():
			stop()
			return nil, nil, errors.New("jaeger's query API did not answer in time")
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stderr, "Jaeger: query API up after %s\n", time.Since(started).Round(time.Millisecond))
	return func(traceID string) server {
		return server{
			name:   "Jaeger",
			pid:    cmd.Process.Pid,
			ingest: fmt.Sprintf("http://127.0.0.1:%d/v1/traces", otlp),
			get:    base + "/api/traces/" + traceID,
			count:  jaegerSpanCount,
		}
	}, stop, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// freePorts picks n distinct free loopback ports at random below the kernel's ephemeral range
// (32768 and up), so that no outgoing connection takes one before Jaeger binds it.
func freePorts(n int) ([]int, error) {
	var out []int
	for tries := 0; len(out) < n && tries < 200; tries++ {
		p := 20000 + mrand.IntN(12000)
		if slices.Contains(out, p) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		out = append(out, p)
	}
	if len(out) < n {
		return nil, errors.New("no free loopback ports in 20000-31999")
	}
	return out, nil
}

// loopbackOnly refuses a URL whose host is not a loopback address.
func loopbackOnly(u string) error {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		return fmt.Errorf("%s: only http:// on loopback", u)
	}
	host, _, err := net.SplitHostPort(strings.SplitN(rest, "/", 2)[0])
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s: not a loopback address", u)
	}
	return nil
}
