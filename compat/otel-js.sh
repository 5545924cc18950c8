#!/usr/bin/env bash
# Check Loupe's OTLP/HTTP ingest against the real OpenTelemetry JS SDK and exporter
# (@opentelemetry/sdk-trace-base and @opentelemetry/exporter-trace-otlp-http, pinned in
# compat/otel-js/package-lock.json), with spans after the OTel GenAI semantic conventions.
#
# Builds devui, starts a throwaway Loupe (embedded PostgreSQL in a temp data dir, --dev, no demo
# agents, a free loopback port), installs the pinned packages (npm ci), runs compat/otel-js/emit.mjs
# (invoke_agent → chat → execute_tool ×2, one failing → chat, sent to /v1/traces), then
# compat/otel-js/check.mjs, which checks through /api/v1/traces, /api/v1/traces/{id}/turns and the
# pages what Loupe stored and shows; then stops Loupe and removes the temp dir.
#
# Usage (from the repo root):   compat/otel-js.sh
#   KEEP_LOG=1 compat/otel-js.sh   # print devui's log even when the check passes
#   READY_TIMEOUT=180 compat/otel-js.sh   # seconds to wait for /readyz (default 120)
#
# Exit code: the check's (non-zero also when devui fails to build or start, or npm ci fails).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
APP="$ROOT/compat/otel-js"
READY_TIMEOUT="${READY_TIMEOUT:-120}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/loupe-otel-js.XXXXXX")"
# As root, devui runs the embedded PostgreSQL as user postgres, which must be able to reach the
# data dir: let others traverse (not list) the temp dir.
chmod 0711 "$TMP"
DEVUI_PID=""
LOG="$TMP/devui.log"

cleanup() {
	local rc=$?
	if [[ -n "$DEVUI_PID" ]] && kill -0 "$DEVUI_PID" 2>/dev/null; then
		kill -INT "$DEVUI_PID" 2>/dev/null || true
		# Give devui time to stop the embedded PostgreSQL; then insist.
		for _ in $(seq 1 300); do
			kill -0 "$DEVUI_PID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$DEVUI_PID" 2>/dev/null; then
			echo "devui did not stop after SIGINT; killing it" >&2
			kill -KILL "$DEVUI_PID" 2>/dev/null || true
		fi
		wait "$DEVUI_PID" 2>/dev/null || true
	fi
	if ((rc != 0)) || [[ -n "${KEEP_LOG:-}" ]]; then
		if [[ -s "$LOG" ]]; then
			echo "--- devui log (last 40 lines) ---" >&2
			tail -n 40 "$LOG" >&2
		fi
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in node npm; do
	if ! command -v "$tool" >/dev/null; then
		echo "ERROR: $tool is not installed (Debian: apt-get install nodejs npm)" >&2
		exit 1
	fi
done

# free_port asks the kernel for an unused loopback port.
free_port() {
	node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})' 2>/dev/null && return
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "no free port found" >&2
	return 1
}

echo "==> installing the pinned OpenTelemetry JS packages (npm ci)" >&2
(cd "$APP" && npm ci --no-audit --no-fund --loglevel=error >&2)

echo "==> building devui" >&2
(cd "$ROOT" && go build -o "$TMP/devui" ./cmd/devui)

PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"
echo "==> starting devui on $URL (data dir $TMP/data)" >&2
"$TMP/devui" serve --dev --no-demo --addr "127.0.0.1:$PORT" --data-dir "$TMP/data" >"$LOG" 2>&1 &
DEVUI_PID=$!

deadline=$((SECONDS + READY_TIMEOUT))
until curl -fsS -o /dev/null "$URL/readyz" 2>/dev/null; do
	if ! kill -0 "$DEVUI_PID" 2>/dev/null; then
		echo "ERROR: devui exited before becoming ready" >&2
		exit 1
	fi
	if ((SECONDS >= deadline)); then
		echo "ERROR: devui not ready after ${READY_TIMEOUT}s" >&2
		exit 1
	fi
	sleep 0.25
done

echo "==> devui ready; sending a GenAI agent run with the OpenTelemetry JS exporter" >&2
sent="$(cd "$APP" && LOUPE_URL="$URL" node emit.mjs)"
echo "    sent: $sent" >&2
echo "==> checking what Loupe stored and shows" >&2
(cd "$APP" && LOUPE_URL="$URL" node check.mjs "$sent")
