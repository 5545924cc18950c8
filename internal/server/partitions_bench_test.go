package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// retentionSpans is how many spans BenchmarkSpans10M stores: 10,000,000, or
// LOUPE_BENCH_RETENTION_SPANS (bench/smoke.sh sets a tiny number).
func retentionSpans() int {
	if v, err := strconv.Atoi(os.Getenv("LOUPE_BENCH_RETENTION_SPANS")); err == nil && v > 0 {
		return v
	}
	return 10_000_000
}

// retentionWidth is the partitions' width BenchmarkSpans10M seeds: a day, or an hour when
// LOUPE_BENCH_PARTITION_WIDTH=hour (ten days of hours: 240 partitions, and drop-day then drops the
// oldest hour).
func retentionWidth() store.SpanPartitionWidth {
	if os.Getenv("LOUPE_BENCH_PARTITION_WIDTH") == "hour" {
		return store.SpanPartitionsHourly
	}
	return store.SpanPartitionsDaily
}

// retentionDays is how many UTC days, today included, BenchmarkSpans10M spreads its spans over,
// a partition each.
const retentionDays = 10

// seedDaysOfSpans stores n spans evenly over the retentionDays UTC days ending today, in traces of
// 100 (a root and 99 children; one in fifty with a failed span), about 1 KB a row, with their
// summary rows, by INSERT … SELECT generate_series inside PostgreSQL, one day per statement. Each
// root carries bench.key = k<trace number>, for the attribute search. It returns the first day.
func seedDaysOfSpans(ctx context.Context, b *testing.B, st *store.Store, n int) time.Time {
	b.Helper()
	today := time.Now().UTC().Truncate(store.SpanPartitionDay)
	first := today.Add(-(retentionDays - 1) * store.SpanPartitionDay)
	_, err := st.SpanPartitionsEnsure(ctx, first, today.Add(2*store.SpanPartitionDay), retentionWidth())
	require.NoError(b, err)
	// A day that expires in production was vacuumed long before: autovacuum is kept off the
	// freshly filled partitions, where it would hold up the drops being measured.
	_, err = st.Pool().Exec(ctx, `DO $$ DECLARE r record; BEGIN
		FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'spans'::regclass LOOP
			EXECUTE format('ALTER TABLE %I SET (autovacuum_enabled = off)', r.relname);
		END LOOP; END $$`)
	require.NoError(b, err)
	// Spans end an hour before now, so the newest are today's whatever the hour.
	step := (time.Since(first) - time.Hour).Nanoseconds() / int64(n)
	perDay := (n + retentionDays - 1) / retentionDays
	began := time.Now()
	for lo := 0; lo < n; lo += perDay {
		hi := min(lo+perDay, n)
		_, err := st.Pool().Exec(ctx, `
			INSERT INTO spans (trace_id, span_id, parent_span_id, name, start_time_unix_nano,
				end_time_unix_nano, status_code, attributes, resource, source)
			SELECT lpad(to_hex(g / 100), 32, 'e'), lpad(to_hex(g), 16, '0'),
				CASE WHEN g % 100 = 0 THEN NULL ELSE lpad(to_hex(g - g % 100), 16, '0') END,
				CASE WHEN g % 100 = 0 THEN 'benchFlow' ELSE 'tool' || (g % 7) END,
				$3::bigint + g::bigint * $4::bigint, $3::bigint + g::bigint * $4::bigint + 500000,
				CASE WHEN g % 5000 = 7 THEN 2 ELSE 0 END,
				json_build_object('genkit:type', 'action', 'genkit:metadata:subtype',
					CASE WHEN g % 100 = 0 THEN 'flow' ELSE 'tool' END,
					'bench.key', 'k' || (g / 100),
					'genkit:input', '{"query":"' || repeat(md5(g::text), 12) || '"}',
					'genkit:output', '{"summary":"' || repeat(md5((g + 1)::text), 12) || '"}'),
				'{"service.name":"bench"}', 'otlp'
			FROM generate_series($1::int, $2::int - 1) g`, lo, hi, first.UnixNano(), step)
		require.NoError(b, err)
		b.Logf("seeded spans %d–%d of %d (%s so far)", lo, hi, n, time.Since(began).Round(time.Second))
	}
	_, err = st.Pool().Exec(ctx, `
		INSERT INTO traces (trace_id, display_name, root_span_id, start_time_unix_nano,
			end_time_unix_nano, span_count, source, last_end_time_unix_nano, service,
			span_start_min_unix_nano, span_start_max_unix_nano)
		SELECT trace_id, 'benchFlow', min(span_id), min(start_time_unix_nano), max(end_time_unix_nano),
			count(*), 'otlp', max(end_time_unix_nano), 'bench', min(start_time_unix_nano),
			max(start_time_unix_nano)
		FROM spans GROUP BY trace_id`)
	require.NoError(b, err)
	_, err = st.Pool().Exec(ctx, `ANALYZE spans; ANALYZE traces`)
	require.NoError(b, err)
	b.Logf("seeded %d spans and their traces in %s", n, time.Since(began).Round(time.Second))
	return first
}

