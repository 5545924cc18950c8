#!/usr/bin/env bash
# stress.sh: issue 24 item 10's load protocol. Three rounds; in each, the internal/runs,
# internal/server and internal/live test packages run side by side, each under
# `go test -race -count=2`, so that they load the machine (and its shared test cluster) together.
# It prints each package's result per round and a table at the end, keeps every log, and exits 1
# when any package failed in any round.
#
#   scripts/stress.sh                 # the protocol as the issue states it
#   ROUNDS=1 scripts/stress.sh        # fewer rounds
#   BURN=4 scripts/stress.sh          # and 4 busy loops beside the tests, for a machine with room
#   TIMEOUT=45m scripts/stress.sh     # go test's -timeout per package (default 60m: at load 20-25 the
#                                     # server package needs more than make test's 30m)
#
# Run it from the repository's root (make stress does). It uses TEST_DATABASE_URL when set, and
# otherwise the checkout's managed test cluster, which it stops at the end as make test does.
set -uo pipefail
set -m # job control: each background job gets a process group of its own, which cleanup can end

cd "$(dirname "$0")/.."
GO=${GO:-go}
ROUNDS=${ROUNDS:-3}
BURN=${BURN:-0}
TIMEOUT=${TIMEOUT:-60m} # internal/server took 20 min at load 20 and ran out of 30 in round 2 at load 25
PACKAGES=(./internal/runs/ ./internal/server/ ./internal/live/)
export LOUPE_TEST_DATA_DIR=${LOUPE_TEST_DATA_DIR:-${TMPDIR:-/tmp}/loupe-test-$(id -u)-$(printf %s "$PWD" | sha256sum | cut -c1-12)}
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/loupe-stress-XXXXXX")

burners=()
stop_burners() {
	for pid in "${burners[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for pid in "${burners[@]}"; do
		wait "$pid" 2>/dev/null
	done
	burners=()
}
tests=()
stop_tests() {
	for pid in "${tests[@]}"; do
		kill -- "-$pid" 2>/dev/null # each package's go test is a job, with a process group of its own
	done
}
cleanup() {
	stop_tests
	stop_burners
	[ -n "${TEST_DATABASE_URL:-}" ] || $GO run ./cmd/devui db stop --data-dir "$LOUPE_TEST_DATA_DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'echo "stress: interrupted"; exit 130' INT TERM

echo "stress: $ROUNDS rounds of ${PACKAGES[*]} side by side, each go test -race -count=2 -timeout $TIMEOUT; $BURN busy loops beside them; logs in $LOGS"
# Compile the three test binaries first, so that a round times the tests and not the compiler.
if ! $GO test -race -count=1 -run '^$' "${PACKAGES[@]}" >"$LOGS/build.log" 2>&1; then
	echo "stress: the packages do not build:"
	cat "$LOGS/build.log"
	exit 1
fi

for ((i = 0; i < BURN; i++)); do
	sh -c 'while :; do :; done' &
	burners+=($!)
done

declare -A result
failed=0
for ((round = 1; round <= ROUNDS; round++)); do
	echo "round $round/$ROUNDS: started $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
	tests=()
	names=()
	for pkg in "${PACKAGES[@]}"; do
		name=$(basename "$pkg")
		log="$LOGS/round$round-$name.log"
		$GO test -race -count=2 -timeout "$TIMEOUT" "$pkg" >"$log" 2>&1 &
		tests+=($!)
		names+=("$name")
	done
	for idx in "${!tests[@]}"; do
		name=${names[$idx]}
		log="$LOGS/round$round-$name.log"
		if wait "${tests[$idx]}"; then
			result[$round,$name]=pass
		else
			result[$round,$name]=FAIL
			failed=1
		fi
		summary=$(grep -E '^(ok|FAIL)[[:space:]]' "$log" | tail -1)
		echo "  round $round $name: ${result[$round,$name]} ($summary)"
		if [ "${result[$round,$name]}" = FAIL ]; then
			grep -E -- '^\s*--- FAIL' "$log" | sed 's/^/    /'
			echo "    log: $log"
		fi
	done
	tests=()
	echo "round $round/$ROUNDS: ended $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
done
stop_burners

echo
printf '%-8s' round
for pkg in "${PACKAGES[@]}"; do printf '%-10s' "$(basename "$pkg")"; done
echo
for ((round = 1; round <= ROUNDS; round++)); do
	printf '%-8s' "$round"
	for pkg in "${PACKAGES[@]}"; do printf '%-10s' "${result[$round,$(basename "$pkg")]}"; done
	echo
done
if [ "$failed" = 1 ]; then
	echo "stress: FAILED (logs in $LOGS)"
	exit 1
fi
echo "stress: every package passed in every round (logs in $LOGS)"
