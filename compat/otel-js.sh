#!/usr/bin/env bash
# Check Loupe's OTLP/HTTP ingest against the real OpenTelemetry JS SDK and exporter
# (@opentelemetry/sdk-trace-base, and @opentelemetry/exporter-trace-otlp-http and -otlp-proto:
# JSON and protobuf, pinned in compat/otel-js/package-lock.json), with spans after the OTel GenAI
# semantic conventions.
#
# Builds devui, starts a throwaway Loupe (embedded PostgreSQL in a temp data dir, --dev, no demo
# agents, a free loopback port), installs the pinned packages (npm ci), runs compat/otel-js/emit.mjs
# (invoke_agent → chat → execute_tool ×2, one failing → chat, sent to /v1/traces) once per
# encoding, each followed by compat/otel-js/check.mjs, which checks through /api/v1/traces, /api/v1/traces/{id}/turns, the log
# record sent to /v1/logs through Genkit's log APIs (/api/logs, /api/traces/{id}[/spans/{span}]/logs) and the
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
# shellcheck source=compat/lib.sh
source "$ROOT/compat/lib.sh"
compat_tmp otel-js
DEVUI_PID=""
LOG="$TMP/devui.log"

cleanup() {
	local rc=$?
	stop_devui
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


echo "==> installing the pinned OpenTelemetry JS packages (npm ci)" >&2
(cd "$APP" && npm ci --no-audit --no-fund --loglevel=error >&2)

echo "==> building devui" >&2
(cd "$ROOT" && go build -o "$TMP/devui" ./cmd/devui)

PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"
echo "==> starting devui on $URL (data dir $TMP/data)" >&2
"$TMP/devui" serve --dev --no-demo --addr "127.0.0.1:$PORT" --data-dir "$TMP/data" >"$LOG" 2>&1 &
DEVUI_PID=$!

wait_ready "$URL"

# The same run twice: through the JSON exporter, and through the protobuf one (protobufjs's
# encoding, which Loupe decodes with its own wire reader, not pdata).
for encoding in json protobuf; do
	echo "==> devui ready; sending a GenAI agent run with the OpenTelemetry JS exporter, OTLP/HTTP $encoding" >&2
	sent="$(cd "$APP" && LOUPE_URL="$URL" OTLP_ENCODING="$encoding" node emit.mjs)"
	echo "    sent: $sent" >&2
	echo "==> checking what Loupe stored and shows" >&2
	(cd "$APP" && LOUPE_URL="$URL" node check.mjs "$sent")
done
