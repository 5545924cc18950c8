package live_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/live"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/store/storetest"
	"github.com/loupe-dev/loupe/internal/trace"
)

type bundle struct {
	pool  *pgxpool.Pool
	store *store.Store
}

func setup(t testing.TB) *bundle {
	t.Helper()
	pool := storetest.NewPool(t)
	return &bundle{pool: pool, store: store.New(pool)}
}

// startHub starts a hub over pool behind an httptest server and returns its ws:// URL.
func startHub(t testing.TB, pool *pgxpool.Pool, cfg live.Config) (*live.Hub, string) {
	t.Helper()
	cfg.Pool = pool
	h, err := live.New(cfg)
	require.NoError(t, err)
	require.NoError(t, h.Start(context.Background()))
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Stop(); srv.Close() })
	return h, "ws" + strings.TrimPrefix(srv.URL, "http")
}

type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
}

func dial(t *testing.T, url string) *wsClient {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
	require.NoError(t, err)
	resp.Body.Close()
	t.Cleanup(func() { conn.Close() })
	return &wsClient{t: t, conn: conn}
}

func (c *wsClient) subscribe(topic string, after int64) {
	c.t.Helper()
	require.NoError(c.t, c.conn.WriteJSON(live.Request{Type: "subscribe", Topic: topic, After: after}))
}

type message struct {
	Topic string          `json:"topic"`
	Seq   int64           `json:"seq"`
	Kind  event.Kind      `json:"kind"`
	Data  json.RawMessage `json:"data"`
}

// next reads messages until one matches kind, failing after a deadline.
func (c *wsClient) next(kind event.Kind) message {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	for {
		var m message
		require.NoError(c.t, c.conn.ReadJSON(&m), "waiting for %s", kind)
		if m.Kind == kind {
			return m
		}
	}
}

// chunkSeqs reads chunk messages until it has seen seq up to last, and returns every seq seen.
func (c *wsClient) chunkSeqs(last int64) []int64 {
	c.t.Helper()
	var seqs []int64
	for len(seqs) == 0 || seqs[len(seqs)-1] < last {
		m := c.next("run.chunks")
		var d struct {
			Chunks []live.ChunkData `json:"chunks"`
		}
		require.NoError(c.t, json.Unmarshal(m.Data, &d))
		for _, ch := range d.Chunks {
			seqs = append(seqs, ch.Seq)
		}
		require.Equal(c.t, seqs[len(seqs)-1], m.Seq, "a chunk message's seq is its last chunk's")
	}
	return seqs
}

func (b *bundle) newRun(t testing.TB) uuid.UUID {
	t.Helper()
	run, err := b.store.RunCreate(context.Background(), store.RunCreateParams{Action: "/flow/test"})
	require.NoError(t, err)
	return run.ID
}

func (b *bundle) addChunks(t *testing.T, runID uuid.UUID, from, to int64) {
	t.Helper()
	var chunks []store.RunChunk
	for s := from; s <= to; s++ {
		chunks = append(chunks, store.RunChunk{RunID: runID, Seq: s, Role: "model", Content: json.RawMessage(fmt.Sprintf(`{"text":"c%d"}`, s))})
	}
	require.NoError(t, b.store.ChunkInsert(context.Background(), chunks))
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// TestSubscribeReplaysFromDatabaseThenStreams proves the resume protocol: a client that says it saw
// up to seq 2 gets a snapshot, then chunks 3..5 from the database, then new chunks live.
func TestSubscribeReplaysFromDatabaseThenStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hub, url := startHub(t, b.pool, live.Config{})
	runID := b.newRun(t)
	b.addChunks(t, runID, 1, 5)

	c := dial(t, url)
	c.subscribe("run:"+runID.String(), 2)
	snap := c.next(event.Snapshot)
	require.JSONEq(t, `{"status":"queued","max_seq":5,"turns":0,"version":1}`, string(snap.Data))
	require.Equal(t, seqRange(3, 5), c.chunkSeqs(5))

	b.addChunks(t, runID, 6, 8)
	hub.Publish(runID, event.RunChunksData{LastSeq: 8})
	require.Equal(t, seqRange(6, 8), c.chunkSeqs(8))

	hub.Publish(runID, event.RunStatusData{Status: "running"})
	m := c.next("run.status")
	require.Equal(t, int64(8), m.Seq, "state events carry the run's current chunk seq")
	require.JSONEq(t, fmt.Sprintf(`{"run_id":%q,"status":"running"}`, runID), string(m.Data))
}

