#!/usr/bin/env bash
# The Genkit Go port is mechanical: main.go is original/main.go (a Genkit Go v1.4.0 program) with
# its imports renamed and the package name genkit replaced by loupe, nothing else. This script
# checks that, builds both, runs both and checks that they print the same thing.
#
#   examples/genkit-port/check.sh           (make compat-genkit-port)
set -euo pipefail
cd "$(dirname "$0")"

rename() {
  sed -e 's#"github.com/firebase/genkit/go/genkit"#"github.com/loupe-dev/loupe"#' \
      -e 's#"github.com/firebase/genkit/go/ai"#"github.com/loupe-dev/loupe/ai"#' \
      -e 's/\bgenkit\./loupe./g' \
      -e "s#^// Command original is a Genkit Go 1.4 program.#// Command genkit-port is the Loupe port of a Genkit Go 1.4 program.#" "$@"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rename original/main.go | gofmt > "$tmp/renamed.go"
if ! diff -u "$tmp/renamed.go" main.go; then
  echo "genkit-port: main.go is not original/main.go renamed (the diff above is what differs)" >&2
  exit 1
fi
echo "genkit-port: main.go is original/main.go with its imports and package name renamed"

(cd original && go build -o "$tmp/original" .)
go build -o "$tmp/port" .
(cd "$tmp" && ./original > original.out 2>original.err) || { cat "$tmp/original.err" >&2; exit 1; }
(cd "$tmp" && ./port > port.out 2>port.err) || { cat "$tmp/port.err" >&2; exit 1; }
if ! diff -u "$tmp/original.out" "$tmp/port.out"; then
  echo "genkit-port: the port prints something else than the Genkit program (diff above)" >&2
  exit 1
fi
echo "genkit-port: both print the same $(wc -l < "$tmp/port.out") lines"
