#!/usr/bin/env bash
# Check Loupe's Genkit telemetry API against a real Genkit Go v1.4.0 program.
#
# Builds devui, starts a throwaway Loupe (embedded PostgreSQL in a temp data dir, --dev, no demo
# agents, a free loopback port), runs bench/genkitpeer's TestGenkitGoSendsTracesToLoupe with
# LOUPE_URL pointing at it (the test sets GENKIT_TELEMETRY_SERVER, runs an agentFlow with two tool
# turns, and checks the trace through /api/traces and /api/v1/traces), then stops Loupe and removes
# the temp dir.
#
# Usage (from the repo root):   bench/genkit-telemetry.sh
#   KEEP_LOG=1 bench/genkit-telemetry.sh   # print devui's log even when the test passes
#   READY_TIMEOUT=180 bench/genkit-telemetry.sh   # seconds to wait for /readyz (default 120)
#
# Exit code: the test's (non-zero also when devui fails to build or start).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
READY_TIMEOUT="${READY_TIMEOUT:-120}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/loupe-genkit-telemetry.XXXXXX")"
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

# free_port asks the kernel for an unused loopback port.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' 2>/dev/null && return
	# Fallback without python: pick a random high port that nothing listens on.
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
echo "==> devui ready; running the Genkit Go test" >&2

rc=0
(cd "$ROOT/bench/genkitpeer" && env -u GENKIT_ENV -u GENKIT_TELEMETRY_SERVER LOUPE_URL="$URL" \
	go test -run '^TestGenkitGoSendsTracesToLoupe$' -v -count=1 .) || rc=$?
exit "$rc"
