#!/usr/bin/env bash
# Run every benchmark once, so that a broken benchmark fails the build instead of rotting until the
# next time someone wants its figures. Nothing here measures anything: -benchtime 1x and tiny loads.
#
#   1. every Go benchmark of Loupe's module, once;
#   2. every Go benchmark of bench/genkitpeer (Genkit Go v1.4.0, its own module), once;
#   3. bench/compare.sh with one run of one iteration per side;
#   4. the trace ingest load test (bench/loadtest) against a throwaway devui, every
#      scenario at a few hundred spans;
#   5. bench/jaegerpeer (the Jaeger comparison's client) against the same devui, Loupe's side
#      only, at a few hundred spans;
#   6. bench/scale.sh (several serves on one PostgreSQL) with two serves and a worker on a database
#      of the same cluster, at 20 runs and 200 spans.
#
# Skipped here on purpose: bench/jaeger-compare.sh's Jaeger side. Building Jaeger v1.76
# (cmd/jaeger, a full OpenTelemetry Collector) takes minutes and is kept out of CI's path; step 5
# still builds and runs the comparison's client, which needs no module of Jaeger's.
# BenchmarkRunPageInChromium10k runs at 1,000 spans here (LOUPE_BENCH_SPANS), not 10,000, and the
# runs-list benchmarks (the store's BenchmarkRunListSortedByTokens100k, the server's
# BenchmarkRunsPageSortedByTokens100k) at 2,000 runs (LOUPE_BENCH_RUNS), not 100,000, and
# BenchmarkRunPageSmallRunAmong1MSpans beside 1,000 other spans (LOUPE_BENCH_OTHER_SPANS), not 1,000,000,
# and BenchmarkSpans10M at 20,000 spans (LOUPE_BENCH_RETENTION_SPANS), not 10,000,000.
#
# Usage (from the repo root):   bench/smoke.sh      (make bench-smoke; part of make ci)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/loupe-bench-smoke.XXXXXX")"
# As root, devui runs the embedded PostgreSQL as user postgres, which must be able to reach the
# data dir: let others traverse (not list) the temp dir.
chmod 0711 "$TMP"
DEVUI_PID=""
cleanup() {
	local rc=$?
	if [[ -n "$DEVUI_PID" ]] && kill -0 "$DEVUI_PID" 2>/dev/null; then
		kill -INT "$DEVUI_PID" 2>/dev/null || true
		for _ in $(seq 1 300); do
			kill -0 "$DEVUI_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$DEVUI_PID" 2>/dev/null || true
		wait "$DEVUI_PID" 2>/dev/null || true
	fi
	if ((rc != 0)) && [[ -s "$TMP/devui.log" ]]; then
		echo "--- devui log (last 40 lines) ---" >&2
		tail -n 40 "$TMP/devui.log" >&2
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT

echo "==> Go benchmarks, once each" >&2
LOUPE_BENCH_RUNS=2000 LOUPE_BENCH_SPANS=1000 LOUPE_BENCH_OTHER_SPANS=1000 LOUPE_BENCH_RETENTION_SPANS=20000 go test -count=1 -run '^$' -bench . -benchtime 1x ./...

echo "==> bench/genkitpeer benchmarks, once each" >&2
(cd bench/genkitpeer && go test -count=1 -run '^$' -bench . -benchtime 1x .)

echo "==> bench/compare.sh, one iteration a side" >&2
COUNT=1 BENCHTIME=1x OUT_DIR="$TMP/compare" bench/compare.sh

echo "==> trace ingest load test against a throwaway devui" >&2
go build -o "$TMP/devui" ./cmd/devui
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
URL="http://127.0.0.1:$PORT"
"$TMP/devui" serve --dev --no-demo --addr "127.0.0.1:$PORT" --data-dir "$TMP/data" >"$TMP/devui.log" 2>&1 &
DEVUI_PID=$!
deadline=$((SECONDS + 120))
until curl -fsS -o /dev/null "$URL/readyz" 2>/dev/null; do
	kill -0 "$DEVUI_PID" 2>/dev/null || { echo "devui exited before becoming ready" >&2; exit 1; }
	((SECONDS < deadline)) || { echo "devui not ready after 120s" >&2; exit 1; }
	sleep 0.25
done
DB="$("$TMP/devui" db url --data-dir "$TMP/data")"
go run ./bench/loadtest -url "$URL" -db "$DB" -clients 2 -spans 400 -realtime-spans 100 \
	-big 50 -list-spans 2000 -list-samples 5 -timeout 2m

echo "==> bench/jaegerpeer, Loupe's side only (Jaeger is not built here)" >&2
(cd bench/jaegerpeer && go run . -jaeger "" -loupe "$URL" -spans 300 -count 2 -warmup 1 -timeout 2m)
echo "==> bench/jaegerpeer -mode ingest (make bench-ingest's client), Loupe and raw COPY only, 1 s each" >&2
(cd bench/jaegerpeer && go run . -mode ingest -jaeger "" -loupe "$URL" -db "$DB" -clients 2 -duration 1s -pause 0s -timeout 2m)
echo "==> bench/scale.sh, two serves and a worker, tiny" >&2
# Two consecutive free ports below the kernel's ephemeral range: a port the kernel picks is in that
# range, and the one after it may be any outgoing connection's local port (a serve once failed to
# bind so, with "address already in use").
SCALE_PORT="$(python3 - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(500):
    p = random.randrange(10000, low - 2)
    held = []
    try:
        for q in (p, p + 1):
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", q))
    except OSError:
        continue
    finally:
        for s in held:
            s.close()
    print(p)
    break
PY
)"
DATABASE_URL="$DB" BIN="$TMP/devui" TOPOLOGIES="2:1" RUNS=20 SPANS=200 CLIENTS=2 PORT="$SCALE_PORT" bench/scale.sh
echo "bench smoke: every benchmark ran" >&2
