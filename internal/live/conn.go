package live

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/loupe-dev/loupe/internal/event"
)

// Request is what a client sends: subscribe to a topic from a sequence number, or unsubscribe.
type Request struct {
	Type  string `json:"type"` // subscribe or unsubscribe
	Topic string `json:"topic"`
	After int64  `json:"after"`
}

// client is one WebSocket connection: a reader goroutine (the HTTP handler's) and a writer
// goroutine. Only the writer writes; everyone else hands it messages through send, never waiting.
type client struct {
	hub    *Hub
	conn   *websocket.Conn
	remote string
	send   chan *websocket.PreparedMessage
	// topics is guarded by hub.mu.
	topics map[string]struct{}

	closeOnce sync.Once
	quit      chan struct{}
}

func (c *client) close() {
	c.closeOnce.Do(func() {
		close(c.quit)
		_ = c.conn.Close()
	})
}

// ServeHTTP upgrades an authenticated request to a WebSocket and serves it until the client
// leaves, is dropped, or the hub stops. Authentication is the caller's: mount it behind the same
// middleware as the pages.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if stopped {
		http.Error(w, "live hub stopped", http.StatusServiceUnavailable)
		return
	}
	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered with an error status
	}
	c := &client{hub: h, conn: conn, remote: r.RemoteAddr, send: make(chan *websocket.PreparedMessage, h.cfg.SendBuffer),
		topics: map[string]struct{}{}, quit: make(chan struct{})}
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		_ = conn.Close()
		return
	}
	h.clients[c] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()

	go c.writeLoop()
	c.readLoop(r.Context())
	c.close()
	h.mu.Lock()
	h.removeLocked(c)
	h.mu.Unlock()
}

// readLoop reads requests until the connection fails; pongs extend the read deadline.
func (c *client) readLoop(ctx context.Context) {
	h := c.hub
	wait := 2 * h.cfg.PingInterval
	c.conn.SetReadLimit(16 << 10)
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	c.conn.SetPongHandler(func(string) error { return c.conn.SetReadDeadline(time.Now().Add(wait)) })
	ctx = context.WithoutCancel(ctx) // the request context ends with the handler; reads are bounded anyway
	for {
		_, data, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		_ = c.conn.SetReadDeadline(time.Now().Add(wait))
		var req Request
		if err := json.Unmarshal(data, &req); err != nil {
			c.reply(Message{Kind: event.Error, Data: map[string]string{"message": "requests are JSON: {\"type\":\"subscribe\",\"topic\":...,\"after\":N}"}})
			continue
		}
		switch req.Type {
		case "subscribe":
			if err := h.subscribe(ctx, c, req.Topic, req.After); err != nil {
				c.reply(Message{Topic: req.Topic, Kind: event.Error, Data: map[string]string{"message": err.Error()}})
			}
		case "unsubscribe":
			h.unsubscribe(c, req.Topic)
		default:
			c.reply(Message{Topic: req.Topic, Kind: event.Error, Data: map[string]string{"message": "unknown request type " + req.Type}})
		}
	}
}

func (c *client) reply(m Message) {
	b, err := prepare(m)
	if err != nil {
		return
	}
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	if _, ok := c.hub.clients[c]; ok {
		c.hub.offerLocked(c, b)
	}
}

// writeLoop is the only writer: queued messages, then pings, each under a write deadline.
func (c *client) writeLoop() {
	h := c.hub
	defer h.wg.Done()
	defer c.close()
	ping := time.NewTicker(h.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-c.quit:
			_ = c.conn.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseGoingAway, "bye"), time.Now().Add(time.Second))
			return
		case msg := <-c.send:
			// Messages are shared by every subscriber and framed once: a write copies bytes.
			_ = c.conn.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
			if err := c.conn.WritePreparedMessage(msg); err != nil {
				return
			}
		case <-ping.C:
			_ = c.conn.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
			if err := c.conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		}
	}
}
