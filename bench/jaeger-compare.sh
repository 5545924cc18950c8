#!/usr/bin/env bash
# Compare Loupe's GET /api/v1/traces/{id} against Jaeger v1.76's GET /api/traces/{id} for the same
# 10,000-span trace, in the same run, from the same client (bench/jaegerpeer).
#
#   1. builds Jaeger v1.76.0 (cmd/jaeger, pinned by bench/jaegerpeer/go.mod's tool line) from the
#      Go module proxy into bench/jaegerpeer/bin/jaeger, once (gitignored; rebuilt when the
#      version in go.mod changes);
#   2. builds devui from this checkout and starts it on a free loopback port with a private
#      PostgreSQL cluster in a temp dir (no DATABASE_URL: devui starts its own);
#   3. runs bench/jaegerpeer, which starts Jaeger with its memory store on loopback ports of its
#      own, sends both the same trace over OTLP/HTTP, waits until each serves every span, and
#      times the two GETs alternately, with and without gzip; it prints medians and the ratio
#      against the target (Jaeger/Loupe >= 3x).
#
# Usage (from the repo root):   bench/jaeger-compare.sh          (make bench-jaeger)
#   COUNT=50 bench/jaeger-compare.sh     # timed GETs per server and encoding (default 30)
#   SPANS=2000 bench/jaeger-compare.sh   # spans in the trace (default 10000)
#   ORDER=blocks bench/jaeger-compare.sh # all GETs of one server, then the other's (default
#                                        # alternate: one of each in turn)
#   OUT_DIR=/some/dir ...                # keep Jaeger's config and log, and devui's log, there
#
# Not part of make ci or make bench-smoke: Jaeger is a full OpenTelemetry Collector build (minutes
# on two cores). Missing the target is reported as MISSED but does not fail the script.
set -euo pipefail

COUNT="${COUNT:-30}"
SPANS="${SPANS:-10000}"
ORDER="${ORDER:-alternate}"
READY_TIMEOUT="${READY_TIMEOUT:-120}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=../compat/lib.sh
source compat/lib.sh
compat_tmp jaeger-compare
OUT_DIR="${OUT_DIR:-$TMP/out}"
mkdir -p "$OUT_DIR"
DEVUI_PID=""
cleanup() {
	local rc=$?
	stop_devui
	if ((rc != 0)) && [[ -s "$OUT_DIR/devui.log" ]]; then
		echo "--- devui log (last 20 lines) ---" >&2
		tail -n 20 "$OUT_DIR/devui.log" >&2
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT

# A random free loopback port below the kernel's ephemeral range (32768 and up).
pick_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "ERROR: no free port" >&2
	return 1
}

# shellcheck source=jaeger-lib.sh
source bench/jaeger-lib.sh
build_jaeger
echo "==> building devui and bench/jaegerpeer" >&2
go build -o "$TMP/devui" ./cmd/devui
(cd "$PEER" && go build -o "$TMP/jaegerpeer" .)

PORT="$(pick_port)"
URL="http://127.0.0.1:$PORT"
echo "==> devui serve on $URL, private cluster in $TMP/data" >&2
env -u DATABASE_URL "$TMP/devui" serve --dev --no-demo --workers 0 --log-level warn --addr "127.0.0.1:$PORT" \
	--data-dir "$TMP/data" >"$OUT_DIR/devui.log" 2>&1 &
DEVUI_PID=$!
wait_ready "$URL"

echo "==> load average before: $(uptime)" >&2
"$TMP/jaegerpeer" -jaeger "$JAEGER" -loupe "$URL" -spans "$SPANS" -count "$COUNT" -order "$ORDER" -work-dir "$OUT_DIR"
echo "==> load average after:  $(uptime)" >&2
