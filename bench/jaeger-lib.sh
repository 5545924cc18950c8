# Sourced by bench/jaeger-compare.sh and bench/ingest-compare.sh, from the repository's root.

# build_jaeger sets PEER (bench/jaegerpeer) and JAEGER (its Jaeger binary), building Jaeger at the
# version pinned by bench/jaegerpeer/go.mod's tool line into bench/jaegerpeer/bin, once (gitignored;
# rebuilt when the version changes). JAEGER_BIN=/path/to/jaeger uses a binary built elsewhere.
build_jaeger() {
	PEER="$PWD/bench/jaegerpeer"
	JAEGER_VERSION="$(awk '$1 == "github.com/jaegertracing/jaeger" { print $2 }' "$PEER/go.mod")"
	[[ -n "$JAEGER_VERSION" ]] || { echo "ERROR: no github.com/jaegertracing/jaeger in $PEER/go.mod" >&2; exit 1; }
	JAEGER="${JAEGER_BIN:-$PEER/bin/jaeger}"
	if [[ -z "${JAEGER_BIN:-}" ]] && [[ ! -x "$JAEGER" || "$(cat "$JAEGER.version" 2>/dev/null)" != "$JAEGER_VERSION" ]]; then
		echo "==> building Jaeger $JAEGER_VERSION (cmd/jaeger) into bench/jaegerpeer/bin (once; minutes)" >&2
		mkdir -p "$PEER/bin"
		(cd "$PEER" && go build -trimpath \
			-ldflags "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=$JAEGER_VERSION" \
			-o bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger)
		echo "$JAEGER_VERSION" >"$JAEGER.version"
	fi
	echo "==> Jaeger: $("$JAEGER" version 2>/dev/null | tr -d '\n' | head -c 200)" >&2
}
