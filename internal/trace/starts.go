package trace

import (
	"context"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// StartDelay is how long a span-start event waits before it is written (see startBuffer).
const StartDelay = 50 * time.Millisecond

// maxPendingStarts bounds the span starts held in memory; beyond it a start is written at once,
// like any other request, so a flood of starts slows its senders down instead of growing memory.
const maxPendingStarts = 50_000

// startBuffer holds span-start events (a request whose spans are all still running, which is how
// Genkit JS's realtime mode announces every span before posting it again at its end) for up to
// StartDelay before writing them, all together, in one group transaction.
//
// A start is a notice, not a record: the end carries the whole span, and it alone makes it
// final. So the start's request is answered as soon as the start is held and published live,
// and a span whose end arrives within the delay is written once, by its end, instead of being
// inserted and then rewritten. Only a start can wait: a request with an ended span is answered
// after its commit, as before. If the process dies, at most StartDelay of starts are lost, and
// with them only the "running" state of spans that were still running; their ends still store
// them whole. Reads through the Service write what is held first, so they see every start.
type startBuffer struct {
	write func(ctx context.Context, source string, spans []store.Span) error
	delay time.Duration

	mu      sync.Mutex
	pending map[store.SpanKey]heldStart
	timer   *time.Timer
	writing int        // due starts taken by the timer's flush and not yet written
	flushMu sync.Mutex // one flush at a time, so a flush that returns has written all it took
}

type heldStart struct {
	source string
	span   store.Span
	at     time.Time // when it was held
}

func newStartBuffer(delay time.Duration, write func(ctx context.Context, source string, spans []store.Span) error) *startBuffer {
	return &startBuffer{write: write, delay: delay, pending: map[store.SpanKey]heldStart{}}
}

// hold keeps spans, all running, until the next flush. It reports false, holding nothing, when
// the buffer is full.
func (b *startBuffer) hold(source string, spans []store.Span) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending)+len(spans) > maxPendingStarts {
		return false
	}
	now := time.Now()
	for _, sp := range spans {
		b.pending[store.SpanKey{TraceID: sp.TraceID, SpanID: sp.SpanID}] = heldStart{source: source, span: sp, at: now}
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(b.delay, b.flushDue)
	}
	return true
}

// flushDue writes the starts held for the whole delay, and sets the timer for the next ones: each
// start gets its full delay for its end to arrive.
func (b *startBuffer) flushDue() {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	cutoff := time.Now().Add(-b.delay)
	var due []heldStart
	next := time.Time{}
	for key, h := range b.pending {
		if h.at.After(cutoff) {
			if next.IsZero() || h.at.Before(next) {
				next = h.at
			}
			continue
		}
		due = append(due, h)
		delete(b.pending, key)
	}
	b.timer = nil
	if !next.IsZero() {
		b.timer = time.AfterFunc(time.Until(next.Add(b.delay)), b.flushDue)
	}
	b.writing = len(due)
	b.mu.Unlock()
	b.writeAll(context.Background(), due)
	b.mu.Lock()
	b.writing = 0
	b.mu.Unlock()
}

// supersede takes out the held starts of spans that have arrived ended, whose ends are about to
// be written and hold the whole span. The caller gives them back with restore if that write fails.
func (b *startBuffer) supersede(spans []store.Span) []heldStart {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return nil
	}
	var taken []heldStart
	for _, sp := range spans {
		key := store.SpanKey{TraceID: sp.TraceID, SpanID: sp.SpanID}
		if h, held := b.pending[key]; held && sp.EndTime != 0 {
			delete(b.pending, key)
			taken = append(taken, h)
		}
	}
	return taken
}

// restore holds again starts that supersede took out, unless newer copies are held by now.
func (b *startBuffer) restore(held []heldStart) {
	if len(held) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range held {
		key := store.SpanKey{TraceID: h.span.TraceID, SpanID: h.span.SpanID}
		if _, newer := b.pending[key]; !newer {
			b.pending[key] = h
		}
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(b.delay, b.flushDue)
	}
}

// held reports whether any start is waiting, or is being written by the timer's flush: a read
// then flushes, which waits for that write (flushMu), so that it sees those starts too.
func (b *startBuffer) held() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) > 0 || b.writing > 0
}

// flush writes every held start, due or not: a read is about to look, or the service stops.
func (b *startBuffer) flush(ctx context.Context) {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	taken := make([]heldStart, 0, len(b.pending))
	for _, h := range b.pending {
		taken = append(taken, h)
	}
	b.pending = map[store.SpanKey]heldStart{}
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	b.writeAll(ctx, taken)
}

// writeAll writes starts, one transaction per source. A start that fails to write is lost
// (counted by the caller's metrics), as its request has already been answered.
func (b *startBuffer) writeAll(ctx context.Context, held []heldStart) {
	if len(held) == 0 {
		return
	}
	bySource := map[string][]store.Span{}
	for _, h := range held {
		bySource[h.source] = append(bySource[h.source], h.span)
	}
	for source, spans := range bySource {
		_ = b.write(ctx, source, spans)
	}
}
