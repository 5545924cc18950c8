// Command loadtest measures trace ingest and listing against a running Loupe server, with the
// raw PostgreSQL COPY limit measured in the same run for comparison. It talks to loopback only and
// is bounded in count and time.
//
//	devui serve --dev &                # or any server; DATABASE_URL must be the same database
//	go run ./bench/loadtest -url http://127.0.0.1:4000 -db "$DATABASE_URL"
//
// Scenarios, each printed as one line:
//   - batched: Genkit TraceData bodies of 20 spans (about 1 KB each) from 8 concurrent clients,
//     then the same rows through pgx CopyFrom with no server, same batch size and concurrency;
//   - realtime: every span POSTed twice, at start (endTime 0) and at end, as Genkit JS's dev mode;
//   - bigtrace: one 2,001-span trace sent span by span, root last, then counted;
//   - list: p50/p95 of listing 50 traces once the database holds -list-spans spans;
//   - runs: -runs durable runs of -run-action started through the JSON API by the clients, until
//     the last has ended: runs/s, and the spans those runs wrote per second.
//
// -url takes several servers on one database, comma separated (make scale's replicas): requests
// and the lean client's connections are spread over them in turn.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

type options struct {
	url, db        string
	clients, batch int
	spans          int
	realtime       int
	big            int
	listSpans      int
	listSamples    int
	spanBytes      int
	timeout        time.Duration
	scenarios      string
	serverPID      int
	pgPID          int
	lean           bool
	runs           int
	runAction      string
	runInput       string
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "http://127.0.0.1:4000", "Loupe server (loopback only); several on one database, comma separated, share the load")
	flag.StringVar(&o.db, "db", os.Getenv("DATABASE_URL"), "the server's database, for the COPY baseline and the list seed")
	flag.IntVar(&o.clients, "clients", 8, "concurrent clients")
	flag.IntVar(&o.batch, "batch", 20, "spans per batched request")
	flag.IntVar(&o.spans, "spans", 100000, "spans in the batched scenario (and in its COPY baseline)")
	flag.IntVar(&o.realtime, "realtime-spans", 20000, "spans in the realtime scenario")
	flag.IntVar(&o.big, "big", 2000, "child spans of the span-by-span trace")
	flag.IntVar(&o.listSpans, "list-spans", 1000000, "spans stored before timing the list (seeded by COPY)")
	flag.IntVar(&o.listSamples, "list-samples", 200, "list requests timed")
	flag.IntVar(&o.spanBytes, "span-bytes", 1000, "approximate JSON size of one span")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.StringVar(&o.scenarios, "scenarios", "batched,realtime,bigtrace,list", "scenarios to run, comma separated")
	flag.IntVar(&o.serverPID, "server-pid", 0, "the server's pid: report its CPU time per span (Linux)")
	flag.IntVar(&o.pgPID, "pg-pid", 0, "the postmaster's pid: report PostgreSQL's CPU time per span, all its children included (Linux)")
	flag.BoolVar(&o.lean, "lean", false, "post over raw keep-alive HTTP/1.1 connections instead of net/http's client (see leanSender)")
	flag.IntVar(&o.runs, "runs", 2000, "durable runs in the runs scenario")
	flag.StringVar(&o.runAction, "run-action", "/flow/researchAgent", "the action the runs scenario starts (a demo action: serve without --no-demo)")
	flag.StringVar(&o.runInput, "run-input", `{"topic":"load","depth":2}`, "its input")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	urls := strings.Split(o.url, ",")
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("refusing %s: the load test only targets loopback", raw)
		}
	}
	if o.db == "" {
		return errors.New("set -db or DATABASE_URL to the server's database")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, o.db)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.clients * 2}, Timeout: time.Minute}
	send := netHTTPSender(client, urls)
	if !o.lean {
		fmt.Println("posting with net/http's client")
	}
	if o.lean {
		if send, err = leanSender(urls, o.clients); err != nil {
			return err
		}
		fmt.Println("posting with the lean HTTP/1.1 client (-lean)")
	}

	want := strings.Split(o.scenarios, ",")
	for _, sc := range []struct {
		name string
		run  func() error
	}{
		{"batched", func() error { return batched(ctx, o, send, st) }},
		{"realtime", func() error { return realtime(ctx, o, send, st) }},
		{"bigtrace", func() error { return bigTrace(ctx, o, send, st) }},
		{"list", func() error { return list(ctx, o, client, urls[0], st) }},
		{"runs", func() error { return runsScenario(ctx, o, client, urls, st) }},
	} {
		if !slices.Contains(want, sc.name) {
			continue
		}
		if err := sc.run(); err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
	}
	return nil
}

