#!/usr/bin/env bash
# scale.sh: how far one PostgreSQL goes with 1, 2 and 3 serve replicas (issue 27). For each
# topology it creates a fresh database on the server of DATABASE_URL, starts it with
# scripts/scale.sh, waits until every serve is ready, runs bench/loadtest's runs and batched
# scenarios through all the serves, prints the load average before and after, and stops it.
#
#   export DATABASE_URL=$(./bin/devui db start --data-dir /tmp/loupe-scale-bench)
#   make build && bench/scale.sh
#   TOPOLOGIES="1:0 3:3" RUNS=500 SPANS=20000 bench/scale.sh
#
# It needs psql (PostgreSQL's client) and bin/devui (or BIN). A topology is SERVES:WORKERS. With no workers the serves execute the runs (--workers 8 each);
# with workers, the serves execute none (--workers 0) and each worker runs 8.
set -uo pipefail

cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL to a PostgreSQL where this user may CREATE DATABASE}"
TOPOLOGIES=${TOPOLOGIES:-"1:0 2:0 3:0 3:3"}
RUNS=${RUNS:-1000}
SPANS=${SPANS:-40000}
CLIENTS=${CLIENTS:-16}
PORT=${PORT:-4300}
MAX_CONNS=${MAX_CONNS:-10}
admin=$DATABASE_URL

for topology in $TOPOLOGIES; do
	serves=${topology%:*}
	workers=${topology#*:}
	db="loupe_scale_${serves}_${workers}_$$"
	psql -q "$admin" -c "CREATE DATABASE $db" || exit 1
	url=$(printf %s "$admin" | sed -E "s#/[^/?]+(\?|$)#/$db\1#")
	serve_workers=8
	[ "$workers" -gt 0 ] && serve_workers=0
	DATABASE_URL=$url SERVES=$serves WORKERS=$workers SERVE_WORKERS=$serve_workers PORT=$PORT MAX_CONNS=$MAX_CONNS \
		scripts/scale.sh >"/tmp/loupe-scale-$db.log" 2>&1 &
	topo=$!
	# until COND… waits up to two minutes for COND, and gives up if the topology has exited.
	deadline=$((SECONDS + 120))
	until_ready() {
		until "$@"; do
			kill -0 "$topo" 2>/dev/null || { echo "the topology exited; its log: /tmp/loupe-scale-$db.log" >&2; exit 1; }
			((SECONDS < deadline)) || { echo "not ready after 120 s; log: /tmp/loupe-scale-$db.log" >&2; kill -TERM "$topo"; exit 1; }
			sleep 0.2
		done
	}
	urls=""
	for i in $(seq 1 "$serves"); do
		u="http://127.0.0.1:$((PORT + i - 1))"
		until_ready curl -sf -o /dev/null "$u/readyz"
		urls="$urls,$u"
	done
	# The executing processes are up when they have announced themselves in the catalogue.
	executing=$((serve_workers > 0 ? serves : workers))
	announced() { [ "$(psql -tA "$url" -c "SELECT count(*) FROM action_catalogue_workers WHERE expires_at > now()" 2>/dev/null)" = "$executing" ]; }
	until_ready announced
	echo "== $serves serve(s), $workers worker(s); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	go run ./bench/loadtest -url "${urls#,}" -db "$url" -scenarios batched,runs -runs "$RUNS" -spans "$SPANS" -clients "$CLIENTS" | grep -v '^posting'
	status=$?
	echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	kill -TERM "$topo"
	wait "$topo"
	((status == 0)) || { echo "bench/loadtest failed; log: /tmp/loupe-scale-$db.log" >&2; exit 1; }
	psql -q "$admin" -c "DROP DATABASE $db WITH (FORCE)"
done
