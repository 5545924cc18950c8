#!/usr/bin/env bash
# Check Loupe as the Dev UI of a real Genkit JS app (compat/genkit-js, npm genkit 1.42.0 pinned).
#
# Builds devui, installs the app's packages (npm ci), then twice, in Genkit's dev mode and in its
# realtime telemetry mode (GENKIT_ENABLE_REALTIME_TELEMETRY=true): runs
#   devui start -- node app.mjs
# in compat/genkit-js on a throwaway Loupe (embedded PostgreSQL in a temp data dir, a free loopback
# port), and checks through Loupe's API (compat/genkit-js/check.mjs) that the app's actions are
# listed under its name, a flow runs as a Loupe run linked to the app's trace, a streaming flow's
# chunks are stored, and a prompt whose tool interrupts waits in the inbox and, resolved there, goes
# on in the app; the app's trace of the interrupted prompt reads as interrupted, not as an error (its
# tool span interrupted, the trace out of GET /api/v1/traces?status=error, in ?status=interrupted,
# its span panel leading with the question), the resumed trace links to the interrupted call; a
# tool that interrupts run on its own fails FAILED_PRECONDITION with its metadata; a flow returning
# an interrupt Loupe cannot resume fails, saying so in the API, the run page and the log; a
# streaming run cancelled keeps its trace id; Genkit's telemetry API returns the app's spans in
# Genkit's shape and keeps a finished trace's stream open; and the app's own log line (Genkit's
# logger, which Genkit JS sends to $GENKIT_TELEMETRY_SERVER/api/otlp) is stored in its span. In dev
# mode the real genkit CLI (compat/genkit-cli, installed with npm ci when it is not there) then reads
# the app's trace and its log line from Loupe: trace:get (and of an unknown id), log:list (by trace,
# span and severity), and `devui eval run` scores the app's echo flow with the app's own evaluator
# actions (an ai.defineEvaluator and @genkit-ai/evaluator's regex). Then it
# stops Loupe (which stops the app) and removes the temp dir.
#
# Usage (from the repo root):   compat/genkit-js.sh
#   KEEP_LOG=1 compat/genkit-js.sh          # print devui's log even when the checks pass
#   MODES=dev compat/genkit-js.sh           # one mode only (dev, realtime)
#   READY_TIMEOUT=180 compat/genkit-js.sh   # seconds to wait for /readyz (default 120)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
APP="$ROOT/compat/genkit-js"
READY_TIMEOUT="${READY_TIMEOUT:-120}"
MODES="${MODES:-dev realtime}"
# shellcheck source=compat/lib.sh
source "$ROOT/compat/lib.sh"
compat_tmp genkit-js
DEVUI_PID=""
LOG=""

