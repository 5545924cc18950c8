package main

// The ingest comparison (-mode ingest): batched OTLP/HTTP protobuf export requests from N closed-loop
// clients, for a fixed time, into Loupe, Jaeger with its memory store and Jaeger with badger, one
// after the other in the same run, from the same generator; then the raw COPY ceiling of the same
// rows into a copy of Loupe's spans table in Loupe's database, at Loupe's own rows per
// transaction (read from its group-size histogram) and at clients × batch. Every acknowledged
// span is checked: Loupe's by counting them in PostgreSQL, Jaeger's by reading a sample of the
// traces back through its query API.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

type ingestOptions struct {
	clients, batch int
	duration       time.Duration
	db             string // Loupe's DATABASE_URL, for the stored count and the raw COPY ceiling
	pause          time.Duration
	sample         int
	loupePID       int // devui serve, for its CPU per span (0: not measured)
	pgPID          int // the postmaster, for PostgreSQL's CPU per span (0: not measured)
}

// ingestResult is one server's run.
type ingestResult struct {
	name            string
	spans, requests int64
	elapsed         time.Duration
	stored, checked int64 // spans found stored, of the spans checked
	note            string
	cpu             cpuUse
}

func (r ingestResult) rate() float64 { return float64(r.spans) / r.elapsed.Seconds() }

// template is one request body whose ids are rewritten for every request: the trace id (16 bytes)
// and each span's id (8 bytes) and parent id sit at known offsets of the encoded protobuf.
type template struct {
	body                       []byte
	traceIDAt, spanIDAt, parAt []int
}

// Marker ids, unlikely anywhere else in the body, found once in the encoding.
var (
	markTrace = [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	markRoot  = [8]byte{0xfe, 0xed, 0xfa, 0xce, 0, 0, 0, 0}
)

// newTemplate builds a body of n spans of about 1.15 KB: a root and n-1 children, a dozen string,
// int, double and bool attributes each, one of them long.
func newTemplate(n int) (*template, error) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "ingest-bench")
	rs.Resource().Attributes().PutStr("telemetry.sdk.language", "go")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("ingest-bench")
	ss.Scope().SetVersion("1.0.0")
	pad := strings.Repeat("evidence ", 60)
	rootID := markRoot
	rootID[7] = 1
	for i := range n {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(markTrace)
		id := markRoot
		id[7] = byte(i + 1)
		id[6] = byte((i + 1) >> 8)
		sp.SetSpanID(id)
		if i > 0 {
			sp.SetParentSpanID(rootID)
			sp.SetName("search")
		} else {
			sp.SetName("researchAgent")
		}
		sp.SetKind(ptrace.SpanKindInternal)
		start := time.Now().UnixNano()
		sp.SetStartTimestamp(pcommon.Timestamp(start + int64(i)*1000))
		sp.SetEndTimestamp(pcommon.Timestamp(start + 100_000_000))
		a := sp.Attributes()
		a.PutStr("genkit:type", "action")
		a.PutStr("genkit:name", "search")
		a.PutStr("genkit:metadata:subtype", "tool")
		a.PutStr("genkit:path", "/{researchAgent,t:flow}/{generate,t:util}/{search,t:action,s:tool}")
		a.PutStr("genkit:state", "success")
		a.PutStr("gen_ai.operation.name", "execute_tool")
		a.PutStr("gen_ai.tool.name", "search")
		a.PutInt("gen_ai.usage.input_tokens", 120)
		a.PutDouble("bench.cost", 0.00125)
		a.PutBool("bench.root", i == 0)
		a.PutStr("genkit:input", `{"query":"q"}`)
		a.PutStr("genkit:output", `{"summary":"`+pad+`"}`)
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		return nil, err
	}
	t := &template{body: body}
	t.traceIDAt = indexAll(body, markTrace[:])
	for i := range n {
		id := markRoot
		id[7], id[6] = byte(i+1), byte((i+1)>>8)
		at := indexAll(body, id[:])
		if i == 0 {
			// The root's id is also every child's parent id, after the root's own.
			t.spanIDAt, t.parAt = append(t.spanIDAt, at[0]), at[1:]
			continue
		}
		t.spanIDAt = append(t.spanIDAt, at...)
	}
	if len(t.traceIDAt) != n || len(t.spanIDAt) != n || len(t.parAt) != n-1 {
		return nil, fmt.Errorf("template: found %d trace ids, %d span ids, %d parent ids for %d spans",
			len(t.traceIDAt), len(t.spanIDAt), len(t.parAt), n)
	}
	return t, nil
}

