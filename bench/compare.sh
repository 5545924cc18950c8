#!/usr/bin/env bash
# Compare Loupe's engine against Firebase Genkit Go v1.4.0 on the same
# scenario: one generate with 3 tool turns (4 model calls, 3 tool calls),
# scripted in-process model, spans into an in-memory OTel exporter.
#
# Usage (from the repo root):   bench/compare.sh
#   COUNT=10 bench/compare.sh             # runs per benchmark (default 5)
#   BENCHTIME=2s bench/compare.sh         # passed to -benchtime if set
#   OUT_DIR=/some/dir bench/compare.sh    # keep raw outputs there (default: a new temp dir)
#
# Exits non-zero if either benchmark fails to build/run or prints no result.
# Missing the targets (Genkit/Loupe >= 20x time, >= 10x allocs) is reported
# as MISSED but does not fail the script.
set -euo pipefail

COUNT="${COUNT:-5}"
TIME_TARGET=20
ALLOC_TARGET=10

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/loupe-compare.XXXXXX")}"
mkdir -p "$OUT_DIR"

LOUPE_BENCH=BenchmarkGenerate3ToolTurns
GENKIT_BENCH=BenchmarkGenkitGenerate3ToolTurns
LOUPE_OUT="$OUT_DIR/loupe.txt"
GENKIT_OUT="$OUT_DIR/genkit.txt"

bench_args=(-run '^$' -benchmem -count "$COUNT")
if [[ -n "${BENCHTIME:-}" ]]; then
	bench_args+=(-benchtime "$BENCHTIME")
fi

# run_bench NAME DIR PKG BENCH OUTFILE: runs one benchmark, tees raw output to
# OUTFILE, and fails if go test fails or no result line for BENCH was printed
# (go test exits 0 when the -bench pattern matches nothing).
run_bench() {
	local name="$1" dir="$2" pkg="$3" bench="$4" out="$5" rc=0 rel
	rel="${dir#"$ROOT"}"
	echo "==> $name: go test -bench '^${bench}\$' ${bench_args[*]} $pkg (in .${rel})" >&2
	(cd "$dir" && env -u GENKIT_ENV -u GENKIT_TELEMETRY_SERVER \
		go test "${bench_args[@]}" -bench "^${bench}\$" "$pkg") >"$out" 2>&1 || rc=$?
	if ((rc != 0)); then
		echo "ERROR: $name benchmark failed (exit $rc); last lines of $out:" >&2
		tail -n 20 "$out" >&2
		return 1
	fi
	if ! grep -Eq "^${bench}(-[0-9]+)?[[:space:]]" "$out"; then
		echo "ERROR: $name: no result line for $bench in $out (benchmark missing?):" >&2
		tail -n 20 "$out" >&2
		return 1
	fi
}

failed=0
run_bench Loupe "$ROOT" ./internal/engine "$LOUPE_BENCH" "$LOUPE_OUT" || failed=1
run_bench Genkit "$ROOT/bench/genkitpeer" . "$GENKIT_BENCH" "$GENKIT_OUT" || failed=1
echo "raw outputs: $OUT_DIR" >&2
if ((failed)); then
	exit 1
fi

# medians FILE BENCH: prints "ns_op b_op allocs_op n" (medians over all runs).
medians() {
	awk -v bench="$1" '
	function median(a, n,    i, j, t) {
		for (i = 2; i <= n; i++) {          # insertion sort; n is tiny
			t = a[i]
			for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
			a[j + 1] = t
		}
		if (n % 2) return a[(n + 1) / 2]
		return (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		name = $1
		sub(/-[0-9]+$/, "", name)            # strip the -GOMAXPROCS suffix
		if (name != bench) next
		for (i = 3; i <= NF; i++) {
			if ($i == "ns/op")     ns[++nn] = $(i - 1) + 0
			if ($i == "B/op")      by[++nb] = $(i - 1) + 0
			if ($i == "allocs/op") al[++na] = $(i - 1) + 0
		}
	}
	END {
		if (nn == 0 || nb == 0 || na == 0) exit 1
		printf "%.10g %.10g %.10g %d\n", median(ns, nn), median(by, nb), median(al, na), nn
	}' "$2"
}

if ! loupe="$(medians "$LOUPE_BENCH" "$LOUPE_OUT")"; then
	echo "ERROR: could not parse ns/op, B/op, allocs/op from $LOUPE_OUT (was -benchmem applied?)" >&2
	exit 1
fi
if ! genkit="$(medians "$GENKIT_BENCH" "$GENKIT_OUT")"; then
	echo "ERROR: could not parse ns/op, B/op, allocs/op from $GENKIT_OUT (was -benchmem applied?)" >&2
	exit 1
fi

awk -v l="$loupe" -v g="$genkit" -v tt="$TIME_TARGET" -v at="$ALLOC_TARGET" '
function ratio(num, den) { return den > 0 ? num / den : (num > 0 ? "inf" : 1) }
function fmt(r) { return r == "inf" ? "inf" : sprintf("%.1fx", r) }
function verdict(r, target) { return (r == "inf" || r >= target) ? "MET" : "MISSED" }
BEGIN {
	split(l, L, " "); split(g, G, " ")
	printf "\n%-8s %6s %14s %12s %11s\n", "", "runs", "ns/op", "B/op", "allocs/op"
	printf "%-8s %6d %14.0f %12.0f %11.0f\n", "Loupe", L[4], L[1], L[2], L[3]
	printf "%-8s %6d %14.0f %12.0f %11.0f\n", "Genkit", G[4], G[1], G[2], G[3]
	rt = ratio(G[1], L[1]); rb = ratio(G[2], L[2]); ra = ratio(G[3], L[3])
	printf "\nGenkit/Loupe (medians)\n"
	printf "  time   %8s  target >= %dx  %s\n", fmt(rt), tt, verdict(rt, tt)
	printf "  allocs %8s  target >= %dx  %s\n", fmt(ra), at, verdict(ra, at)
	printf "  bytes  %8s  (no target)\n", fmt(rb)
}'
