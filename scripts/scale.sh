#!/usr/bin/env bash
# scale.sh: several servers and workers on one PostgreSQL (issue 27), on this machine. It starts
# SERVES `devui serve --dev` on 127.0.0.1:PORT, PORT+1, … and WORKERS `devui worker`, all at once
# against the external PostgreSQL in DATABASE_URL (never the embedded cluster: each process would
# otherwise look for its own), so that their migrations race as a deploy's first boot does. Each
# process's pool is capped at MAX_CONNS (--max-conns). Output is prefixed with the process's
# name; Ctrl-C (or SIGTERM, for a script that started it in the background, where SIGINT is
# ignored) stops them all.
#
#   DATABASE_URL=postgres://… scripts/scale.sh           # 3 serves on :4000-4002, 3 workers
#   SERVES=2 WORKERS=1 PORT=4100 scripts/scale.sh        # other counts, other ports
#   MAX_CONNS=8 SERVE_WORKERS=2 scripts/scale.sh         # each pool's size; serves that execute runs too
#
# The serves are in local mode (--dev: no sign-in, loopback only). A load balancer in front of
# them, or the browser pointed at any one, sees the same runs, inbox and live streams.
set -uo pipefail

cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ]; then
	cat >&2 <<'MSG'
make scale needs an external PostgreSQL that every process shares: set DATABASE_URL, e.g.
  make db/up && export DATABASE_URL='postgres://loupe:loupe@127.0.0.1:5432/loupe?sslmode=disable'
or, with the embedded cluster of a data dir:
  export DATABASE_URL=$(./bin/devui db start --data-dir /tmp/loupe-scale)
MSG
	exit 2
fi
BIN=${BIN:-./bin/devui}
SERVES=${SERVES:-3}
WORKERS=${WORKERS:-3}
PORT=${PORT:-4000}
MAX_CONNS=${MAX_CONNS:-10}
# SERVE_WORKERS is each serve's --workers: 0 leaves every run to the workers.
SERVE_WORKERS=${SERVE_WORKERS:-0}
WORKER_WORKERS=${WORKER_WORKERS:-8}
[ -x "$BIN" ] || { echo "no $BIN: run make build first (make scale does)" >&2; exit 2; }

pids=()
# stop ends every process with SIGINT, as Ctrl-C does, waits for them, and exits with $1.
stop() {
	trap - INT TERM
	for pid in "${pids[@]}"; do
		kill -INT "$pid" 2>/dev/null
	done
	wait
	exit "$1"
}
trap 'stop 0' INT TERM

# start NAME ARGS… runs devui with its output prefixed by [NAME].
start() {
	local name=$1
	shift
	"$BIN" "$@" --max-conns "$MAX_CONNS" > >(sed -u "s/^/[$name] /") 2>&1 &
	pids+=($!)
}

for i in $(seq 1 "$SERVES"); do
	start "serve-$i" serve --dev --addr "127.0.0.1:$((PORT + i - 1))" --workers "$SERVE_WORKERS"
done
for i in $(seq 1 "$WORKERS"); do
	start "worker-$i" worker --workers "$WORKER_WORKERS"
done
urls=$(for i in $(seq 1 "$SERVES"); do printf 'http://127.0.0.1:%d ' $((PORT + i - 1)); done)
echo "scale: $SERVES serve(s) at ${urls% }, $WORKERS worker(s), --max-conns $MAX_CONNS each: at most $((SERVES * (MAX_CONNS + 1) + WORKERS * (MAX_CONNS + 2) + (SERVE_WORKERS > 0 ? SERVES : 0))) connections to PostgreSQL (each pool, plus each live hub's LISTEN and each executing process's River LISTEN). Ctrl-C stops them."
# Any process that exits ends the topology: a scale-out with a hole in it is not what was asked.
wait -n
echo "scale: a process exited; stopping the others" >&2
stop 1