func indexAll(b, sub []byte) []int {
	var out []int
	for i := 0; ; {
		j := bytes.Index(b[i:], sub)
		if j < 0 {
			return out
		}
		out = append(out, i+j)
		i += j + len(sub)
	}
}

// fill writes a body with a new trace id and span ids into dst, and returns the trace id.
func (t *template) fill(dst []byte, seq uint64, rng *mrand.PCG) [16]byte {
	copy(dst, t.body)
	var tid [16]byte
	binary.BigEndian.PutUint64(tid[:8], rng.Uint64())
	binary.BigEndian.PutUint64(tid[8:], seq)
	for _, at := range t.traceIDAt {
		copy(dst[at:], tid[:])
	}
	base := rng.Uint64() &^ 0xffff
	for i, at := range t.spanIDAt {
		binary.BigEndian.PutUint64(dst[at:], base|uint64(i+1))
	}
	for _, at := range t.parAt {
		binary.BigEndian.PutUint64(dst[at:], base|1)
	}
	return tid
}

// runIngest runs the comparison.
func runIngest(o options, in ingestOptions) error {
	if o.loupe == "" || in.db == "" {
		return errors.New("-mode ingest needs -loupe and -db")
	}
	if err := loopbackOnly(o.loupe); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	tmpl, err := newTemplate(in.batch)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, in.db)
	if err != nil {
		return err
	}
	defer pool.Close()

	fmt.Printf("OTLP/HTTP protobuf, %d clients, %d spans (%d bytes) per request, %s per server\n\n",
		in.clients, in.batch, len(tmpl.body), in.duration)

	var results []ingestResult
	before, err := countSpans(ctx, pool)
	if err != nil {
		return err
	}
	groupsBefore, err := groupHistogram(ctx, o.loupe)
	if err != nil {
		return err
	}
	meter := startCPU(in.loupePID, in.pgPID)
	r, _, err := load(ctx, "Loupe", o.loupe+"/v1/traces", tmpl, in)
	if err != nil {
		return err
	}
	r.cpu = meter.stop()
	after, err := countSpans(ctx, pool)
	if err != nil {
		return err
	}
	r.stored, r.checked = after-before, r.spans
	groupsAfter, err := groupHistogram(ctx, o.loupe)
	if err != nil {
		return err
	}
	rowsPerTx := 0.0
	if n := groupsAfter.count - groupsBefore.count; n > 0 {
		rowsPerTx = (groupsAfter.sum - groupsBefore.sum) / n
		r.note = fmt.Sprintf("%.0f spans per transaction", rowsPerTx)
	}
	results = append(results, r)

	if o.jaeger != "" {
		for _, store := range []string{"memory", "badger"} {
			time.Sleep(in.pause)
			j, stop, err := startJaegerStore(ctx, o, store)
			if err != nil {
				return err
			}
			srv := j("")
			meter := startCPU(srv.pid, 0)
			r, sent, err := load(ctx, "Jaeger "+store, srv.ingest, tmpl, in)
			r.cpu = meter.stop()
			if err == nil {
				r.stored, r.checked, err = sampleJaeger(ctx, srv, sent, in.sample, in.batch)
			}
			stop()
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}

	time.Sleep(in.pause)
	sizes := []int{in.clients * in.batch}
	if rowsPerTx >= 1 && int(rowsPerTx+0.5) != sizes[0] {
		sizes = append([]int{int(rowsPerTx + 0.5)}, sizes...)
	}
	for _, rows := range sizes {
		meter := startCPU(0, in.pgPID)
		r, err := rawCopy(ctx, pool, tmpl, in, rows)
		if err != nil {
			return err
		}
		r.cpu = meter.stop()
		results = append(results, r)
	}

	fmt.Printf("%-38s %12s %10s %11s  %s\n", "", "spans/s", "requests", "stored", "")
	for _, r := range results {
		fmt.Printf("%-38s %12.0f %10d %11s  %s\n", r.name, r.rate(), r.requests,
			fmt.Sprintf("%d/%d", r.stored, r.checked), r.note)
	}
	if results[0].cpu.measured {
		// Where the cores went: CPU time per span stored, of each party. On a machine with few
		// cores, the sum bounds spans/s (cores / total).
		fmt.Printf("\n%-38s %12s %12s %12s %12s\n", "CPU µs per span", "server", "PostgreSQL", "client", "total")
		for _, r := range results {
			c := r.cpu
			fmt.Printf("%-38s %12s %12s %12s %12s\n", r.name, perSpan(c.server, r.spans, c.server > 0),
				perSpan(c.pg, r.spans, c.pg > 0), perSpan(c.client, r.spans, true),
				perSpan(c.server+c.pg+c.client, r.spans, true))
		}
	}
	loupe := results[0].rate()
	fmt.Println()
	for _, r := range results[1:] {
		target := ""
		switch {
		case r.name == "Jaeger memory":
			target = verdict(loupe/r.rate(), 0.55)
		case strings.HasPrefix(r.name, "raw COPY") && len(sizes) > 0 && strings.Contains(r.name, fmt.Sprintf(" %d rows", sizes[0])):
			target = verdict(loupe/r.rate(), 0.75)
		}
		fmt.Printf("Loupe / %-38s %5.2fx  %s\n", r.name, loupe/r.rate(), target)
	}
	for _, r := range results {
		if r.stored != r.checked {
			return fmt.Errorf("%s: %d of %d checked spans stored", r.name, r.stored, r.checked)
		}
	}
	return nil
}