// cpuMeter reads the CPU time of the server, of PostgreSQL (the postmaster and every process
// under it) and of this process, so that a result can be read as CPU per span: a figure that,
// unlike spans/s, holds up on a machine shared with other work.
type cpuMeter struct {
	o                   options
	server0, pg0, self0 time.Duration // at startCPU
}

func (m *cpuMeter) read() (server, pg, self time.Duration) {
	if m.o.serverPID > 0 {
		server = procCPU(m.o.serverPID)
	}
	if m.o.pgPID > 0 {
		for _, pid := range procTree(m.o.pgPID) {
			pg += procCPU(pid)
		}
	}
	return server, pg, procCPU(os.Getpid())
}

func startCPU(o options) *cpuMeter {
	m := &cpuMeter{o: o}
	m.server0, m.pg0, m.self0 = m.read()
	return m
}

// report returns the CPU milliseconds per 1,000 spans of each process since startCPU.
func (m *cpuMeter) report(spans int) string {
	server, pg, self := m.read()
	per := func(d time.Duration) float64 { return float64(d.Milliseconds()) * 1000 / float64(spans) }
	s := fmt.Sprintf("cpu ms per 1000 spans: loadtest %.0f", per(self-m.self0))
	if m.o.serverPID > 0 {
		s += fmt.Sprintf(", server %.0f", per(server-m.server0))
	}
	if m.o.pgPID > 0 {
		s += fmt.Sprintf(", postgres %.0f (backends that exited are not counted)", per(pg-m.pg0))
	}
	return s
}

// procCPU is a process's user and system time, from /proc; 0 when unreadable.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the 14th and 15th fields.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// procTree is pid and its descendants.
func procTree(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

var idCounter atomic.Uint64

func init() { idCounter.Store(uint64(time.Now().UnixNano())) }

func newTraceID() string { return fmt.Sprintf("%016x%016x", idCounter.Add(1), idCounter.Add(1)) }
func newSpanID() string  { return fmt.Sprintf("%016x", idCounter.Add(1)) }

// proseWords is the vocabulary of prose.
var proseWords = strings.Fields(`the a of to and in is it that for on with as was at by be this have from
	or one had not but what all were when we there can an your which their said if do will each about
	how up out them then she many some so these would other into has more her two like him see time
	could no make than first been its who now people my made over did down only way find use may
	water long little very after words called just where most know get through back much before go
	good new write our used me man too any day same right look think also around another came come
	work three word must because does part even place well such here take why things help put years
	different away again off went old number great tell men say small every found still between name
	should home big give air line set own under read last never us left end along while might next
	sound below saw something thought both few those always looked show large often together asked
	house world going want school important until form food keep children feet land side without boy
	once animals life enough took sometimes four head above kind began almost live page got earth need
	far hand high year mother light parts country father let night following picture being study second
	eyes soon times story boys since white days ever paper hard near sentence better best across during
	today others however sure means knew its try told young miles sun ways thing whole hear example heard
	several change answer room sea against top turned learn point city play toward five using himself
	usually model tool prompt response token agent weather forecast approve refund order customer`)

// prose is about n bytes of English-like text: words drawn at random from proseWords, so that it
// compresses about as well as the prompts and answers real spans carry, and not, like a run of one
// letter, to almost nothing.
func prose(n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(proseWords[rand.IntN(len(proseWords))])
	}
	return b.String()[:n]
}

