#!/usr/bin/env bash
# Check that the real genkit CLI (npm genkit-cli, pinned in compat/genkit-cli/package-lock.json)
# works against Loupe's Genkit reflection and telemetry APIs.
#
# Installs the CLI (npm ci), builds devui, starts a throwaway Loupe (embedded PostgreSQL in a temp
# data dir, --dev, the demo agents, a free loopback port), and writes a runtime file
# (.genkit/runtimes/loupe.json, reflectionServerUrl = Loupe) in a temp project, as a Genkit app
# would. GENKIT_TELEMETRY_SERVER points the CLI's trace reads at Loupe too. Then it runs, from that
# project:
#   flow:run (plain, --stream, --wait --output, an input error, a flow that interrupts),
#   flow:batchRun --label, eval:extractData --label, eval:run and eval:flow with Loupe's evaluators
#   (their scores, and the experiment each evaluation is in Loupe), trace:list, trace:get, log:list,
# and the Dev UI server (genkit __server-harness, what `genkit ui:start` runs) with its runAction,
# streamAction, streamTrace, cancelAction and listLogs calls. Each check reads the CLI's output and,
# where Loupe stores something, what /api/v1 says. Nothing leaves the machine: analytics are opted
# out, update checks are off, and the Dev UI's asset download is satisfied from a local stand-in.
#
# Usage (from the repo root):   compat/genkit-cli.sh
#   KEEP_LOG=1 compat/genkit-cli.sh        # print devui's and the Dev UI server's logs even on success
#   READY_TIMEOUT=180 compat/genkit-cli.sh # seconds to wait for /readyz (default 120)
#
# Exit code: 0 when every check passed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLI_DIR="$ROOT/compat/genkit-cli"
READY_TIMEOUT="${READY_TIMEOUT:-120}"
# shellcheck source=compat/lib.sh
source "$ROOT/compat/lib.sh"
compat_tmp genkit-cli
DEVUI_PID=""
UI_PID=""
BG_PIDS=()
LOG="$TMP/devui.log"
UI_LOG="$TMP/devui-ui.log"