func verdict(ratio, target float64) string {
	if ratio >= target {
		return fmt.Sprintf("(target >= %.2fx: MET)", target)
	}
	return fmt.Sprintf("(target >= %.2fx: MISSED)", target)
}

// load sends requests from in.clients closed-loop clients for in.duration and returns what was
// acknowledged, and the trace ids acknowledged.
func load(ctx context.Context, name, url string, tmpl *template, in ingestOptions) (ingestResult, [][16]byte, error) {
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: in.clients}}
	var (
		seq      atomic.Uint64
		requests atomic.Int64
		mu       sync.Mutex
		sent     [][16]byte
		firstErr error
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(in.duration)
	start := time.Now()
	for c := range in.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.NewPCG(uint64(time.Now().UnixNano()), uint64(c))
			body := make([]byte, len(tmpl.body))
			var mine [][16]byte
			for time.Now().Before(deadline) && ctx.Err() == nil {
				tid := tmpl.fill(body, seq.Add(1), rng)
				if err := postProto(ctx, client, url, body); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", name, err)
					}
					mu.Unlock()
					return
				}
				requests.Add(1)
				mine = append(mine, tid)
			}
			mu.Lock()
			sent = append(sent, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return ingestResult{}, nil, firstErr
	}
	n := requests.Load()
	fmt.Fprintf(os.Stderr, "%s: %d requests, %d spans in %s\n", name, n, n*int64(tmpl.spanCount()), elapsed.Round(time.Millisecond))
	return ingestResult{name: name, spans: n * int64(tmpl.spanCount()), requests: n, elapsed: elapsed}, sent, nil
}

func (t *template) spanCount() int { return len(t.spanIDAt) }

func postProto(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
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

func countSpans(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, `SELECT count(*) FROM spans`).Scan(&n)
	return n, err
}

type histogram struct{ sum, count float64 }