// genkitBody builds one TraceData body: n spans of one trace, the first the root, each padded to
// about spanBytes of JSON with a Genkit-like input attribute. end 0 means running.
func genkitBody(traceID string, spanIDs []string, rootID string, spanBytes int, withRoot bool, running bool) []byte {
	pad := prose(max(spanBytes-560, 16))
	now := float64(time.Now().UnixMicro()) / 1000
	spans := make(map[string]any, len(spanIDs))
	for i, id := range spanIDs {
		end := now + 5
		if running {
			end = 0
		}
		sp := map[string]any{
			"spanId": id, "traceId": traceID, "startTime": now + float64(i)*0.001, "endTime": end,
			"attributes": map[string]any{"genkit:name": "tool" + id[:4], "genkit:type": "action",
				"genkit:metadata:subtype": "tool", "genkit:path": "/{flow,t:flow}/{tool,t:action}",
				"genkit:input": `{"q":"` + pad + `"}`, "genkit:state": "success"},
			"displayName": "tool", "instrumentationLibrary": map[string]any{"name": "genkit-tracer", "version": "v1"},
			"spanKind": "INTERNAL", "sameProcessAsParentSpan": map[string]any{"value": true},
			"status": map[string]any{"code": 0}, "timeEvents": map[string]any{},
		}
		if id != rootID {
			sp["parentSpanId"] = rootID
		}
		spans[id] = sp
	}
	body := map[string]any{"traceId": traceID, "displayName": "", "startTime": 0, "endTime": 0, "spans": spans}
	if withRoot {
		body["displayName"], body["startTime"], body["endTime"] = "flow", now, now+10
	}
	b, _ := json.Marshal(body)
	return b
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
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, out)
	}
	return nil
}

// parallel runs work(i) for i in [0, n) on clients goroutines and returns the elapsed time.
func parallel(ctx context.Context, clients, n int, work func(i int) error) (time.Duration, error) {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := work(i); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return time.Since(start), first
}

func batched(ctx context.Context, o options, send sender, st *store.Store) error {
	requests := o.spans / o.batch
	bodies := make([][]byte, requests)
	copyRows := make([][]store.Span, requests)
	for i := range bodies {
		ids := make([]string, o.batch)
		for j := range ids {
			ids[j] = newSpanID()
		}
		bodies[i] = genkitBody(newTraceID(), ids, ids[0], o.spanBytes, true, false)
		// The baseline copies the same rows under fresh ids (the server keeps the originals).
		cids := make([]string, o.batch)
		for j := range cids {
			cids[j] = newSpanID()
		}
		rows, err := trace.DecodeGenkit(genkitBody(newTraceID(), cids, cids[0], o.spanBytes, true, false))
		if err != nil {
			return err
		}
		copyRows[i] = rows
	}
	var bytesSent int
	for _, b := range bodies {
		bytesSent += len(b)
	}
	cpu := startCPU(o)
	elapsed, err := parallel(ctx, o.clients, requests, func(i int) error {
		return send(ctx, bodies[i])
	})
	if err != nil {
		return err
	}
	serverCPU := cpu.report(requests * o.batch)
	server := float64(requests*o.batch) / elapsed.Seconds()
	cpu = startCPU(o)
	copyElapsed, err := parallel(ctx, o.clients, requests, func(i int) error {
		return rawCopy(ctx, st.Pool(), copyRows[i])
	})
	if err != nil {
		return err
	}
	copyCPU := cpu.report(requests * o.batch)
	raw := float64(requests*o.batch) / copyElapsed.Seconds()
	fmt.Printf("batched: %d spans in %d requests (%d spans/request, %.0f bytes/span, %d clients): %.0f spans/s; raw pgx CopyFrom, same rows, batches and clients: %.0f spans/s; ratio %.0f%%\n",
		requests*o.batch, requests, o.batch, float64(bytesSent)/float64(requests*o.batch), o.clients, server, raw, 100*server/raw)
	fmt.Printf("batched: server %s\nbatched: raw COPY %s\n", serverCPU, copyCPU)
	return nil
}

