package store

import (
	"hash/maphash"
	"sync"
)

// knownSpanLimit is how many span keys a knownSpans generation holds before it is retired.
const knownSpanLimit = 1 << 18

// knownSpans remembers the spans this process has stored lately, as hashes of their keys: two
// generations of at most knownSpanLimit each, the older dropped when the newer fills, so that it
// stays at 8 MB however many spans pass (several seconds of the heaviest ingest, hours of a
// developer's). A batch none of whose spans is known is almost always all new spans, and ingest
// copies it without looking them up, whatever its size (see spanIngestFast): a new trace's batch,
// and as much the end of a span whose start was held back and never written (Genkit's realtime
// mode) in a trace stored for long. A hash collision, forgetting a span, or knowing one whose
// ingest failed only costs that lookup; a span stored by another process, or before a restart,
// makes the COPY fail on its unique key, and the batch is looked up then.
type knownSpans struct {
	seed      maphash.Seed
	mu        sync.Mutex
	cur, prev hashSet
}

func newKnownSpans() *knownSpans { return &knownSpans{seed: maphash.MakeSeed()} }

func (k *knownSpans) hash(sp *Span) uint64 {
	h := maphash.Comparable(k.seed, SpanKey{TraceID: sp.TraceID, SpanID: sp.SpanID})
	return max(h, 1) // 0 marks an empty slot
}

// anyKnown reports whether any of spans was stored lately.
func (k *knownSpans) anyKnown(spans []Span) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range spans {
		h := k.hash(&spans[i])
		if k.cur.has(h) || k.prev.has(h) {
			return true
		}
	}
	return false
}

// add records spans as stored.
func (k *knownSpans) add(spans []Span) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range spans {
		if k.cur.n >= knownSpanLimit {
			k.prev, k.cur = k.cur, k.prev
			k.cur.clear()
		}
		k.cur.add(k.hash(&spans[i]))
	}
}

// hashSet is a set of nonzero hashes, open addressing with linear probing in twice knownSpanLimit
// slots: a probe or two where a map of as many entries spent a fifth of ingest's bookkeeping.
type hashSet struct {
	slots []uint64 // allocated at the first add
	n     int
}

func (s *hashSet) has(h uint64) bool {
	if s.slots == nil {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

func (s *hashSet) add(h uint64) {
	if s.slots == nil {
		s.slots = make([]uint64, 2*knownSpanLimit)
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return
		case 0:
			s.slots[i] = h
			s.n++
			return
		}
	}
}

// clear empties s, keeping its slots.
func (s *hashSet) clear() {
	clear(s.slots)
	s.n = 0
}
