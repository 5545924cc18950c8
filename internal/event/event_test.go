package event_test

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/event"
)

var update = flag.Bool("update", false, "rewrite web/static/events.js")

// TestPageScriptsReadTheKindsFromTheContract: web/static/events.js is what JS() generates, so the
// page scripts cannot drift from the Go constants.
func TestPageScriptsReadTheKindsFromTheContract(t *testing.T) {
	path := filepath.Join("..", "..", "web", "static", "events.js")
	if *update {
		require.NoError(t, os.WriteFile(path, event.JS(), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(event.JS()), string(got), "web/static/events.js is stale: go test ./internal/event -update")
}

// TestEveryPayloadNamesItsKind: each payload type says a listed kind, and no two say the same.
func TestEveryPayloadNamesItsKind(t *testing.T) {
	listed := map[event.Kind]bool{}
	for _, k := range event.Kinds {
		require.False(t, listed[k.Kind], "%s listed twice", k.Kind)
		listed[k.Kind] = true
	}
	seen := map[event.Kind]string{}
	for _, p := range []event.Payload{event.RunStatusData{}, event.RunMessageData{}, event.RunChunksData{},
		event.RunToolCallData{}, event.RunDivergenceData{}, event.InterruptChangedData{},
		event.InterruptClaimedData{}, event.InboxPresenceData{}, event.ExperimentProgressData{}} {
		name := reflect.TypeOf(p).Name()
		require.True(t, listed[p.Kind()], "%s says an unlisted kind %q", name, p.Kind())
		require.Empty(t, seen[p.Kind()], "%s and %s both say %s", name, seen[p.Kind()], p.Kind())
		seen[p.Kind()] = name
	}
}
