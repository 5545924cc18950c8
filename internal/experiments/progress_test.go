package experiments_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/experiments"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/store"
)

// An experiment's progress reaches a browser connected to another instance: the driver publishes
// on its own hub, and a client of a second hub on the same database, subscribed to
// experiment:<id>, gets the counts from its snapshot, then experiment.progress events as the
// examples are scored (their scores with them), the last one saying finished with every example
// scored.
func TestExperimentProgressReachesAnotherInstance(t *testing.T) {
	h := newHarness(t)
	pool := h.pool
	hubs := make([]*live.Hub, 2)
	for i := range hubs {
		hub, err := live.New(live.Config{Pool: pool})
		require.NoError(t, err)
		require.NoError(t, hub.Start(context.Background()))
		t.Cleanup(hub.Stop)
		hubs[i] = hub
	}
	srv := httptest.NewServer(hubs[1])
	t.Cleanup(srv.Close)
	h.exp.SetPublisher(hubs[0])

	h.dataset("shop", h.recordRuns(1, 2, 3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := h.exp.Start(ctx, experiments.StartParams{Dataset: "shop", Action: "/flow/shop", Evaluators: []string{"trajectory", "succeeded"}, Concurrency: 1})
	require.NoError(t, err)

	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	resp.Body.Close()
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.WriteJSON(live.Request{Type: "subscribe", Topic: "experiment:" + e.ID.String()}))
	type msg struct {
		Topic string                       `json:"topic"`
		Kind  event.Kind                   `json:"kind"`
		Data  event.ExperimentProgressData `json:"data"`
	}
	read := func() msg {
		t.Helper()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
		var m msg
		require.NoError(t, conn.ReadJSON(&m))
		return m
	}
	snap := read()
	require.Equal(t, event.Snapshot, snap.Kind)
	require.Equal(t, store.ExperimentRunning, snap.Data.Status)
	require.Equal(t, 3, snap.Data.Total)
	require.Equal(t, 0, snap.Data.Scored)

	done := make(chan error, 1)
	go func() {
		_, err := h.exp.Drive(ctx, e.ID, nil)
		done <- err
	}()
	scored := map[string]event.ExperimentExample{}
	lastScored := 0
	for {
		m := read()
		require.Equal(t, event.ExperimentProgress, m.Kind)
		require.Equal(t, "experiment:"+e.ID.String(), m.Topic)
		require.Equal(t, e.ID.String(), m.Data.ExperimentID)
		require.GreaterOrEqual(t, m.Data.Scored, lastScored, "the count never goes back")
		lastScored = m.Data.Scored
		for _, x := range m.Data.Scores {
			scored[x.ExampleKey] = x
		}
		if m.Data.Status == store.ExperimentFinished {
			require.Equal(t, 3, m.Data.Scored)
			require.Equal(t, 3, m.Data.Passed)
			require.Equal(t, 0, m.Data.Failed)
			break
		}
	}
	require.NoError(t, <-done)
	require.Len(t, scored, 3, "every example's scores arrived")
	for _, x := range scored {
		require.True(t, x.Pass)
		require.Equal(t, store.RunSucceeded, x.RunStatus)
		require.NotEmpty(t, x.RunID)
		require.Len(t, x.Scores, 2)
		require.Equal(t, "trajectory", x.Scores[0].Evaluator)
		require.NotNil(t, x.Scores[0].Score)
		raw, err := json.Marshal(x)
		require.NoError(t, err)
		require.NotContains(t, string(raw), "explanation", "explanations stay in the database")
	}
}