func realtime(ctx context.Context, o options, send sender, st *store.Store) error {
	traceID := newTraceID()
	rootID := newSpanID()
	ids := make([]string, o.realtime)
	for i := range ids {
		ids[i] = newSpanID()
	}
	start := make([][]byte, len(ids))
	end := make([][]byte, len(ids))
	for i, id := range ids {
		start[i] = genkitBody(traceID, []string{id}, rootID, o.spanBytes, false, true)
		end[i] = genkitBody(traceID, []string{id}, rootID, o.spanBytes, false, false)
	}
	cpu := startCPU(o)
	elapsed, err := parallel(ctx, o.clients, len(ids), func(i int) error {
		if err := send(ctx, start[i]); err != nil {
			return err
		}
		return send(ctx, end[i])
	})
	if err != nil {
		return err
	}
	fmt.Printf("realtime: %d spans, two POSTs each, %d clients, all into one trace: %.0f spans/s (%.0f requests/s)\n",
		len(ids), o.clients, float64(len(ids))/elapsed.Seconds(), float64(2*len(ids))/elapsed.Seconds())
	fmt.Printf("realtime: %s\n", cpu.report(len(ids)))
	// Every span acknowledged is stored, once, ended (the starts are held and then superseded).
	var stored, ended int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE end_time_unix_nano <> 0) FROM spans WHERE trace_id = $1`,
		traceID).Scan(&stored, &ended); err != nil {
		return err
	}
	if stored != len(ids) || ended != len(ids) {
		return fmt.Errorf("realtime: %d spans stored, %d of them ended, of %d sent", stored, ended, len(ids))
	}
	return nil
}

func bigTrace(ctx context.Context, o options, send sender, st *store.Store) error {
	traceID := newTraceID()
	rootID := newSpanID()
	bodies := make([][]byte, o.big)
	for i := range bodies {
		bodies[i] = genkitBody(traceID, []string{newSpanID()}, rootID, o.spanBytes, false, false)
	}
	elapsed, err := parallel(ctx, o.clients, o.big, func(i int) error {
		return send(ctx, bodies[i])
	})
	if err != nil {
		return err
	}
	if err := send(ctx, genkitBody(traceID, []string{rootID}, rootID, o.spanBytes, true, false)); err != nil {
		return err
	}
	var stored int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM spans WHERE trace_id = $1`, traceID).Scan(&stored); err != nil {
		return err
	}
	tr, err := st.TraceGet(ctx, traceID)
	if err != nil {
		return err
	}
	fmt.Printf("bigtrace: %d spans sent one per POST (root last, %d clients) in %v: %d stored, summary span_count %d\n",
		o.big+1, o.clients, elapsed.Round(time.Millisecond), stored, tr.SpanCount)
	if stored != o.big+1 {
		return fmt.Errorf("stored %d of %d spans", stored, o.big+1)
	}
	return nil
}

func list(ctx context.Context, o options, client *http.Client, base string, st *store.Store) error {
	var have int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM spans`).Scan(&have); err != nil {
		return err
	}
	if missing := o.listSpans - have; missing > 0 {
		start := time.Now()
		const perTrace, perBatch = 20, 5000
		batches := (missing + perBatch - 1) / perBatch
		_, err := parallel(ctx, 2, batches, func(int) error {
			var rows []store.Span
			for len(rows) < perBatch {
				ids := make([]string, perTrace)
				for j := range ids {
					ids[j] = newSpanID()
				}
				spans, err := trace.DecodeGenkit(genkitBody(newTraceID(), ids, ids[0], 300, true, false))
				if err != nil {
					return err
				}
				rows = append(rows, spans...)
			}
			_, err := st.SpanIngestCopy(ctx, rows)
			return err
		})
		if err != nil {
			return err
		}
		fmt.Printf("list: seeded %d spans in %v\n", batches*5000, time.Since(start).Round(time.Second))
		if _, err := st.Pool().Exec(ctx, `ANALYZE spans; ANALYZE traces`); err != nil {
			return err
		}
	}
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM spans`).Scan(&have); err != nil {
		return err
	}
	for _, path := range []string{"/api/traces?limit=50", "/api/v1/traces?limit=50"} {
		var lat []time.Duration
		for range o.listSamples {
			t0 := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", path, resp.Status)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		fmt.Printf("list: GET %s with %d spans stored: p50 %v, p95 %v (%d requests, client-side)\n",
			path, have, lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*95/100].Round(10*time.Microsecond), len(lat))
	}
	return nil
}