cleanup() {
	local rc=$?
	stop_devui
	if ((rc != 0)) || [[ -n "${KEEP_LOG:-}" ]]; then
		if [[ -n "$LOG" && -s "$LOG" ]]; then
			echo "--- devui log (last 60 lines) ---" >&2
			tail -n 60 "$LOG" >&2
		fi
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


command -v node >/dev/null || { echo "ERROR: node is not installed (apt-get install -y nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "ERROR: npm is not installed (apt-get install -y npm)" >&2; exit 1; }

echo "==> building devui" >&2
(cd "$ROOT" && go build -o "$TMP/devui" ./cmd/devui)
echo "==> npm ci in compat/genkit-js" >&2
(cd "$APP" && npm ci --no-audit --no-fund --loglevel=error)

# cli_checks URL IDS: the real genkit CLI, run in the app's folder with GENKIT_TELEMETRY_SERVER at
# Loupe, reads the app's weather trace and its log line (ids in the JSON file IDS) from Loupe.
cli_checks() {
	local url="$1" ids="$2" cli="$ROOT/compat/genkit-cli/node_modules/.bin/genkit" out="$TMP/cli.txt"
	if [[ ! -x "$cli" ]]; then
		echo "==> npm ci in compat/genkit-cli (the genkit CLI)" >&2
		(cd "$ROOT/compat/genkit-cli" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
	fi
	local trace span
	trace="$(node -e 'console.log(require(process.argv[1]).weatherTrace)' "$ids")"
	span="$(node -e 'console.log(require(process.argv[1]).getWeatherSpan)' "$ids")"
	mkdir -p "$TMP/home/.config"
	# genkit_cli runs the CLI offline (no analytics, no update check) into $out.
	genkit_cli() {
		(cd "$APP" && HOME="$TMP/home" XDG_CONFIG_HOME="$TMP/home/.config" GENKIT_TELEMETRY_SERVER="$url" \
			GENKIT_CLI_DISABLE_UPDATE_NOTIFICATIONS=true timeout 60 "$cli" --non-interactive --no-update-notification "$@" \
			</dev/null >"$out" 2>&1) || echo "genkit $* exited with $?" >>"$out"
	}
	cli_check() {
		if grep -qF -- "$2" "$out" && ! grep -qE -- "${3:-Error retrieving|exited with}" "$out"; then
			echo "ok   genkit CLI: $1" >&2
		else
			echo "FAIL genkit CLI: $1" >&2
			sed 's/^/     | /' "$out" | head -n 40 >&2
			exit 1
		fi
	}
	(cd "$APP" && HOME="$TMP/home" XDG_CONFIG_HOME="$TMP/home/.config" "$cli" --non-interactive config set analyticsOptOut true >/dev/null)
	genkit_cli trace:get "$trace"
	cli_check "trace:get shows the app's trace from Loupe" "getWeather"
	genkit_cli trace:get 0123456789abcdef0123456789abcdef
	cli_check "trace:get of an unknown trace says not found, as against Genkit's own server" "not found"
	genkit_cli log:list --trace-id "$trace"
	cli_check "log:list --trace-id prints the app's own log line" "Message:  getWeather has no live data"
	genkit_cli log:list --trace-id "$trace" --span-id "$span"
	cli_check "log:list --span-id prints it under its span" "Severity: WARN"
	genkit_cli log:list --trace-id "$trace" --severity error
	cli_check "log:list --severity error leaves the WARN line out" "No logs found."
}

# eval_checks APP DATA_DIR URL: `devui eval run`, a process of its own beside devui start's, runs the
# app's echo flow over a dataset and scores it with the app's own evaluators (its
# ai.defineEvaluator sameAsReference, and @genkit-ai/evaluator's genkitEval/regex), which it calls
# through the app's reflection API: the stored scores and explanations are the app's, and each
# score links to the app's trace of its evaluation, which the app sent to Loupe.
eval_checks() {
	local app="$1" data="$2" url="$3" file="$TMP/echoes.jsonl" out="$TMP/eval.json"
	printf '%s\n' '{"input":"a","reference":"echo: a"}' '{"input":"b","reference":"something else"}' >"$file"
	LOUPE_DATA_DIR="$data" "$TMP/devui" dataset create echoes --file "$file" >/dev/null
	if ! LOUPE_DATA_DIR="$data" timeout 120 "$TMP/devui" eval run --dataset echoes --action "$app:/flow/echo" --tools live \
		--evaluator "$app:/evaluator/sameAsReference" --evaluator "$app:/evaluator/genkitEval/regex" --json --quiet >"$out"; then
		echo "FAIL eval run with the app's evaluators exited with an error" >&2
		exit 1
	fi
	APP_NAME="$app" LOUPE_URL="$url" node -e '
		const sum = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
		const app = process.env.APP_NAME;
		const fail = (msg) => { console.error("FAIL eval run: " + msg); console.error(JSON.stringify(sum.rows, null, 1)); process.exit(1); };
		if (sum.experiment.status !== "finished" || sum.totals.scored !== 2 || sum.totals.passed !== 1) fail("want 2 scored, 1 passed");
		for (const r of sum.rows) {
			const want = r.input === "a";
			const by = Object.fromEntries(r.scores.map((s) => [s.evaluator, s]));
			const own = by[app + ":/evaluator/sameAsReference"], re = by[app + ":/evaluator/genkitEval/regex"];
			if (!own || !re) fail("a score is missing on " + r.input);
			if (own.pass !== want || re.pass !== want) fail("wrong verdict on " + r.input);
			const reason = "compat-js says: \"echo: " + r.input + "\" " + (want ? "equals" : "differs from");
			if (!own.explanation.startsWith(reason)) fail("the explanation is not the app reasoning: " + own.explanation);
			if (!own.trace_id) fail("no trace of the app evaluation");
		}
		(async () => {
			// The app sends its spans a moment after it answers.
			const id = sum.rows[0].scores[0].trace_id;
			for (let i = 0; i < 100; i++) {
				const res = await fetch(process.env.LOUPE_URL + "/api/v1/traces/" + id);
				if (res.ok) return;
				await new Promise((r) => setTimeout(r, 100));
			}
			fail("the trace " + id + " of the app evaluation is not in Loupe");
		})();
	' "$out"
	echo "ok   eval run scores with the app's own evaluators (ai.defineEvaluator, genkitEval/regex)" >&2
}

for mode in $MODES; do
	realtime=""
	case "$mode" in
	dev) ;;
	# Realtime mode runs the app without a default model too (NO_DEFAULT_MODEL=1).
	realtime) realtime=true ;;
	*) echo "ERROR: unknown mode $mode (dev, realtime)" >&2; exit 2 ;;
	esac
	PORT="$(free_port)"
	URL="http://127.0.0.1:$PORT"
	LOG="$TMP/devui-$mode.log"
	mkdir -m 0711 "$TMP/data-$mode"
	echo "==> [$mode] devui start -- node app.mjs on $URL" >&2
	# Genkit JS writes its runtime file under the nearest package.json up from its working
	# directory: the app runs in its own folder. APP_NAME names it (genkit({name})).
	(cd "$APP" && exec env -u GENKIT_TELEMETRY_SERVER GENKIT_ENABLE_REALTIME_TELEMETRY="$realtime" NO_DEFAULT_MODEL="$realtime" APP_NAME="compat-js-$mode" \
		"$TMP/devui" start --addr "127.0.0.1:$PORT" --data-dir "$TMP/data-$mode" -- node app.mjs) >"$LOG" 2>&1 &
	DEVUI_PID=$!
	wait_ready "$URL"
	(cd "$APP" && LOUPE_URL="$URL" APP_NAME="compat-js-$mode" NO_DEFAULT_MODEL="$realtime" DEVUI_LOG="$LOG" CHECK_APP_LOGS=1 \
		CHECK_OUT="$TMP/ids-$mode.json" node check.mjs)
	if [[ "$mode" == dev ]]; then
		cli_checks "$URL" "$TMP/ids-$mode.json"
		eval_checks "compat-js-$mode" "$TMP/data-$mode" "$URL"
	fi
	stop_devui
	if [[ -n "$(ls -A "$APP/.genkit/runtimes" 2>/dev/null | grep "^" || true)" ]]; then
		# The app removes its runtime file when it stops; one left means it did not stop.
		echo "WARNING: runtime files left in $APP/.genkit/runtimes" >&2
	fi
	echo "==> [$mode] passed" >&2
done