cleanup() {
	local rc=$?
	for pid in "${BG_PIDS[@]}" "$UI_PID"; do
		if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	stop_devui
	if ((rc != 0)) || [[ -n "${KEEP_LOG:-}" ]]; then
		for f in "$LOG" "$UI_LOG"; do
			if [[ -s "$f" ]]; then
				echo "--- $(basename "$f") (last 40 lines) ---" >&2
				tail -n 40 "$f" >&2
			fi
		done
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


for tool in node npm curl; do
	command -v "$tool" >/dev/null 2>&1 || { echo "ERROR: $tool is needed (Node 20 and npm: apt-get install nodejs npm)" >&2; exit 1; }
done

echo "==> installing the genkit CLI (npm ci in compat/genkit-cli)" >&2
# --ignore-scripts: the CLI needs none of its dependencies' install scripts (esbuild, protobufjs).
(cd "$CLI_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
GENKIT_BIN="$CLI_DIR/node_modules/.bin/genkit"
CLI_VERSION="$("$GENKIT_BIN" --version)"
echo "==> genkit CLI $CLI_VERSION" >&2

echo "==> building devui" >&2
(cd "$ROOT" && go build -o "$TMP/devui" ./cmd/devui)

PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"
echo "==> starting devui on $URL (data dir $TMP/data)" >&2
env -u GENKIT_ENV -u GENKIT_TELEMETRY_SERVER "$TMP/devui" serve --dev --addr "127.0.0.1:$PORT" --data-dir "$TMP/data" >"$LOG" 2>&1 &
DEVUI_PID=$!
wait_ready "$URL"

# The project: what a Genkit app's reflection server leaves behind, pointing at Loupe.
PROJ="$TMP/proj"
mkdir -p "$PROJ/.genkit/runtimes" "$TMP/home/.config"
echo '{"name":"loupe-genkit-cli-compat","private":true}' >"$PROJ/package.json"
printf '{"id":"loupe","pid":%d,"name":"loupe","reflectionServerUrl":"%s","timestamp":"%s","genkitVersion":"loupe","reflectionApiSpecVersion":1}\n' \
	"$DEVUI_PID" "$URL" "$(date -u +%Y-%m-%dT%H:%M:%S.000Z)" >"$PROJ/.genkit/runtimes/loupe.json"
# The Dev UI server downloads its web assets unless their zip is there: a stand-in keeps it local.
ASSETS="$TMP/home/.genkit/assets/$CLI_VERSION"
mkdir -p "$ASSETS"
node -e '
const zlib = require("zlib"); const fs = require("fs");
// A one-file zip (stored, not deflated), written by hand: no zip tool is needed.
const name = Buffer.from("ui/browser/index.html"), data = Buffer.from("<!doctype html><title>stand-in</title>\n");
const crc = zlib.crc32 ? zlib.crc32(data) : (() => { let c, t = [], s = ~0; for (let n = 0; n < 256; n++) { c = n; for (let k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320 ^ (c >>> 1) : c >>> 1; t[n] = c >>> 0; } for (const b of data) s = t[(s ^ b) & 0xff] ^ (s >>> 8); return (~s) >>> 0; })();
const local = Buffer.alloc(30); local.writeUInt32LE(0x04034b50, 0); local.writeUInt16LE(10, 4); local.writeUInt32LE(crc, 14);
local.writeUInt32LE(data.length, 18); local.writeUInt32LE(data.length, 22); local.writeUInt16LE(name.length, 26);
const central = Buffer.alloc(46); central.writeUInt32LE(0x02014b50, 0); central.writeUInt16LE(20, 4); central.writeUInt16LE(10, 6);
central.writeUInt32LE(crc, 16); central.writeUInt32LE(data.length, 20); central.writeUInt32LE(data.length, 24); central.writeUInt16LE(name.length, 28);
const cdOffset = local.length + name.length + data.length, cdSize = central.length + name.length;
const end = Buffer.alloc(22); end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(1, 8); end.writeUInt16LE(1, 10);
end.writeUInt32LE(cdSize, 12); end.writeUInt32LE(cdOffset, 16);
fs.writeFileSync(process.argv[1], Buffer.concat([local, name, data, central, name, end]));
' "$ASSETS/$CLI_VERSION.zip"

export HOME="$TMP/home" XDG_CONFIG_HOME="$TMP/home/.config"
export GENKIT_TELEMETRY_SERVER="$URL" GENKIT_CLI_DISABLE_UPDATE_NOTIFICATIONS=true
unset GENKIT_ENV
cd "$PROJ"
"$GENKIT_BIN" --non-interactive config set analyticsOptOut true >/dev/null

PASSED=0
FAILED=()
OUT="$TMP/out.txt"

# genkit runs the CLI in the project, its stdout and stderr in $OUT.
genkit() {
	timeout 120 "$GENKIT_BIN" --non-interactive --no-update-notification "$@" </dev/null >"$OUT" 2>&1 || {
		echo "genkit $* exited with $?" >>"$OUT"
	}
}

# check NAME CONDITION...: CONDITION is a command; a failure prints $OUT.
check() {
	local name="$1"
	shift
	if "$@"; then
		PASSED=$((PASSED + 1))
		echo "ok   $name" >&2
	else
		FAILED+=("$name")
		echo "FAIL $name" >&2
		sed 's/^/     | /' "$OUT" | head -n 40 >&2
	fi
}
has() { grep -qF -- "$1" "$OUT"; }
hasnt() { ! grep -qF -- "$1" "$OUT"; }
matches() { grep -qE -- "$1" "$OUT"; }
# clean: none of the failures seen before this check existed (notify 404, undefined codes, bad streams).
clean() { hasnt "Failed to notify runtime" && hasnt "undefined" && hasnt "SyntaxError" && hasnt "Bad stream"; }
# eventually CMD...: CMD succeeds within 10 s (Loupe writes spans in batches).
eventually() {
	for _ in $(seq 1 50); do
		"$@" && return 0
		sleep 0.2
	done
	return 1
}
trace_id() { sed -n 's/.*Trace ID: \([0-9a-f]\{32\}\).*/\1/p' "$OUT" | head -n 1; }
# jsget URL EXPR: evaluates EXPR on the JSON at URL (as d) and prints it.
jsget() {
	curl -fsS "$1" | node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{const d=JSON.parse(s);console.log(String(eval(process.argv[1])))})' "$2"
}

echo "==> the genkit CLI against $URL" >&2

genkit flow:run countdown '{"from":2}'
T1="$(trace_id)"
check "flow:run prints the result and the trace id" eval 'has "Result:" && has "liftoff" && [[ -n "$T1" ]] && clean'
check "flow:run's trace stores its string output JSON-encoded" eventually eval \
	'[[ "$(jsget "$URL/api/v1/traces/$T1" "d.roots[0].attributes[\"genkit:output\"]")" == "\"liftoff\"" ]]'

genkit flow:run countdown '{"from":3}' --stream
check "flow:run --stream prints each chunk, then the result and trace id" eval \
	'has "\"n\": 3" && has "\"n\": 2" && has "\"n\": 1" && has "liftoff" && [[ -n "$(trace_id)" ]] && clean'

genkit flow:run countdown '{"from":1}' --wait --output "$TMP/out.json"
check "flow:run --wait --output writes the result" eval '[[ "$(cat "$TMP/out.json" 2>/dev/null)" == "\"liftoff\"" ]] && clean'

echo '[{"from":1},{"from":2}]' >"$TMP/batch.json"
genkit flow:batchRun countdown "$TMP/batch.json" --label b1 --output "$TMP/batch-out.json"
check "flow:batchRun --label runs each input" eval \
	'[[ "$(grep -c "Result:" "$OUT")" == 2 ]] && [[ "$(grep -c "Trace ID:" "$OUT")" == 2 ]] && hasnt "telemetryLabels" && clean'
check "flow:batchRun --output writes the outputs" eval \
	'[[ "$(node -e "const d=require(process.argv[1]);console.log(d.map(r=>r.output).join())" "$TMP/batch-out.json")" == "liftoff,liftoff" ]]'
check "flow:batchRun's label is on the root spans Loupe stored" eventually eval \
	'[[ "$(jsget "$URL/api/v1/traces?attr.batchRun=b1" "d.traces.length")" == 2 ]]'

genkit eval:extractData countdown --label b1 --output "$TMP/dataset.json"
check "eval:extractData --label extracts the labelled runs' inputs and outputs" eval \
	'[[ "$(node -e "const d=require(process.argv[1]);console.log(d.map(r=>r.input.from+\":\"+r.output).sort().join())" "$TMP/dataset.json")" == "1:liftoff,2:liftoff" ]] && clean'

# eval:run and eval:flow with Loupe's evaluators; each evaluation (its evalRunId) is an experiment in
# Loupe. summary FILE [out] prints the CLI's results file as testCaseId[:output]:evaluator=score/status,…;…
summary() {
	node -e '
const d = require(process.argv[1]);
console.log(d.map(r => r.testCaseId + (process.argv[2] ? ":" + r.output : "") + ":" +
	r.metrics.map(m => m.evaluator.replace("/evaluator/", "") + "=" + m.score + "/" + m.status).join(",")).join(";"));
' "$@"
}
eval_id() { sed -n 's/.*Evaluation ID: \([0-9a-f-]\{36\}\).*/\1/p' "$OUT" | head -n 1; }
cat >"$TMP/evalset.json" <<'EOF'
[{"testCaseId":"same","input":"a","output":"liftoff","reference":"liftoff"},
 {"testCaseId":"equal-json","input":"b","output":{"a":1,"b":[2]},"reference":{"b":[2],"a":1}},
 {"testCaseId":"differs","input":"c","output":"boom","reference":"liftoff"}]
EOF
genkit eval:run "$TMP/evalset.json" --evaluators=exact,json --output "$TMP/evalrun.json"
E1="$(eval_id)"
check "eval:run finds Loupe's evaluators and prints the evaluation id" eval \
	'has "Using evaluators: exact,json" && [[ -n "$E1" ]] && clean'
check "eval:run's results: Loupe's exact and json scores of each test case" eval \
	'[[ "$(summary "$TMP/evalrun.json")" == "same:exact=1/PASS,json=1/PASS;equal-json:exact=0/FAIL,json=1/PASS;differs:exact=0/FAIL,json=0/FAIL" ]]'
check "eval:run's evaluation is the experiment of its id in Loupe, with the same scores" eval \
	'[[ "$(jsget "$URL/api/v1/experiments/$E1" "[d.experiment.name === \"$E1\", d.dataset.name, d.experiment.evaluators, d.experiment.total, d.experiment.passed,
		d.rows.map(r => JSON.stringify(r.input) + \":\" + r.scores.map(s => s.evaluator + \"=\" + s.score + \"/\" + s.pass)).join(\";\")].join(\" \")")" == \
		"true genkit-eval exact,json 3 1 \"a\":exact=1/true,json=1/true;\"b\":exact=0/false,json=1/true;\"c\":exact=0/false,json=0/false" ]]'