// BenchmarkSpans10M stores 10,000,000 spans of about 1 KB over ten daily partitions, and a
// 10,000-span Genkit-shaped run trace (seedTraceAt, through SpanIngest) started an hour ago, then
// measures, over real HTTP on loopback against a real PostgreSQL: the 50 newest traces
// (GET /api/v1/traces?limit=50); the 10,000-span trace gzipped (GET /api/v1/traces/{id});
// a search of the trace's spans for an attribute's value (GET /traces/{id}/search, the span
// tree's search); the trace list filtered by a root attribute's value (text=); and, last, the
// retention of the oldest day: drop-day is SpanPartitionDrop alone (the day's trace summaries
// deleted untimed first), retention-pass a whole Retention.RunOnce expiring the next day (its
// summaries deleted in batches, its straddlers' spans in the following day by rows, then the
// drop). Each iteration of those two takes another day, so at most retentionDays-2 of each.
// It needs about 12 GB of disk; the database is dropped at the end.
//
//	go test ./internal/server -run '^$' -bench 'Spans10M' -benchtime 3x -timeout 2h
func BenchmarkSpans10M(b *testing.B) {
	ctx := context.Background()
	tb := setup(b, opts{ingest: true, dev: true})
	n := retentionSpans()
	seedDaysOfSpans(ctx, b, tb.store, n)
	runID := seedTraceAt(b, tb.store, 10_000, time.Now().Add(-time.Hour).UnixNano())
	var traceID string
	require.NoError(b, tb.store.Pool().QueryRow(ctx, `SELECT trace_id FROM traces WHERE run_id = $1`, runID).Scan(&traceID))
	_, err := tb.store.Pool().Exec(ctx, `ANALYZE spans; ANALYZE traces`)
	require.NoError(b, err)

	tr := &http.Transport{DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	get := func(b *testing.B, path, encoding string) int64 {
		req, err := http.NewRequest(http.MethodGet, tb.url+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		if encoding != "" {
			req.Header.Set("Accept-Encoding", encoding)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		size, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: status %d, %v", path, resp.StatusCode, err)
		}
		return size
	}
	for _, bc := range []struct{ name, path, encoding string }{
		{"list-newest-50", "/api/v1/traces?limit=50", ""},
		{"trace-10k/gzip", "/api/v1/traces/" + traceID, "gzip"},
		{"search-attribute", "/traces/" + traceID + "/search?q=demo%2Fresearch", ""},
		{"list-by-root-attribute", "/api/v1/traces?limit=50&text=k" + strconv.Itoa(n/100/2), ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var size int64
			for b.Loop() {
				size = get(b, bc.path, bc.encoding)
			}
			b.ReportMetric(float64(size), "wire-bytes")
		})
	}

	// Ingest beside 10,000,000 stored spans and their partitions: a new trace's 81 spans (the
	// fast path, straight to COPY: the trace is new to this process), and the end of a span stored
	// in the middle of the oldest day (the merge, which reads and writes that day's partition only).
	b.Run("ingest-new-trace-81-spans", func(b *testing.B) {
		now := time.Now().Add(-time.Minute).UnixNano()
		i := 0
		for b.Loop() {
			i++
			traceID := fmt.Sprintf("f%031x", i)
			batch := make([]store.Span, 81)
			for j := range batch {
				batch[j] = store.Span{TraceID: traceID, SpanID: fmt.Sprintf("%016x", j+1), Name: "tool",
					StartTime: now + int64(j), EndTime: now + int64(j) + 1000, Source: store.SpanSourceOTLP,
					Attributes: []byte(`{"genkit:type":"action"}`)}
				if j > 0 {
					parent := fmt.Sprintf("%016x", 1)
					batch[j].ParentSpanID = &parent
				}
			}
			res, err := tb.store.SpanIngest(ctx, batch)
			require.NoError(b, err)
			require.Equal(b, int64(81), res.Inserted)
		}
		b.ReportMetric(float64(81*b.N)/b.Elapsed().Seconds(), "spans/s")
	})
	b.Run("ingest-end-of-a-stored-span", func(b *testing.B) {
		var sp store.Span
		require.NoError(b, tb.store.Pool().QueryRow(ctx, `SELECT trace_id, span_id, start_time_unix_nano,
			end_time_unix_nano FROM spans WHERE trace_id = lpad(to_hex($1::int), 32, 'e') AND parent_span_id IS NOT NULL LIMIT 1`,
			n/100/retentionDays/2).Scan(&sp.TraceID, &sp.SpanID, &sp.StartTime, &sp.EndTime))
		sp.Name, sp.Source, sp.Attributes = "tool", store.SpanSourceOTLP, []byte(`{}`)
		for b.Loop() {
			sp.EndTime++
			res, err := tb.store.SpanIngest(ctx, []store.Span{sp})
			require.NoError(b, err)
			require.Equal(b, int64(1), res.Updated)
		}
	})

	oldest := func(b *testing.B) store.SpanPartition {
		parts, err := tb.store.SpanPartitions(ctx)
		require.NoError(b, err)
		require.Greater(b, len(parts), 4, "a day to expire is left (at most %d iterations)", retentionDays-2)
		return parts[0]
	}
	b.Run("drop-day", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			day := oldest(b)
			for {
				t, _, err := tb.store.TraceDeleteBatch(ctx, store.TraceDeleteParams{OlderThan: day.To,
					Limit: 1000, DropFrom: day.From, DropTo: day.To})
				require.NoError(b, err)
				if t == 0 {
					break
				}
			}
			b.StartTimer()
			_, err := tb.store.SpanPartitionDrop(ctx, day)
			require.NoError(b, err)
		}
	})
	b.Run("retention-pass", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			day := oldest(b)
			ret := trace.NewRetention(tb.store, trace.RetentionConfig{
				MaxAge: time.Since(time.Unix(0, day.To)), BatchTraces: 1000, Pause: time.Millisecond}, nil, nil)
			b.StartTimer()
			traces, spans, err := ret.RunOnce(ctx)
			require.NoError(b, err)
			b.StopTimer()
			b.Logf("retention pass: %d traces, %d spans, partition %s", traces, spans, day.Name)
			parts, err := tb.store.SpanPartitions(ctx)
			require.NoError(b, err)
			require.NotEqual(b, day.Name, parts[0].Name, fmt.Sprintf("%s was dropped", day.Name))
			b.StartTimer()
		}
	})
}