// TestTwoHubsOnOneDatabaseShareEvents runs two hubs, as two devui processes would, and proves that
// what one publishes reaches the other's clients through LISTEN/NOTIFY: chunks, run status (on
// the run, the runs list and the dashboard) and interrupts (on the inbox).
func TestTwoHubsOnOneDatabaseShareEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hubA, urlA := startHub(t, b.pool, live.Config{})
	_, urlB := startHub(t, b.pool, live.Config{})
	runID := b.newRun(t)

	onA, onB := dial(t, urlA), dial(t, urlB)
	for _, c := range []*wsClient{onA, onB} {
		c.subscribe("run:"+runID.String(), 0)
		c.next(event.Snapshot)
	}
	inbox := dial(t, urlB)
	inbox.subscribe(live.TopicInbox, 0)
	require.JSONEq(t, `{"pending":[]}`, string(inbox.next(event.Snapshot).Data))
	runsList := dial(t, urlB)
	runsList.subscribe(live.TopicRuns, 0)
	runsList.next(event.Snapshot)

	b.addChunks(t, runID, 1, 3)
	hubA.Publish(runID, event.RunChunksData{LastSeq: 3})
	require.Equal(t, seqRange(1, 3), onA.chunkSeqs(3))
	require.Equal(t, seqRange(1, 3), onB.chunkSeqs(3), "the other instance reads the chunks from the database")

	hubA.Publish(runID, event.InterruptChangedData{InterruptID: "x", Status: "pending"})
	require.Contains(t, string(inbox.next("interrupt.changed").Data), `"status":"pending"`)
	hubA.Publish(runID, event.RunStatusData{Status: "succeeded"})
	require.Contains(t, string(runsList.next("run.status").Data), runID.String())
	require.Contains(t, string(onB.next("run.status").Data), "succeeded")
}

// TestSlowClientIsDroppedAndLosesNothing fills a client's queue while it does not read: the hub
// drops it rather than wait, and on reconnecting from its last seq it gets every chunk.
func TestSlowClientIsDroppedAndLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hub, url := startHub(t, b.pool, live.Config{SendBuffer: 2})
	runID := b.newRun(t)

	slow := dial(t, url)
	slow.subscribe("run:"+runID.String(), 0)
	slow.next(event.Snapshot)
	for i := range 200 {
		hub.Publish(runID, event.RunStatusData{Status: fmt.Sprint("running ", i)})
	}
	require.Eventually(t, func() bool { return hub.Dropped.Load() > 0 }, 10*time.Second, 10*time.Millisecond)
	// The dropped connection ends: reading it fails soon.
	require.NoError(t, slow.conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	for {
		if _, _, err := slow.conn.ReadMessage(); err != nil {
			break
		}
	}

	b.addChunks(t, runID, 1, 40)
	again := dial(t, url)
	again.subscribe("run:"+runID.String(), 0)
	require.Equal(t, seqRange(1, 40), again.chunkSeqs(40))
}

// TestOriginIsChecked refuses a handshake from another site's page.
func TestOriginIsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, url := startHub(t, b.pool, live.Config{})
	_, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Origin": {"http://evil.example"}})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp.Body.Close()

	host := strings.TrimPrefix(url, "ws://")
	conn, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Origin": {"http://" + host}})
	require.NoError(t, err)
	resp.Body.Close()
	conn.Close()
}

// TestBadRequestsGetErrors answers malformed subscriptions with an error event, keeping the
// connection.
func TestBadRequestsGetErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, url := startHub(t, b.pool, live.Config{})
	c := dial(t, url)
	c.subscribe("run:not-a-uuid", 0)
	require.Contains(t, string(c.next("error").Data), "want run:")
	c.subscribe("experiment:42", 0)
	require.Contains(t, string(c.next("error").Data), `want experiment:\u003cuuid`)
	c.subscribe(live.TopicDashboard, 0)
	c.next(event.Snapshot)
	// An experiment nobody has: its snapshot says so.
	c.subscribe("experiment:"+uuid.NewString(), 0)
	require.JSONEq(t, `{"status":"unknown"}`, string(c.next(event.Snapshot).Data))
}

