#!/usr/bin/env bash
# Batched OTLP/HTTP ingest: Loupe against Jaeger v1.76 with its memory store and with badger, and
# against the raw COPY ceiling of the same rows in Loupe's own database, in the same run, from the
# same generator (bench/jaegerpeer -mode ingest; see bench/jaegerpeer/ingest.go).
#
#   1. builds Jaeger once (bench/jaeger-lib.sh), devui and bench/jaegerpeer;
#   2. starts a private PostgreSQL cluster (devui db start) and devui serve on it, on loopback,
#      with its pprof endpoint on;
#   3. loads Loupe, then Jaeger memory, then Jaeger badger, each for DURATION with CLIENTS
#      closed-loop clients posting BATCH-span protobuf bodies (~1.15 KB spans), and checks every
#      acknowledged span (Loupe: counted in PostgreSQL; Jaeger: a sample of traces read back);
#   4. COPYs the same rows into a copy of the spans table, at Loupe's own spans per transaction
#      and at CLIENTS × BATCH, from CLIENTS connections;
#   5. prints spans/s, the CPU time per span of each party (server, PostgreSQL, client), and the
#      ratios against the targets (Loupe ≥ 0.55× Jaeger memory, ≥ 75% of raw COPY at the same rows
#      per transaction), and with PROFILE=1 the top of a CPU profile of Loupe's server taken
#      during its load.
#
# Usage (from the repo root):   bench/ingest-compare.sh          (make bench-ingest)
#   DURATION=20s CLIENTS=8 BATCH=20 bench/ingest-compare.sh
#   JAEGER=none bench/ingest-compare.sh   # Loupe and raw COPY only (no Jaeger build)
#   PROFILE=1 bench/ingest-compare.sh     # and Loupe's CPU profile top (kept in OUT_DIR)
#   OUT_DIR=/some/dir ...                 # keep the logs and profile there
#
# Missing a target is reported as MISSED and does not fail the script; a span acknowledged and not
# stored does.
set -euo pipefail

DURATION="${DURATION:-10s}"
CLIENTS="${CLIENTS:-8}"
BATCH="${BATCH:-20}"
PROFILE="${PROFILE:-0}"
READY_TIMEOUT="${READY_TIMEOUT:-120}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=../compat/lib.sh
source compat/lib.sh
compat_tmp ingest-compare
OUT_DIR="${OUT_DIR:-$TMP/out}"
mkdir -p "$OUT_DIR"
DEVUI_PID=""
cleanup() {
	local rc=$?
	stop_devui
	[[ -x "$TMP/devui" ]] && "$TMP/devui" db stop --data-dir "$TMP/data" >/dev/null 2>&1 || true
	if ((rc != 0)) && [[ -s "$OUT_DIR/devui.log" ]]; then
		echo "--- devui log (last 20 lines) ---" >&2
		tail -n 20 "$OUT_DIR/devui.log" >&2
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT

JAEGER_ARG=""
if [[ "${JAEGER:-}" != "none" ]]; then
	# shellcheck source=jaeger-lib.sh
	source bench/jaeger-lib.sh
	build_jaeger
	JAEGER_ARG="$JAEGER"
fi

echo "==> building devui and bench/jaegerpeer" >&2
go build -o "$TMP/devui" ./cmd/devui
(cd bench/jaegerpeer && go build -o "$TMP/jaegerpeer" .)

DBURL="$("$TMP/devui" db start --data-dir "$TMP/data")"
PORT="$(free_port)"
PPROF="$(free_port)"
URL="http://127.0.0.1:$PORT"
echo "==> devui serve on $URL (pprof 127.0.0.1:$PPROF), cluster in $TMP/data" >&2
(cd "$TMP" && LOUPE_PPROF_ADDR="127.0.0.1:$PPROF" exec "$TMP/devui" serve --no-demo --workers 0 --log-level warn \
	--addr "127.0.0.1:$PORT" --database-url "$DBURL") >"$OUT_DIR/devui.log" 2>&1 &
DEVUI_PID=$!
wait_ready "$URL"

if [[ "$PROFILE" == 1 ]]; then
	# Loupe is loaded first, for DURATION: profile the middle of it.
	secs="${DURATION%s}"
	(sleep 2 && curl -fsS -o "$OUT_DIR/loupe-cpu.pprof" \
		"http://127.0.0.1:$PPROF/debug/pprof/profile?seconds=$((secs > 4 ? secs - 3 : 1))") &
	PROF_PID=$!
fi

# The postmaster's pid is the first line of its lock file: with devui's, it lets the client report
# each party's CPU per span.
PG_PID="$(head -n 1 "$TMP/data/postgres/postmaster.pid")"
echo "==> load average before: $(uptime)" >&2
"$TMP/jaegerpeer" -mode ingest -jaeger "$JAEGER_ARG" -loupe "$URL" -db "$DBURL" \
	-clients "$CLIENTS" -batch-spans "$BATCH" -duration "$DURATION" -work-dir "$OUT_DIR" \
	-loupe-pid "$DEVUI_PID" -pg-pid "$PG_PID"
echo "==> load average after:  $(uptime)" >&2

if [[ "$PROFILE" == 1 ]]; then
	wait "$PROF_PID" || true
	echo
	echo "Loupe serve's CPU profile during its load (top 25, flat; $OUT_DIR/loupe-cpu.pprof):"
	go tool pprof -top -nodecount 25 "$TMP/devui" "$OUT_DIR/loupe-cpu.pprof" 2>/dev/null | sed -n '4,40p'
fi
