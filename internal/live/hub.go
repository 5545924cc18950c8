// Package live is Loupe's live event hub. Browsers hold one WebSocket per page, subscribed to
// topics (a run, the inbox, the dashboard, the runs list, a trace). Publishers (the run service, the
// trace pipeline, the server) tell the hub that something changed; the hub fans the news out to the
// subscribers of this process and, through PostgreSQL LISTEN/NOTIFY, of every other process on the
// same database.
//
// The database is the source of truth. A run's chunks are never carried by the notification. The
// process that wrote them hands them to its own hub in-process (PublishChunks), which fans them out
// without reading them back; every other instance, and any subscriber that is behind, reads them
// from run_chunks once per topic. A client that (re)connects says the last sequence number it saw
// and gets the rest from the database. That is what lets the hub drop a slow client instead of
// waiting for it: the client reconnects and loses nothing.
package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loupe-dev/loupe/internal/event"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

// Topics a client can subscribe to. Run and trace topics carry an id after the colon.
const (
	TopicInbox     = "inbox"
	TopicDashboard = "dashboard"
	TopicRuns      = "runs"
	prefixRun      = "run:"
	prefixTrace    = "trace:"
	// prefixExperiment's topics carry an experiment's progress (event.ExperimentProgress).
	prefixExperiment = "experiment:"
)

// DefaultChannel is the PostgreSQL NOTIFY channel.
const DefaultChannel = "loupe_live"

// Config configures a Hub.
type Config struct {
	// Pool is the database: LISTEN/NOTIFY and the replay reads go through it. Required.
	Pool *pgxpool.Pool
	// Channel is the NOTIFY channel; default DefaultChannel.
	Channel string
	// PingInterval is how often the server pings each client; a client that does not answer within
	// twice that is dropped. Default 25s.
	PingInterval time.Duration
	// WriteTimeout bounds each write to a client. Default 10s.
	WriteTimeout time.Duration
	// SendBuffer is how many messages may wait for a client before it counts as slow and is
	// dropped. Default 256.
	SendBuffer int
	// MaxTopics caps subscriptions per connection. Default 32.
	MaxTopics int
	Logger    *slog.Logger
}

// Hub is the live event hub. Start and Stop follow the house lifecycle contract.
type Hub struct {
	cfg      Config
	store    *store.Store
	log      *slog.Logger
	origin   string // this instance, so that it skips its own notifications
	upgrader websocket.Upgrader

	outbox chan wireEvent // events waiting to be NOTIFYed to the other instances

	mu      sync.Mutex
	topics  map[string]*topic
	clients map[*client]struct{}
	started bool
	stopped bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup // listener, notifier, fetchers and client goroutines

	counter atomic.Int64 // sequence of the topics that have no database sequence

	// Dropped counts clients dropped for being slow; tests and metrics read it.
	Dropped atomic.Int64
}

// topic is one subscription target with its subscribers.
type topic struct {
	name  string
	runID uuid.UUID // for run topics
	// experimentID is set for experiment topics, whose snapshot is the experiment's counts.
	experimentID uuid.UUID
	clients      map[*client]*subscription
	// fetching is set while a goroutine reads this run's chunks; dirty asks it to read again.
	fetching, dirty bool
}

// subscription is one client's position on one topic.
type subscription struct {
	// seen is the last chunk seq queued for the client on a run topic: the next chunk it gets is
	// seen+1, so chunks arrive in order, each once.
	seen int64
	// ready is set once the snapshot is queued; nothing is sent to the client before it.
	ready bool
}

// wireEvent is what crosses instances: what changed, never the rows themselves.
type wireEvent struct {
	Origin string          `json:"-"` // sent once per NOTIFY, ahead of its events (see packPayloads)
	RunID  string          `json:"r,omitempty"`
	Trace  string          `json:"t,omitempty"`
	Exp    string          `json:"x,omitempty"` // an experiment's id
	Kind   event.Kind      `json:"k"`
	Data   json.RawMessage `json:"d,omitempty"` // the payload, encoded once
	Span   *event.SpanData `json:"s,omitempty"` // a span event's data, in place of Data
}

