package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

// otherSpans is how many spans of other traces the scale test and benchmark store beside the run
// under test: 1,000,000, or LOUPE_BENCH_OTHER_SPANS (bench/smoke.sh sets a tiny number).
func otherSpans() int {
	if v, err := strconv.Atoi(os.Getenv("LOUPE_BENCH_OTHER_SPANS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// otherSpansURL is a fresh migrated database holding otherSpans() spans of other traces
// (seedOtherSpans), built once per test cluster and then cloned.
func otherSpansURL(t testing.TB) string {
	t.Helper()
	n := otherSpans()
	return storetest.NewSeededURL(t, "other_spans_v1_"+strconv.Itoa(n), func(ctx context.Context, url string) error {
		began := time.Now()
		defer func() {
			t.Logf("seeded %d other spans in %s (once per test cluster)", n, time.Since(began).Round(time.Millisecond))
		}()
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return err
		}
		defer pool.Close()
		return seedOtherSpans(ctx, pool, n)
	})
}

// seedOtherSpans stores n spans in traces of ten (a root and nine children, one trace in fifty
// with a failed tool, every root naming a run id in its attributes as Loupe's own do), with their
// summary rows, in two statements, then ANALYZEs, so that the planner sees the table's real size.
func seedOtherSpans(ctx context.Context, pool *pgxpool.Pool, n int) error {
	if _, err := pool.Exec(ctx, `
		INSERT INTO spans (trace_id, span_id, parent_span_id, name, start_time_unix_nano,
			end_time_unix_nano, status_code, attributes, source)
		SELECT lpad(to_hex(g / 10), 32, 'f'), lpad(to_hex(g), 16, '0'),
			CASE WHEN g % 10 = 0 THEN NULL ELSE lpad(to_hex(g - g % 10), 16, '0') END,
			CASE WHEN g % 10 = 0 THEN 'otherFlow' ELSE 'tool' || (g % 7) END,
			1600000000000000000 + g::bigint * 1000000, 1600000000000000000 + g::bigint * 1000000 + 500000,
			CASE WHEN g % 500 = 7 THEN 2 ELSE 0 END,
			CASE WHEN g % 10 = 0
				THEN jsonb_build_object('loupe.run.id', md5(g::text)::uuid::text, 'genkit:type', 'action',
					'genkit:input', '{"topic":"other ' || g || '"}')
				ELSE jsonb_build_object('genkit:type', 'action', 'genkit:metadata:subtype', 'tool') END,
			'otlp'
		FROM generate_series(10, $1::int + 9) g`, n); err != nil {
		return fmt.Errorf("seed spans: %w", err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO traces (trace_id, display_name, root_span_id, start_time_unix_nano,
			end_time_unix_nano, span_count, source, last_end_time_unix_nano, span_start_min_unix_nano,
			span_start_max_unix_nano)
		SELECT trace_id, 'otherFlow', min(span_id), min(start_time_unix_nano), max(end_time_unix_nano),
			count(*), 'otlp', max(end_time_unix_nano), min(start_time_unix_nano), max(start_time_unix_nano)
		FROM spans GROUP BY trace_id`); err != nil {
		return fmt.Errorf("seed traces: %w", err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE spans; ANALYZE traces`); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// seqScanOnSpans finds the sequential scans of a plan on spans or one of its partitions.
var seqScanOnSpans = regexp.MustCompile(`Seq Scan on (spans\w*)`)

// seedSmallRun stores a failed run with a 3-span trace (flow, generate, a failed tool call).
func seedSmallRun(t testing.TB, st *store.Store) (uuid.UUID, string) {
	t.Helper()
	ctx := context.Background()
	run, err := st.RunCreate(ctx, store.RunCreateParams{Action: "/flow/travelAgent", Input: json.RawMessage(`{"destination":"Lisbon"}`)})
	require.NoError(t, err)
	traceID := strings.ReplaceAll(uuid.NewString(), "-", "")
	t0 := time.Now().UnixNano()
	span := func(id, parent, name string, status int16, attrs string, start, end int64) store.Span {
		s := store.Span{TraceID: traceID, SpanID: id, Name: name, StartTime: start, EndTime: end, StatusCode: status,
			Attributes: json.RawMessage(attrs), Events: json.RawMessage(`[]`), Links: json.RawMessage(`[]`),
			Resource: json.RawMessage(`{"service.name":"loupe"}`), Source: store.SpanSourceLoupe, RunID: &run.ID}
		if parent != "" {
			s.ParentSpanID = &parent
		}
		return s
	}
	rid := run.ID.String()
	_, err = st.SpanIngest(ctx, []store.Span{
		span("00000000000000a1", "", "travelAgent", 2, `{"loupe.run.id":"`+rid+`","genkit:type":"action","genkit:metadata:subtype":"flow","genkit:input":"{\"destination\":\"Lisbon\"}"}`, t0, t0+3e6),
		span("00000000000000a2", "00000000000000a1", "generate", 2, `{"loupe.run.id":"`+rid+`","genkit:type":"util","genkit:name":"generate","loupe.turn.index":"0"}`, t0+1e5, t0+29e5),
		span("00000000000000a3", "00000000000000a2", "bookFlight", 2, `{"loupe.run.id":"`+rid+`","genkit:type":"action","genkit:metadata:subtype":"tool","gen_ai.tool.name":"bookFlight","genkit:input":"{\"to\":\"LIS\"}"}`, t0+2e5, t0+28e5),
	})
	require.NoError(t, err)
	return run.ID, traceID
}

// statementLog records every statement a pool runs, with its arguments.
type statementLog struct {
	mu   sync.Mutex
	on   bool
	seen []loggedStatement
}

type loggedStatement struct {
	page string
	sql  string
	args []any
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on {
		page, _ := ctx.Value(pageKey{}).(string)
		l.seen = append(l.seen, loggedStatement{page: page, sql: d.SQL, args: d.Args})
	}
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type pageKey struct{}

// TestPageQueriesReadNoSpansSequentially proves that the cost of a page follows its content, not
// the database: with a million other spans stored (and ANALYZEd), EXPLAIN of every statement the
// run, trace and list pages and their JSON APIs run has no sequential scan of spans. It records the
// statements as the pages run them (a pgx tracer), then explains each with its own arguments.
func TestPageQueriesReadNoSpansSequentially(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(otherSpansURL(t))
	require.NoError(t, err)
	log := &statementLog{}
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool)
	runID, traceID := seedSmallRun(t, st)
	traces, err := trace.NewService(trace.Config{Store: st})
	require.NoError(t, err)
	t.Cleanup(traces.Close)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: true}, Deps{Store: st, Traces: traces})
	require.NoError(t, err)

	rid := runID.String()
	pages := []string{
		"/runs/" + rid,
		"/runs/" + rid + "/trace",
		"/runs/" + rid + "?span=00000000000000a3",
		"/runs/" + rid + "/sections",
		"/runs",
		"/runs?sort=cost",
		"/sessions",
		"/api/v1/sessions",
		"/traces",
		"/traces?status=error",
		"/traces?q=travel",
		"/traces?text=Lisbon",
		"/traces?min_duration=1ms&max_duration=10s",
		"/traces?sort=duration",
		"/traces/" + traceID,
		"/traces/" + traceID + "/tree",
		"/traces/" + traceID + "/search?q=book",
		"/traces/" + traceID + "/spans/00000000000000a3",
		"/api/v1/traces?run_id=" + rid,
		"/api/v1/traces?status=error",
		"/api/v1/traces/" + traceID,
		"/api/v1/traces/" + traceID + "/turns",
		"/api/v1/traces/" + traceID + "/spans/00000000000000a3",
		"/api/traces",
		"/api/traces/" + traceID,
	}
	log.on = true
	for _, p := range pages {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:4000"+p, nil)
		req = req.WithContext(context.WithValue(req.Context(), pageKey{}, p))
		req.Header.Set("Accept", "text/html")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, "%s: %s", p, rec.Body.String())
	}
	log.mu.Lock()
	log.on = false
	seen := log.seen
	log.mu.Unlock()

	explained := 0
	for _, s := range seen {
		verb := strings.ToUpper(strings.Fields(strings.TrimSpace(s.sql) + " x")[0])
		if verb != "SELECT" && verb != "WITH" {
			continue // writes (a trace's read mark) touch rows by key
		}
		rows, err := pool.Query(ctx, "EXPLAIN "+s.sql, s.args...)
		require.NoError(t, err, "%s: explain %s", s.page, s.sql)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		plan := strings.Join(lines, "\n")
		// spans is partitioned by day: a scan of a partition of a few pages (today's, holding the
		// small run) reads no other trace's spans, where one of the partition holding the million
		// would read them all.
		for _, m := range seqScanOnSpans.FindAllStringSubmatch(plan, -1) {
			var pages int64
			require.NoError(t, pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass) / 8192`, m[1]).Scan(&pages))
			require.Less(t, pages, int64(16), "%s reads every span of %s:\n%s\n%s", s.page, m[1], s.sql, plan)
		}
		explained++
	}
	require.Greater(t, explained, len(pages), "the pages ran their queries through the traced pool")
	t.Logf("%d statements of %d pages explained with %d other spans stored", explained, len(pages), otherSpans())
}

// BenchmarkRunPageSmallRunAmong1MSpans measures the server's render of the run page of a 3-span
// failed run with 1,000,000 spans of other traces stored (LOUPE_BENCH_OTHER_SPANS sets another
// number): the page's cost must follow the run, not the table. It builds the dataset once per test cluster
// (otherSpansURL).
//
//	go test ./internal/server -run '^$' -bench RunPageSmallRunAmong1MSpans -benchmem
func BenchmarkRunPageSmallRunAmong1MSpans(b *testing.B) {
	pool, err := pgxpool.New(context.Background(), otherSpansURL(b))
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	st := store.New(pool)
	runID, _ := seedSmallRun(b, st)
	srv, err := New(Config{Addr: "127.0.0.1:0", Dev: true}, Deps{Store: st})
	require.NoError(b, err)
	for _, warm := range []bool{false, true} {
		name := fmt.Sprintf("other_spans=%d/cold", otherSpans())
		if warm {
			name = fmt.Sprintf("other_spans=%d/warm", otherSpans())
		}
		b.Run(name, func(b *testing.B) { runPageLoop(b, srv, runID, warm) })
	}
}