echo '[{"testCaseId":"one","input":{"from":1},"reference":"liftoff"},{"testCaseId":"two","input":{"from":2},"reference":"boom"}]' >"$TMP/flowset.json"
genkit eval:flow countdown --input "$TMP/flowset.json" --evaluators=exact,succeeded --force --output "$TMP/evalflow.json"
E2="$(eval_id)"
check "eval:flow runs the flow on each input in Loupe and scores its outputs with Loupe's evaluators" eval \
	'[[ -n "$E2" ]] && [[ "$(summary "$TMP/evalflow.json" out)" == "one:liftoff:exact=1/PASS,succeeded=1/PASS;two:liftoff:exact=0/FAIL,succeeded=1/PASS" ]] && clean'
# Each result links to the run whose trace the CLI read (a durable run's trace id is its id).
RUNS_OF_TRACES="$(node -e 'const d = require(process.argv[1]); console.log(d.map((r, i) => "succeeded:" + r.traceIds[0] + ":exact=" + (i === 0) + ",succeeded=true").join(";"))' "$TMP/evalflow.json")"
check "eval:flow's evaluation is an experiment of dataset genkit-countdown, each result the run of its trace" eval \
	'[[ "$(jsget "$URL/api/v1/experiments/$E2" "[d.dataset.name, d.experiment.action, d.experiment.evaluators, d.experiment.passed,
		d.rows.map(r => r.run_status + \":\" + (r.run_id || \"\").replace(/-/g, \"\") + \":\" + r.scores.map(s => s.evaluator + \"=\" + s.pass)).join(\";\")].join(\" \")")" == \
		"genkit-countdown /flow/countdown exact,succeeded 1 $RUNS_OF_TRACES" ]]'
