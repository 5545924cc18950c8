package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/store"
)

// TestMinimapBandsMergesAndPutsFailuresLast: a trace of more spans than minimapBands shares each
// band among consecutive spans, bars of one kind that overlap in a band become one, and the
// failed span's bar comes last, drawn over the rest.
func TestMinimapBandsMergesAndPutsFailuresLast(t *testing.T) {
	spans := [][3]string{{"root", "", "agent"}}
	for i := range 299 {
		spans = append(spans, [3]string{fmt.Sprintf("c%03d", i), "root", "step"})
	}
	sk := compareSkeleton(spans...)
	m := sk.minimap()
	require.Equal(t, minimapBands, m.Bands)
	require.Less(t, len(m.Bars), 2*minimapBands, "the overlapping steps of a band are one bar")
	for _, bar := range m.Bars {
		require.Less(t, bar[0], int32(minimapBands))
		require.LessOrEqual(t, bar[1], bar[2])
		require.LessOrEqual(t, bar[2], int32(1000))
	}

	failed := compareSkeleton([3]string{"1", "", "agent"}, [3]string{"2", "1", "ok"}, [3]string{"3", "1", "boom"})
	failed.Facts[2].StatusCode = store.StatusError
	failed = buildSkeleton("t", failed.Facts, time.Now().UnixNano())
	m = failed.minimap()
	require.Equal(t, 3, m.Bands)
	last := m.Bars[len(m.Bars)-1]
	require.Equal(t, "error", m.Kinds[last[3]], "the failure is drawn last")
	require.Equal(t, int32(2), last[0], "in the failed span's band")
}