// Message is what a client receives: one event on one topic. Seq is the run's chunk sequence on a
// run topic (what a client sends back as "after"), and a per-process counter elsewhere.
type Message struct {
	Topic string     `json:"topic"`
	Seq   int64      `json:"seq"`
	Kind  event.Kind `json:"kind"`
	Data  any        `json:"data,omitempty"`
}

// New builds a hub over a pool. It serves WebSockets at once; cross-instance events start with
// Start.
func New(cfg Config) (*Hub, error) {
	if cfg.Pool == nil {
		return nil, errors.New("live: a pool is required")
	}
	if cfg.Channel == "" {
		cfg.Channel = DefaultChannel
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 25 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.SendBuffer <= 0 {
		cfg.SendBuffer = 256
	}
	if cfg.MaxTopics <= 0 {
		cfg.MaxTopics = 32
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Hub{
		cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.With("component", "live"),
		origin: uuid.NewString()[:8],
		outbox: make(chan wireEvent, 4096),
		topics: map[string]*topic{}, clients: map[*client]struct{}{},
	}
	h.upgrader = websocket.Upgrader{
		ReadBufferSize: 1024, WriteBufferSize: 16 << 10,
		CheckOrigin:       sameOrigin,
		EnableCompression: false,
	}
	return h, nil
}

// Start listens for the other instances' events and starts sending this one's.
func (h *Hub) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started || h.stopped {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	h.started = true
	ready := make(chan error, 1)
	h.wg.Add(2)
	go h.listen(ctx, ready)
	go h.notify(ctx)
	h.mu.Unlock()
	err := <-ready
	h.mu.Lock()
	if err != nil {
		return fmt.Errorf("live: listen on %s: %w", h.cfg.Channel, err)
	}
	h.log.Info("live hub started", "channel", h.cfg.Channel, "origin", h.origin)
	return nil
}

// Stop closes every connection and waits for the hub's goroutines. It is safe to call twice and
// without Start.
func (h *Hub) Stop() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	if h.cancel != nil {
		h.cancel()
	}
	clients := make([]*client, 0, len(h.clients))
	for c := range h.clients {
		clients = append(clients, c)
	}
	h.mu.Unlock()
	for _, c := range clients {
		c.close()
	}
	h.wg.Wait()
}

// Publish implements runs.Publisher: it delivers the event here and queues it for the other
// instances. It never blocks; when the queue is full the event is dropped and the other instances'
// clients catch up on their next chunk or reconnect.
func (h *Hub) Publish(runID uuid.UUID, p event.Payload) {
	data, err := json.Marshal(p)
	if err != nil {
		h.log.Error("live: encode event", "kind", p.Kind(), "err", err)
		return
	}
	ev := wireEvent{Origin: h.origin, Kind: p.Kind(), Data: data}
	if runID != uuid.Nil {
		ev.RunID = runID.String()
	}
	h.deliver(ev)
	h.enqueue(ev)
}

// PublishChunks delivers chunks that the caller has just made durable to this process's
// subscribers straight from memory, encoded once for all of them, and tells the other instances
// (which read them from the database) with a run.chunks event. The runner calls it instead of
// Publish(run.chunks) when its publisher has it. The hub does not keep chunks after it returns.
func (h *Hub) PublishChunks(runID uuid.UUID, chunks []store.RunChunk) {
	if len(chunks) == 0 {
		return
	}
	last := chunks[len(chunks)-1].Seq
	h.pushChunks(prefixRun+runID.String(), chunks)
	data, _ := json.Marshal(event.RunChunksData{LastSeq: last}) // a struct of an int64 always encodes
	h.enqueue(wireEvent{Origin: h.origin, RunID: runID.String(), Kind: event.RunChunks, Data: data})
}

// PublishExperiment sends an experiment's event (event.ExperimentProgressData) to the
// subscribers of its topic, experiment:<id>, here and on the other instances. It never blocks.
func (h *Hub) PublishExperiment(id uuid.UUID, p event.Payload) {
	data, err := json.Marshal(p)
	if err != nil {
		h.log.Error("live: encode event", "kind", p.Kind(), "err", err)
		return
	}
	ev := wireEvent{Origin: h.origin, Exp: id.String(), Kind: p.Kind(), Data: data}
	h.deliver(ev)
	h.enqueue(ev)
}

// Spans returns the hub as a trace.Publisher, so that span starts and ends show live.
func (h *Hub) Spans() trace.Publisher { return spanPublisher{h} }

type spanPublisher struct{ h *Hub }

// Publish sends a span event to the run's and the trace's subscribers.
func (p spanPublisher) Publish(ev trace.SpanEvent) {
	s := &ev.Span
	data := &event.SpanData{Type: ev.Type, SpanID: s.SpanID, Name: s.Name, Start: s.StartTime, End: s.EndTime, Status: s.StatusCode}
	if s.ParentSpanID != nil {
		data.Parent = *s.ParentSpanID
	}
	w := wireEvent{Origin: p.h.origin, Trace: s.TraceID, Kind: event.Span, Span: data}
	if s.RunID != nil {
		w.RunID = s.RunID.String()
	}
	p.h.deliver(w)
	p.h.enqueue(w)
}

func (h *Hub) enqueue(ev wireEvent) {
	h.mu.Lock()
	running := h.started && !h.stopped
	h.mu.Unlock()
	if !running {
		return
	}
	select {
	case h.outbox <- ev:
	default:
		h.log.Warn("live: notify queue full; event dropped", "kind", ev.Kind)
	}
}

// deliver routes one event to this process's subscribers.
func (h *Hub) deliver(ev wireEvent) {
	var runTopic string
	if ev.RunID != "" {
		runTopic = prefixRun + ev.RunID
	}
	switch ev.Kind {
	case event.RunChunks:
		if runTopic != "" {
			h.fetchChunks(runTopic)
		}
		return
	case event.Span:
		var data any = ev.Span
		if ev.Span == nil {
			data = ev.Data
		}
		if runTopic != "" {
			h.broadcast(runTopic, ev.Kind, data)
		}
		if ev.Trace != "" {
			h.broadcast(prefixTrace+ev.Trace, ev.Kind, data)
		}
		return
	}
	if ev.Exp != "" {
		// An event too large for a NOTIFY arrives without its data: subscribers read the
		// experiment.
		var data any
		if len(ev.Data) > 0 {
			data = ev.Data
		}
		h.broadcast(prefixExperiment+ev.Exp, ev.Kind, data)
		return
	}
	data := withRunID(ev.RunID, ev.Data)
	if runTopic != "" {
		h.broadcast(runTopic, ev.Kind, data)
	}
	switch ev.Kind {
	case event.InboxPresence, event.InterruptClaimed:
		// Who has an inbox item open, and who claimed it: for the inboxes only.
		h.broadcast(TopicInbox, ev.Kind, data)
	case event.InterruptChanged:
		h.broadcast(TopicInbox, ev.Kind, data)
		h.broadcast(TopicDashboard, ev.Kind, data)
	case event.RunStatus:
		h.broadcast(TopicRuns, ev.Kind, data)
		h.broadcast(TopicDashboard, ev.Kind, data)
	}
}

// withRunID is an event's payload as clients receive it: the payload's fields with "run_id" first
// (empty for events about no run). A payload is a JSON object or nothing.
func withRunID(runID string, payload json.RawMessage) json.RawMessage {
	id, _ := json.Marshal(runID) // a string always encodes
	out := append([]byte(`{"run_id":`), id...)
	if p := bytes.TrimSpace(payload); len(p) > 2 && p[0] == '{' {
		out = append(append(out, ','), p[1:]...)
		return out
	}
	return append(out, '}')
}

// broadcast offers an event to every subscriber of a topic without waiting. It is encoded once
// per distinct seq: once in all on a run topic whose subscribers are in step, and always once
// elsewhere.
func (h *Hub) broadcast(name string, kind event.Kind, data any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[name]
	if t == nil || len(t.clients) == 0 {
		return
	}
	seq := int64(0)
	if t.runID == uuid.Nil {
		seq = h.counter.Add(1)
	}
	var (
		encodedSeq int64
		encoded    *websocket.PreparedMessage
	)
	for c, sub := range t.clients {
		if !sub.ready {
			continue // its snapshot, read after this event, is newer
		}
		s := seq
		if t.runID != uuid.Nil {
			s = sub.seen
		}
		if encoded == nil || s != encodedSeq {
			msg, err := prepare(Message{Topic: name, Seq: s, Kind: kind, Data: data})
			if err != nil {
				h.log.Error("live: encode event", "kind", kind, "err", err)
				return
			}
			encoded, encodedSeq = msg, s
		}
		h.offerLocked(c, encoded)
	}
}

// prepare encodes a message once, framed once, for any number of connections.
func prepare(m Message) (*websocket.PreparedMessage, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return websocket.NewPreparedMessage(websocket.TextMessage, b)
}

// offerLocked queues a message for a client, dropping the client when its queue is full.
func (h *Hub) offerLocked(c *client, msg *websocket.PreparedMessage) {
	select {
	case c.send <- msg:
	default:
		h.Dropped.Add(1)
		h.log.Info("live: dropping a slow client", "remote", c.remote)
		h.removeLocked(c)
		go c.close()
	}
}

// fetchChunks reads a run topic's new chunks from the database, once for all its subscribers.
// Concurrent triggers coalesce: a fetch in flight reads again when it finishes.
func (h *Hub) fetchChunks(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[name]; t != nil {
		h.fetchLocked(t)
	}
}

func (h *Hub) fetchLocked(t *topic) {
	if len(t.clients) == 0 || h.stopped {
		return
	}
	if t.fetching {
		t.dirty = true
		return
	}
	t.fetching = true
	h.wg.Add(1)
	go h.fetchLoop(t)
}

// pushChunks fans out chunks this process has just written. Each subscriber gets those after the
// last seq it was sent; one that would see a gap (it is still replaying, or the chunks came out of
// order) gets nothing here and is caught up from the database instead.
func (h *Hub) pushChunks(name string, chunks []store.RunChunk) {
	data := make([]ChunkData, len(chunks))
	for i, ch := range chunks {
		data[i] = ChunkData{Seq: ch.Seq, Turn: ch.Turn, Index: ch.Index, Role: ch.Role, Content: ch.Content}
	}
	h.mu.Lock()
	t := h.topics[name]
	if t == nil || len(t.clients) == 0 {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	// Encode the whole batch outside the lock: almost every subscriber is in step and takes it.
	whole, err := encodeChunks(name, data)
	if err != nil {
		h.log.Error("live: encode chunks", "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if t = h.topics[name]; t == nil {
		return
	}
	if h.sendChunksLocked(t, data, whole, true) {
		h.fetchLocked(t)
	}
}

func encodeChunks(name string, data []ChunkData) (*websocket.PreparedMessage, error) {
	return prepare(Message{Topic: name, Seq: data[len(data)-1].Seq, Kind: event.RunChunks, Data: chunksData{data}})
}

// chunksData is a run.chunks message's data.
type chunksData struct {
	Chunks []ChunkData `json:"chunks"`
}

// chunkBatch caps the chunks read, and sent in one message, at a time.
const chunkBatch = 500

func (h *Hub) fetchLoop(t *topic) {
	defer h.wg.Done()
	ctx := context.Background()
	for {
		h.mu.Lock()
		if len(t.clients) == 0 || h.stopped {
			t.fetching = false
			h.mu.Unlock()
			return
		}
		from := int64(-1)
		for _, sub := range t.clients {
			if sub.ready && (from < 0 || sub.seen < from) {
				from = sub.seen
			}
		}
		t.dirty = false
		if from < 0 { // nobody is ready; subscribe fetches again once they are
			t.fetching = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()

		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		chunks, err := h.store.ChunkList(qctx, t.runID, from, chunkBatch)
		cancel()

		h.mu.Lock()
		if err != nil {
			h.log.Warn("live: read chunks", "run_id", t.runID, "err", err)
			t.fetching = false
			h.mu.Unlock()
			return
		}
		if len(chunks) > 0 {
			data := make([]ChunkData, len(chunks))
			for i, ch := range chunks {
				data[i] = ChunkData{Seq: ch.Seq, Turn: ch.Turn, Index: ch.Index, Role: ch.Role, Content: ch.Content}
			}
			h.sendChunksLocked(t, data, nil, false)
		}
		if len(chunks) < chunkBatch && !t.dirty {
			t.fetching = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}

// ChunkData is a chunk as clients receive it.
type ChunkData struct {
	Seq     int64           `json:"seq"`
	Turn    int             `json:"turn"`
	Index   int             `json:"index"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// sendChunksLocked queues, for each ready subscriber, the chunks after the last one it was sent,
// encoding each distinct suffix once; whole, when given, is data already encoded. Live chunks
// (live is set) go only to subscribers they follow without a gap, and it reports whether any
// subscriber was left behind. Chunks read from the database go to everyone.
func (h *Hub) sendChunksLocked(t *topic, data []ChunkData, whole *websocket.PreparedMessage, live bool) (behind bool) {
	last := data[len(data)-1].Seq
	var encoded map[int]*websocket.PreparedMessage // by first index, for subscribers not in step
	for c, sub := range t.clients {
		if !sub.ready || sub.seen >= last {
			continue
		}
		i := 0
		for i < len(data) && data[i].Seq <= sub.seen {
			i++
		}
		if live && data[i].Seq != sub.seen+1 {
			behind = true
			continue
		}
		msg := whole
		if i > 0 || msg == nil {
			if msg = encoded[i]; msg == nil {
				var err error
				if msg, err = encodeChunks(t.name, data[i:]); err != nil {
					h.log.Error("live: encode chunks", "err", err)
					return behind
				}
				if encoded == nil {
					encoded = map[int]*websocket.PreparedMessage{}
				}
				encoded[i] = msg
			}
		}
		sub.seen = last
		h.offerLocked(c, msg)
	}
	return behind
}

// subscribe adds a client to a topic from a sequence number, sends it a snapshot of the current
// state, and replays what it missed.
func (h *Hub) subscribe(ctx context.Context, c *client, name string, after int64) error {
	t, err := parseTopic(name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return errors.New("hub stopped")
	}
	if _, ok := c.topics[name]; !ok && len(c.topics) >= h.cfg.MaxTopics {
		h.mu.Unlock()
		return fmt.Errorf("too many topics (at most %d)", h.cfg.MaxTopics)
	}
	if existing := h.topics[name]; existing != nil {
		t = existing
	} else {
		h.topics[name] = t
	}
	if after < 0 {
		after = 0
	}
	sub := &subscription{seen: after}
	t.clients[c] = sub
	c.topics[name] = struct{}{}
	h.mu.Unlock()

	snap, err := h.snapshot(ctx, t)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.clients[c] != sub {
		return nil // dropped, unsubscribed or subscribed again meanwhile
	}
	seq := after
	if t.runID == uuid.Nil {
		seq = h.counter.Add(1)
	}
	msg, err := prepare(Message{Topic: name, Seq: seq, Kind: event.Snapshot, Data: snap})
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	sub.ready = true
	h.offerLocked(c, msg)
	if t.runID != uuid.Nil {
		h.fetchLocked(t)
	}
	return nil
}

func (h *Hub) unsubscribe(c *client, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[name]; t != nil {
		delete(t.clients, c)
		if len(t.clients) == 0 && !t.fetching {
			delete(h.topics, name)
		}
	}
	delete(c.topics, name)
}

// removeLocked forgets a client everywhere.
func (h *Hub) removeLocked(c *client) {
	for name := range c.topics {
		if t := h.topics[name]; t != nil {
			delete(t.clients, c)
			if len(t.clients) == 0 && !t.fetching {
				delete(h.topics, name)
			}
		}
	}
	c.topics = map[string]struct{}{}
	delete(h.clients, c)
}

// snapshot is a topic's current state, read from the database, sent on every (re)subscribe.
func (h *Hub) snapshot(ctx context.Context, t *topic) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch {
	case t.runID != uuid.Nil:
		run, err := h.store.RunGet(ctx, t.runID)
		if errors.Is(err, store.ErrNotFound) {
			return map[string]any{"status": "unknown"}, nil
		}
		if err != nil {
			return nil, err
		}
		maxSeq, err := h.store.ChunkMaxSeq(ctx, t.runID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"status": run.Status, "max_seq": maxSeq, "turns": run.Turns, "version": run.Version}, nil
	case t.experimentID != uuid.Nil:
		e, err := h.store.ExperimentGet(ctx, t.experimentID)
		if errors.Is(err, store.ErrNotFound) {
			return map[string]any{"status": "unknown"}, nil
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"experiment_id": e.ID.String(), "status": e.Status, "total": e.Total, "started": e.Started,
			"scored": e.Scored, "passed": e.Passed, "failed": e.Scored - e.Passed}, nil
	case t.name == TopicInbox:
		list, err := h.store.InterruptListPending(ctx, 500)
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(list))
		for i, it := range list {
			ids[i] = it.ID.String()
		}
		return map[string]any{"pending": ids}, nil
	}
	return map[string]any{}, nil
}

func parseTopic(name string) (*topic, error) {
	t := &topic{name: name, clients: map[*client]*subscription{}}
	switch {
	case name == TopicInbox, name == TopicDashboard, name == TopicRuns:
		return t, nil
	case strings.HasPrefix(name, prefixRun):
		id, err := uuid.Parse(strings.TrimPrefix(name, prefixRun))
		if err != nil {
			return nil, fmt.Errorf("topic %q: want run:<uuid>", name)
		}
		t.runID = id
		t.name = prefixRun + id.String()
		return t, nil
	case strings.HasPrefix(name, prefixExperiment):
		id, err := uuid.Parse(strings.TrimPrefix(name, prefixExperiment))
		if err != nil {
			return nil, fmt.Errorf("topic %q: want experiment:<uuid>", name)
		}
		t.experimentID = id
		t.name = prefixExperiment + id.String()
		return t, nil
	case strings.HasPrefix(name, prefixTrace):
		id := strings.TrimPrefix(name, prefixTrace)
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("topic %q: want trace:<32 lowercase hex digits>", name)
		}
		return t, nil
	}
	return nil, fmt.Errorf("unknown topic %q: want run:<id>, trace:<id>, experiment:<id>, inbox, dashboard or runs", name)
}

// sameOrigin accepts a WebSocket handshake only from a page of this server: the Origin's host must
// be the request's Host. Non-browser clients, which send no Origin, are accepted; they still need
// the same credentials as any request.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	host, ok := strings.CutPrefix(origin, "http://")
	if !ok {
		host, ok = strings.CutPrefix(origin, "https://")
	}
	return ok && strings.EqualFold(host, r.Host)
}