genkit eval:flow countdown --input "$TMP/flowset.json" --evaluators=exact
E3="$(eval_id)"
check "eval:flow again: another experiment on the same dataset version, its examples lined up with the first's" eval \
	'[[ -n "$E3" && "$E3" != "$E2" ]] && [[ "$(jsget "$URL/api/v1/experiments/$E3" "[d.experiment.dataset_version, d.dataset.version, d.rows.map(r => r.example_key)].join(\" \")")" == \
		"1 1 $(jsget "$URL/api/v1/experiments/$E2" "d.rows.map(r => r.example_key)")" ]]'

genkit flow:run countdown '{"from":"ten"}'
check "an error prints Genkit's code and message" eval 'has "Code: 3" && has "Message: INVALID_ARGUMENT" && clean'

genkit flow:run travelAgent '{"destination":"Lisbon"}'
check "a flow that interrupts says so, with its question, where it waits and its trace id" eval \
	'has "Code: 9" && has "bookFlight: Approve booking" && has "waits in Loupe'"'"'s inbox" && [[ -n "$(trace_id)" ]] && hasnt "Result:" && clean'
check "the interrupted flow's question waits in Loupe's inbox" eval \
	'[[ "$(jsget "$URL/api/v1/interrupts?status=pending" "d.interrupts.filter(i => i.tool === \"bookFlight\").length")" -ge 1 ]]'

genkit trace:list --limit 3
check "trace:list lists Loupe's traces" eval 'has "Found 3 traces" && has "Type:     flow" && clean'
genkit trace:list --name countdown --limit 1
check "trace:list --name filters, with input and output" eval \
	'has "Found 1 trace" && has "Name:     countdown" && has "Output:   \"liftoff\"" && clean'
genkit trace:get "$T1"
check "trace:get shows the span tree" eval 'has "Trace ID: $T1" && has "countdown (flow)" && clean'
genkit trace:get "$T1" --format json
check "trace:get --format json prints the trace" eval 'has "\"traceId\": \"$T1\"" && clean'
genkit trace:get 0123456789abcdef0123456789abcdef
check "trace:get of an unknown trace says not found, as against Genkit's own server" eval \
	'has "not found" && hasnt "Error retrieving trace" && clean'
check "trace:get --format json keeps Genkit's span shape (status code 0 on success, links [])" eval \
	'[[ "$(jsget "$URL/api/traces/$T1" "Object.values(d.spans).every(s => s.status.code === 0 && Array.isArray(s.links) && Array.isArray(s.timeEvents.timeEvent))")" == true ]]'
genkit log:list
check "log:list answers (an empty list)" eval 'has "No logs found." && clean'
genkit log:list --trace-id "$T1"
check "log:list --trace-id answers (an empty list)" eval 'has "No logs found." && clean'

echo "==> the Dev UI server (genkit __server-harness) against $URL" >&2
UI_PORT="$(free_port)"
UI="http://127.0.0.1:$UI_PORT"
"$GENKIT_BIN" __server-harness "$UI_PORT" "$UI_LOG" </dev/null >/dev/null 2>&1 &
UI_PID=$!
deadline=$((SECONDS + 30))
until curl -fsS -o /dev/null "$UI/api/__health" 2>/dev/null; do
	if ! kill -0 "$UI_PID" 2>/dev/null || ((SECONDS >= deadline)); then
		echo "ERROR: the Dev UI server did not start" >&2
		exit 1
	fi
	sleep 0.25