// groupHistogram reads loupe_trace_ingest_group_spans from Loupe's /metrics.
func groupHistogram(ctx context.Context, base string) (histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return histogram{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return histogram{}, err
	}
	defer resp.Body.Close()
	var h histogram
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, f := range []struct {
			prefix string
			dst    *float64
		}{{"loupe_trace_ingest_group_spans_sum ", &h.sum}, {"loupe_trace_ingest_group_spans_count ", &h.count}} {
			if v, ok := strings.CutPrefix(line, f.prefix); ok {
				*f.dst, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
	}
	return h, sc.Err()
}

// sampleJaeger reads up to n of the acknowledged traces back and counts their spans.
func sampleJaeger(ctx context.Context, s server, sent [][16]byte, n, perTrace int) (stored, checked int64, err error) {
	// Jaeger's batch processor and memory store take a moment to make the last writes readable.
	time.Sleep(2 * time.Second)
	for i := 0; i < n && len(sent) > 0; i++ {
		tid := sent[mrand.IntN(len(sent))]
		s.get = strings.TrimSuffix(s.get, "/") + "/" + hex.EncodeToString(tid[:])
		resp, err := http.Get(s.get)
		if err != nil {
			return 0, 0, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.get = s.get[:len(s.get)-33]
		checked += int64(perTrace)
		if resp.StatusCode != http.StatusOK {
			continue
		}
		got, err := jaegerSpanCount(body)
		if err == nil {
			stored += int64(got)
		}
	}
	return stored, checked, nil
}

// rawCopy COPYs the same rows into a copy of Loupe's spans table (its primary key, its JSON
// columns, asynchronous commit as Loupe's ingest), rows per transaction, from in.clients
// connections at once, for in.duration.
func rawCopy(ctx context.Context, pool *pgxpool.Pool, tmpl *template, in ingestOptions, rows int) (ingestResult, error) {
	name := fmt.Sprintf("raw COPY, %d rows per transaction", rows)
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS bench_raw_spans;
		CREATE TABLE bench_raw_spans (LIKE spans INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)`); err != nil {
		return ingestResult{}, err
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS bench_raw_spans`) //nolint:errcheck // best effort
	cols, proto, err := spanRows(tmpl)
	if err != nil {
		return ingestResult{}, err
	}
	var (
		total    atomic.Int64
		txs      atomic.Int64
		seq      atomic.Uint64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	deadline := time.Now().Add(in.duration)
	start := time.Now()
	for range in.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([][]any, rows)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for i := range batch {
					r := proto[i%len(proto)]
					row := append([]any(nil), r...)
					row[0] = fmt.Sprintf("%032x", seq.Add(1))
					batch[i] = row
				}
				err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}, func(tx pgx.Tx) error {
					_, err := tx.CopyFrom(ctx, pgx.Identifier{"bench_raw_spans"}, cols, pgx.CopyFromRows(batch))
					return err
				})
				if err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
				total.Add(int64(rows))
				txs.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return ingestResult{}, fmt.Errorf("%s: %w", name, firstErr)
	}
	var stored int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM bench_raw_spans`).Scan(&stored); err != nil {
		return ingestResult{}, err
	}
	return ingestResult{name: name, spans: total.Load(), requests: txs.Load(), elapsed: elapsed, stored: stored, checked: total.Load()}, nil
}

// spanRows are the template's spans as the rows Loupe stores (its columns, its attribute JSON).
func spanRows(tmpl *template) ([]string, [][]any, error) {
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(tmpl.body); err != nil {
		return nil, nil, err
	}
	cols := []string{"trace_id", "span_id", "parent_span_id", "name", "kind", "start_time_unix_nano",
		"end_time_unix_nano", "status_code", "status_message", "attributes", "events", "links", "resource",
		"scope", "scope_version", "source"}
	var rows [][]any
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res, _ := json.Marshal(rs.Resource().Attributes().AsRaw())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				sp := ss.Spans().At(k)
				attrs, _ := json.Marshal(sp.Attributes().AsRaw())
				sid := sp.SpanID()
				var parent any
				if p := sp.ParentSpanID(); !p.IsEmpty() {
					parent = hex.EncodeToString(p[:])
				}
				rows = append(rows, []any{"", hex.EncodeToString(sid[:]), parent, sp.Name(), int16(sp.Kind()),
					int64(sp.StartTimestamp()), int64(sp.EndTimestamp()), int16(sp.Status().Code()), "",
					string(attrs), "[]", "[]", string(res), ss.Scope().Name(), ss.Scope().Version(), "otlp"})
			}
		}
	}
	return cols, rows, nil
}
