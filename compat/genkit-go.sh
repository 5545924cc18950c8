#!/usr/bin/env bash
# Check Loupe as the Dev UI of a real Genkit Go app (compat/genkit-go, github.com/firebase/genkit/go
# v1.4.0 pinned in its own go.mod).
#
# Builds devui, downloads the app's modules, then runs
#   devui start -- go run .
# in compat/genkit-go on a throwaway Loupe (embedded PostgreSQL in a temp data dir, a free loopback
# port), and checks through Loupe's API (compat/genkit-js/check.mjs, the same checks as for the
# Genkit JS app, whose actions the Go app mirrors) that the app's actions are listed under its name,
# a flow runs as a Loupe run linked to the app's trace, a streaming flow's chunks are stored, and a
# prompt whose tool interrupts waits in the inbox and, resolved there, goes on in the app, its trace
# reading as interrupted, not as an error; then that a flow returning its interrupted generate
# response is resumed the same way (and the rest of check.mjs: interrupted traces and their span
# panels, a tool interrupting on its own, a flow's unresumable interrupt, a cancelled streaming run,
# Genkit's telemetry API). Then it stops Loupe (which stops the app). Last, it runs the same app
# built with EXIT_AT_ONCE=1 (it returns once its actions are defined, as a program that forgets to
# block does) under devui start, and checks that devui backs it off, saying it exited on its own
# and must keep running. Then it removes the temp dir.
#
# Usage (from the repo root):   compat/genkit-go.sh
#   KEEP_LOG=1 compat/genkit-go.sh          # print devui's log even when the checks pass
#   READY_TIMEOUT=180 compat/genkit-go.sh   # seconds to wait for /readyz (default 120)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
APP="$ROOT/compat/genkit-go"
READY_TIMEOUT="${READY_TIMEOUT:-120}"
# Genkit Go names no app in its runtime file: Loupe names it after the project folder.
APP_NAME="genkit-go"
# shellcheck source=compat/lib.sh
source "$ROOT/compat/lib.sh"
compat_tmp genkit-go
DEVUI_PID=""
LOG="$TMP/devui.log"

cleanup() {
	local rc=$?
	stop_devui
	if ((rc != 0)) || [[ -n "${KEEP_LOG:-}" ]]; then
		if [[ -s "$LOG" ]]; then
			echo "--- devui log (last 80 lines) ---" >&2
			tail -n 80 "$LOG" >&2
		fi
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


command -v node >/dev/null || { echo "ERROR: node is not installed (apt-get install -y nodejs), check.mjs needs it" >&2; exit 1; }

echo "==> building devui" >&2
(cd "$ROOT" && go build -o "$TMP/devui" ./cmd/devui)
echo "==> go mod download in compat/genkit-go" >&2
# Downloaded (and the app built) before devui starts, so that `go run .` starts the app quickly.
(cd "$APP" && go mod download && go build -o "$TMP/genkit-go-app" .)

PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"
mkdir -m 0711 "$TMP/data"
echo "==> devui start -- go run . on $URL" >&2
# Genkit Go writes its runtime file under the nearest go.mod up from its working directory: the
# app runs in its own folder. The reflection server takes the first free port from 3100.
# GENKIT_RUNTIME_ID names the runtime, which Genkit Go's own health check then refuses: Loupe copes.
(cd "$APP" && exec env -u GENKIT_TELEMETRY_SERVER -u GENKIT_REFLECTION_PORT GENKIT_RUNTIME_ID=compat-genkit-go \
	"$TMP/devui" start --addr "127.0.0.1:$PORT" --data-dir "$TMP/data" -- go run .) >"$LOG" 2>&1 &
DEVUI_PID=$!
wait_ready "$URL"
(cd "$ROOT/compat/genkit-js" && LOUPE_URL="$URL" APP_NAME="$APP_NAME" CHECK_FLOW_RESUME=1 DEVUI_LOG="$LOG" node check.mjs)
stop_devui
if [[ -n "$(ls -A "$APP/.genkit/runtimes" 2>/dev/null | grep "^" || true)" ]]; then
	# The app removes its runtime file when it stops; one left means it did not stop.
	echo "WARNING: runtime files left in $APP/.genkit/runtimes" >&2
fi

# A program that exits 0 at once is backed off, not restarted in a tight loop. It runs in a folder
# of its own (a go.mod there) so that the runtime files it leaves behind stay in the temp dir.
echo "==> devui start -- a Genkit Go app that returns at once (EXIT_AT_ONCE=1)" >&2
QUICK="$TMP/exit-at-once"
mkdir -p "$QUICK"
printf 'module exitatonce\n' >"$QUICK/go.mod"
LOG="$TMP/devui-exit.log"
PORT="$(free_port)"
mkdir -m 0711 "$TMP/data-exit"
(cd "$QUICK" && exec env -u GENKIT_TELEMETRY_SERVER -u GENKIT_REFLECTION_PORT EXIT_AT_ONCE=1 \
	"$TMP/devui" start --addr "127.0.0.1:$PORT" --data-dir "$TMP/data-exit" -- "$TMP/genkit-go-app") >"$LOG" 2>&1 &
DEVUI_PID=$!
wait_ready "http://127.0.0.1:$PORT"
deadline=$((SECONDS + 60))
until grep -q "exited on its own" "$LOG"; do
	if ((SECONDS >= deadline)); then
		echo "ERROR: devui start did not say that the program exited on its own" >&2
		exit 1
	fi
	sleep 0.2
done
# Without a back-off it would have run the program about four more times in the next 8 s (after 1,
# 2 and 4 s); backed off, it runs it once more at most (after 5 s).
sleep 8
runs="$(grep -c "returning at once" "$LOG" || true)"
if ! grep -q "a program under devui start must keep running" "$LOG" || ! grep -q "Running it again in 5s" "$LOG" || ((runs > 2)); then
	echo "ERROR: devui start did not back off the program that exits at once (it ran $runs times in about 8 s)" >&2
	grep "devui start:\|returning at once" "$LOG" >&2 || true
	exit 1
fi
echo "ok   a program that exits 0 at once is backed off ($runs runs in about 8 s) and told to keep running" >&2
stop_devui
echo "==> passed" >&2