done
# Until the Dev UI server has found the runtime, it has none to run actions on.
deadline=$((SECONDS + 30))
until curl -fsS "$UI/api/getCurrentRuntime" 2>/dev/null | grep -q reflectionServerUrl; do
	if ((SECONDS >= deadline)); then
		echo "ERROR: the Dev UI server did not find Loupe's runtime file" >&2
		exit 1
	fi
	sleep 0.25
done

post() { curl -sS -N --max-time 60 -H 'Content-Type: application/json' "$@"; }
header_trace_id() { sed -n 's/^[Xx]-[Gg]enkit-[Tt]race-[Ii]d: *\([0-9a-f]\{32\}\).*/\1/p' "$1" | head -n 1; }
# wait_header FILE: waits until a response's headers in FILE carry the trace id.
wait_header() {
	for _ in $(seq 1 100); do
		[[ -n "$(header_trace_id "$1")" ]] && return
		sleep 0.1
	done
}

post -D "$TMP/h1" -d '{"key":"/flow/countdown","input":{"from":1}}' "$UI/api/runAction" >"$OUT" || true
check "Dev UI runAction: the result, and the trace id in X-Genkit-Trace-Id" eval \
	'has "\"result\":\"liftoff\"" && [[ -n "$(header_trace_id "$TMP/h1")" ]] && has "\"traceId\":\"$(header_trace_id "$TMP/h1")\""'

post -D "$TMP/h2" -d '{"key":"/flow/countdown","input":{"from":2}}' "$UI/api/streamAction" >"$OUT" || true
check "Dev UI streamAction: chunks as lines, then the result" eval \
	'[[ "$(sed -n 1p "$OUT")" == "{\"n\":2}" && "$(sed -n 2p "$OUT")" == "{\"n\":1}" ]] && has "\"result\":\"liftoff\""'

post -D "$TMP/h3" -d '{"key":"/flow/countdown","input":{"from":5}}' "$UI/api/streamAction" >"$TMP/running.txt" 2>&1 &
BG_PIDS+=($!)
wait_header "$TMP/h3"
T3="$(header_trace_id "$TMP/h3")"
# As against Genkit's own telemetry server, the stream stays open after the trace has ended, until
# the client leaves: curl leaves after 8 s.
post --max-time 8 -d "{\"traceId\":\"$T3\"}" "$UI/api/streamTrace" >"$OUT" || true
# trace_stream_ok TRACE_ID: every line of $OUT is an event of that trace, and the last one shows
# its root span (countdown) ended.
trace_stream_ok() {
	[[ -n "$1" ]] && node -e '
		const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(l => JSON.parse(l));
		const ended = l => (l.span ? [l.span] : Object.values(l.spans || {}))
			.some(s => !s.parentSpanId && s.endTime > 0 && s.displayName === "countdown");
		process.exit(lines.length > 0 && lines.every(l => l.traceId === process.argv[2]) && ended(lines[lines.length - 1]) ? 0 : 1);
	' "$OUT" "$1"
}
check "Dev UI streamTrace: the trace's events, up to the root span's end, open until the client leaves" trace_stream_ok "$T3"

post -D "$TMP/h4" -d '{"key":"/flow/countdown","input":{"from":100}}' "$UI/api/streamAction" >"$TMP/cancelled.txt" 2>&1 &
CANCELLED_PID=$!
BG_PIDS+=("$CANCELLED_PID")
wait_header "$TMP/h4"
T4="$(header_trace_id "$TMP/h4")"
post -d "{\"traceId\":\"$T4\"}" "$UI/api/cancelAction" >"$OUT" || true
check "Dev UI cancelAction cancels a running action" has '"message":"Action cancelled"'
wait "$CANCELLED_PID" 2>/dev/null || true
cp "$TMP/cancelled.txt" "$OUT"
check "the cancelled action ends with Genkit's CANCELLED error" eval 'has "\"code\":1" && has "Action was cancelled"'
post -d "{\"traceId\":\"$T4\"}" "$UI/api/cancelAction" >"$OUT" || true
check "Dev UI cancelAction of a finished action: not found" has "Action not found or already completed"

curl -sS "$UI/api/listLogs?input=%7B%7D" >"$OUT" || true
check "Dev UI listLogs: an empty list" has '{"result":{"data":{"logs":[]}}}'

echo >&2
if ((${#FAILED[@]} > 0)); then
	echo "genkit CLI $CLI_VERSION against Loupe: ${#FAILED[@]} of $((PASSED + ${#FAILED[@]})) checks failed:" >&2
	printf '  - %s\n' "${FAILED[@]}" >&2
	exit 1
fi
echo "genkit CLI $CLI_VERSION against Loupe: all $PASSED checks passed" >&2
