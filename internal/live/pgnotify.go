package live

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/loupe-dev/loupe/internal/event"
)

// maxPayload keeps a NOTIFY payload under PostgreSQL's 8,000-byte limit.
const maxPayload = 7900

// notifyGather is how long the notifier waits after an event for more to send with it.
const notifyGather = 2 * time.Millisecond

// listen holds one connection in LISTEN and delivers the other instances' events. When the
// connection is lost it reconnects, and tells clients to resync and topics to re-read their
// chunks, since notifications sent meanwhile are gone.
func (h *Hub) listen(ctx context.Context, ready chan<- error) {
	defer h.wg.Done()
	first := true
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listenOnce(ctx, func() {
			if first {
				first = false
				ready <- nil
				return
			}
			backoff = 100 * time.Millisecond
			h.resync()
		})
		if ctx.Err() != nil {
			break
		}
		if first {
			ready <- err
			return
		}
		h.log.Warn("live: LISTEN connection lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	if first {
		ready <- ctx.Err()
	}
}

func (h *Hub) listenOnce(ctx context.Context, onListening func()) error {
	pooled, err := h.cfg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection that was in LISTEN must not go back to the pool: it leaves the pool here, and
	// only this goroutine ever closes it. (Closing it after Release would close a connection that
	// another goroutine may already be using.)
	conn := pooled.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{h.cfg.Channel}.Sanitize()); err != nil {
		return err
	}
	onListening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		origin, events, ok := strings.Cut(n.Payload, " ")
		if origin == h.origin {
			continue // this instance's own events, delivered when published
		}
		var batch []wireEvent
		if !ok {
			h.log.Warn("live: malformed notification", "err", "no origin")
			continue
		}
		if err := json.Unmarshal([]byte(events), &batch); err != nil {
			h.log.Warn("live: malformed notification", "err", err)
			continue
		}
		for _, ev := range batch {
			ev.Origin = origin
			h.deliver(ev)
		}
	}
}

// resync re-reads every run topic's chunks and asks every client to reload its state.
func (h *Hub) resync() {
	h.mu.Lock()
	var runTopics, all []string
	for name, t := range h.topics {
		all = append(all, name)
		if t.runID != uuid.Nil {
			runTopics = append(runTopics, name)
		}
	}
	h.mu.Unlock()
	for _, name := range all {
		h.broadcast(name, event.Resync, nil)
	}
	for _, name := range runTopics {
		h.fetchChunks(name)
	}
}

// notify sends this instance's events to the others, batching what has queued up into as few
// NOTIFYs as fit.
func (h *Hub) notify(ctx context.Context) {
	defer h.wg.Done()
	for {
		var first wireEvent
		select {
		case <-ctx.Done():
			return
		case first = <-h.outbox:
		}
		// Wait a moment for more: under load (thousands of ingested spans a second) events then
		// share NOTIFYs instead of costing a statement each. Only other instances wait for it.
		select {
		case <-ctx.Done():
			return
		case <-time.After(notifyGather):
		}
		batch := []wireEvent{first}
	more:
		for len(batch) < 256 {
			select {
			case ev := <-h.outbox:
				batch = append(batch, ev)
			default:
				break more
			}
		}
		for _, payload := range packPayloads(h.origin, coalesceSpans(batch)) {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := h.cfg.Pool.Exec(qctx, "SELECT pg_notify($1, $2)", h.cfg.Channel, payload)
			cancel()
			if err != nil && ctx.Err() == nil {
				h.log.Warn("live: NOTIFY failed; event lost for other instances", "err", err)
			}
		}
	}
}

// coalesceSpans keeps one span event per trace and run of a batch, the last, in the place of the
// first: clients only take a span event as a cue to reload the trace, and under trace ingest a
// batch holds thousands of them. This instance's own clients still get every event.
func coalesceSpans(batch []wireEvent) []wireEvent {
	out := batch[:0:0]
	at := map[[2]string]int{}
	for _, ev := range batch {
		if ev.Kind != event.Span {
			out = append(out, ev)
			continue
		}
		key := [2]string{ev.Trace, ev.RunID}
		if i, ok := at[key]; ok {
			out[i] = ev
			continue
		}
		at[key] = len(out)
		out = append(out, ev)
	}
	return out
}

// packPayloads encodes events as NOTIFY payloads that each fit PostgreSQL's limit: the sending
// instance's origin, a space, and a JSON array of events. Receivers skip their own instance's
// payloads by the prefix alone, without decoding them. An event too large on its own loses its
// data: receivers read the rows anyway.
func packPayloads(origin string, batch []wireEvent) []string {
	var out []string
	buf := make([]byte, 0, 1024)
	start := func() { buf = append(append(append(buf[:0], origin...), ' '), '[') }
	start()
	empty := len(buf)
	for _, ev := range batch {
		b, err := json.Marshal(ev)
		if err != nil {
			continue
		}
		if len(b)+len(origin)+3 > maxPayload {
			ev.Data = nil
			if b, err = json.Marshal(ev); err != nil {
				continue
			}
		}
		if len(buf)+len(b)+2 > maxPayload && len(buf) > empty {
			out = append(out, string(append(buf, ']')))
			start()
		}
		if len(buf) > empty {
			buf = append(buf, ',')
		}
		buf = append(buf, b...)
	}
	if len(buf) > empty {
		out = append(out, string(append(buf, ']')))
	}
	return out
}
