package live

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/stretchr/testify/require"
)

func TestPackPayloadsFitNotifyAndCarryTheOrigin(t *testing.T) {
	var batch []wireEvent
	for i := range 300 {
		data, err := json.Marshal(map[string]any{"i": i, "name": strings.Repeat("n", 40)})
		require.NoError(t, err)
		batch = append(batch, wireEvent{Trace: strings.Repeat("a", 32), Kind: event.Span, Data: data})
	}
	big, err := json.Marshal(map[string]any{"x": strings.Repeat("x", maxPayload)})
	require.NoError(t, err)
	huge := wireEvent{Kind: "big", Data: big}
	batch = append(batch, huge)
	payloads := packPayloads("origin-1", batch)
	require.Greater(t, len(payloads), 1, "300 events need several NOTIFYs")
	var got []wireEvent
	for _, p := range payloads {
		require.LessOrEqual(t, len(p), maxPayload)
		origin, events, ok := strings.Cut(p, " ")
		require.True(t, ok)
		require.Equal(t, "origin-1", origin)
		var evs []wireEvent
		require.NoError(t, json.Unmarshal([]byte(events), &evs), p)
		got = append(got, evs...)
	}
	require.Len(t, got, len(batch), "no event lost")
	var last struct{ I int }
	require.NoError(t, json.Unmarshal(got[299].Data, &last))
	require.Equal(t, 299, last.I)
	require.EqualValues(t, "big", got[300].Kind)
	require.Nil(t, got[300].Data, "an event too large alone keeps its kind and loses its data")
	require.Empty(t, packPayloads("o", nil))
}

func TestCoalesceSpansKeepsTheLastSpanEventPerTraceInPlace(t *testing.T) {
	span := func(trace, id string) wireEvent {
		return wireEvent{Trace: trace, Kind: event.Span, Span: &event.SpanData{SpanID: id}}
	}
	batch := []wireEvent{
		span("t1", "a"), {Kind: "run.status", RunID: "r"}, span("t2", "b"), span("t1", "c"), span("t1", "d"), span("t2", "e"),
	}
	got := coalesceSpans(batch)
	require.Len(t, got, 3)
	require.Equal(t, "d", got[0].Span.SpanID, "t1's last span event, where t1's first was")
	require.Equal(t, event.RunStatus, got[1].Kind)
	require.Equal(t, "e", got[2].Span.SpanID)
	require.Empty(t, coalesceSpans(nil))
}