// TestLifecycle: Stop is safe without Start and twice, and Start after Stop does nothing.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, err := live.New(live.Config{Pool: b.pool})
	require.NoError(t, err)
	h.Stop()
	h.Stop()
	require.NoError(t, h.Start(context.Background()))
	h.Stop()

	h2, err := live.New(live.Config{Pool: b.pool})
	require.NoError(t, err)
	require.NoError(t, h2.Start(context.Background()))
	h2.Publish(uuid.New(), event.RunStatusData{}) // no subscribers: dropped quietly
	h2.Stop()
	h2.Stop()
}

// TestPublishChunksStreamsInOrderAndCatchesUpFromDatabase proves the in-process path: chunks the
// writer hands over reach its subscribers in order, each once; a batch that would leave a gap (its
// predecessor was written but never handed over) makes the hub read the missing chunks from the
// database first; and another instance, which only gets the notification, reads them back.
func TestPublishChunksStreamsInOrderAndCatchesUpFromDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hubA, urlA := startHub(t, b.pool, live.Config{})
	_, urlB := startHub(t, b.pool, live.Config{})
	runID := b.newRun(t)
	b.addChunks(t, runID, 1, 3)

	onA, onB := dial(t, urlA), dial(t, urlB)
	for _, c := range []*wsClient{onA, onB} {
		c.subscribe("run:"+runID.String(), 0)
		c.next(event.Snapshot)
		require.Equal(t, seqRange(1, 3), c.chunkSeqs(3), "the replay comes from the database")
	}

	publish := func(from, to int64) {
		var chunks []store.RunChunk
		for s := from; s <= to; s++ {
			chunks = append(chunks, store.RunChunk{RunID: runID, Seq: s, Role: "model", Content: json.RawMessage(fmt.Sprintf(`{"text":"c%d"}`, s))})
		}
		require.NoError(t, b.store.ChunkInsert(context.Background(), chunks))
		hubA.PublishChunks(runID, chunks)
	}
	publish(4, 6)
	require.Equal(t, seqRange(4, 6), onA.chunkSeqs(6))

	b.addChunks(t, runID, 7, 8) // written, never handed over
	publish(9, 10)
	require.Equal(t, seqRange(7, 10), onA.chunkSeqs(10), "the gap is read from the database")
	require.Equal(t, seqRange(4, 10), onB.chunkSeqs(10), "the other instance reads the chunks back")
}

// TestSpanEventsReachTheOtherInstance publishes a span event on one hub and reads it, with every
// field, from a trace subscriber and a run subscriber on another.
func TestSpanEventsReachTheOtherInstance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hubA, _ := startHub(t, b.pool, live.Config{})
	_, urlB := startHub(t, b.pool, live.Config{})
	runID := b.newRun(t)
	const traceID = "7c74a721b00e2befd7101e2794d8c4b0"
	onTrace, onRun := dial(t, urlB), dial(t, urlB)
	onTrace.subscribe("trace:"+traceID, 0)
	onTrace.next(event.Snapshot)
	onRun.subscribe("run:"+runID.String(), 0)
	onRun.next(event.Snapshot)

	parent := "00f067aa0ba902b7"
	hubA.Spans().Publish(trace.SpanEvent{Type: event.SpanStarted, Span: store.Span{TraceID: traceID, SpanID: "6be520f337a0d748",
		ParentSpanID: &parent, Name: "tool", StartTime: 5, StatusCode: 0, RunID: &runID}})
	want := `{"type":"span_start","span_id":"6be520f337a0d748","name":"tool","start":5,"end":0,"status":0,"parent":"00f067aa0ba902b7"}`
	require.JSONEq(t, want, string(onTrace.next(event.Span).Data))
	require.JSONEq(t, want, string(onRun.next(event.Span).Data))
}