// rawCopyColumns are the spans table's columns that a raw COPY fills.
var rawCopyColumns = []string{"trace_id", "span_id", "parent_span_id", "name", "kind", "start_time_unix_nano",
	"end_time_unix_nano", "status_code", "status_message", "attributes", "events", "links", "resource", "scope",
	"scope_version", "source", "run_id"}

// rawCopy is the batched test's baseline: the same rows copied straight into the spans table with
// pgx's CopyFrom, in a transaction that commits without waiting for its WAL flush as ingest's do
// (no merge, no traces summary, no run check). It lives here, not in the store: nothing but this
// comparison writes spans that way.
func rawCopy(ctx context.Context, pool *pgxpool.Pool, spans []store.Span) error {
	orEmpty := func(raw []byte, empty string) string {
		if len(raw) == 0 {
			return empty
		}
		return string(raw)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true)`); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"spans"}, rawCopyColumns, pgx.CopyFromSlice(len(spans), func(i int) ([]any, error) {
			sp := &spans[i]
			source := sp.Source
			if source == "" {
				source = store.SpanSourceLoupe
			}
			return []any{sp.TraceID, sp.SpanID, sp.ParentSpanID, sp.Name, sp.Kind, sp.StartTime,
				sp.EndTime, sp.StatusCode, sp.StatusMessage, orEmpty(sp.Attributes, "{}"),
				orEmpty(sp.Events, "[]"), orEmpty(sp.Links, "[]"), orEmpty(sp.Resource, "{}"), sp.Scope,
				sp.ScopeVersion, source, sp.RunID}, nil
		}))
		if err != nil {
			return fmt.Errorf("copy %d spans: %w", len(spans), err)
		}
		return nil
	})
}

// runsScenario starts o.runs durable runs through POST /api/v1/runs, spread over the servers, from
// o.clients clients, then waits until every one has ended. runs/s counts from the first start to
// the last end; spans/s is the spans those runs wrote (their exporter's batches included) over
// the same time. A run that does not succeed fails the scenario.
func runsScenario(ctx context.Context, o options, client *http.Client, bases []string, st *store.Store) error {
	ids := make([]string, o.runs)
	body := []byte(fmt.Sprintf(`{"action":%q,"input":%s}`, o.runAction, o.runInput))
	cpu := startCPU(o)
	start := time.Now()
	_, err := parallel(ctx, o.clients, o.runs, func(i int) error {
		base := bases[i%len(bases)]
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/runs", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("POST %s/api/v1/runs: %s: %s", base, resp.Status, out)
		}
		var run struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(out, &run); err != nil {
			return err
		}
		ids[i] = run.ID
		return nil
	})
	if err != nil {
		return err
	}
	started := time.Since(start)
	var ended, succeeded int
	for {
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE status NOT IN ('queued', 'running')), count(*) FILTER (WHERE status = 'succeeded') FROM runs WHERE id = ANY($1::uuid[])`, ids).Scan(&ended, &succeeded); err != nil {
			return err
		}
		if ended == len(ids) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d runs ended: %w", ended, len(ids), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	if succeeded != len(ids) {
		return fmt.Errorf("%d of %d runs succeeded", succeeded, len(ids))
	}
	// The exporters write spans in batches: count until two reads half a second apart agree.
	spans := -1
	for {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM spans WHERE run_id = ANY($1::uuid[])`, ids).Scan(&n); err != nil {
			return err
		}
		if n == spans {
			break
		}
		spans = n
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	fmt.Printf("runs: %d runs of %s through %d server(s), %d clients: started in %v, all ended in %v: %.1f runs/s, %d spans: %.0f spans/s\n",
		len(ids), o.runAction, len(bases), o.clients, started.Round(time.Millisecond), elapsed.Round(time.Millisecond),
		float64(len(ids))/elapsed.Seconds(), spans, float64(spans)/elapsed.Seconds())
	if o.serverPID > 0 || o.pgPID > 0 {
		fmt.Printf("runs: %s\n", cpu.report(max(spans, 1)))
	}
	return nil
}
