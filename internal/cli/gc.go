package cli

import (
	"os"
	"runtime/debug"
)

// serverGCPercent is the garbage collector's target for the long-running commands (serve,
// worker) when GOGC is not set. Their live heap is small and their allocation rate high under
// trace ingest: at Go's default of 100 the collector took about a fifth of the server's CPU under
// batched ingest; at 400 the server spends about 30% less CPU per span (BENCHMARKS.md), for a heap
// that may grow to five times the live one.
const serverGCPercent = 400

// tuneGC applies serverGCPercent unless GOGC says otherwise.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
}
