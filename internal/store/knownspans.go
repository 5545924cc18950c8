package store

import (
	"hash/maphash"
	"sync"
)

// knownSpanLimit is how many span keys a knownSpans generation holds before it is retired.
const knownSpanLimit = 1 << 18

// knownSpans remembers the spans this process has stored lately, as hashes of their keys: two
// generations of at most knownSpanLimit each, the older dropped when the newer fills, so that it
// stays under about 10 MB however many spans pass (several seconds of the heaviest ingest, hours of
// a developer's). A batch none of whose spans is known is almost always all new spans, and ingest
// copies it without looking them up, whatever its size (see spanIngestFast): a new trace's batch,
// and as much the end of a span whose start was held back and never written (Genkit's realtime
// mode) in a trace stored for long. A hash collision, forgetting a span, or knowing one whose
// ingest failed only costs that lookup; a span stored by another process, or before a restart,
// makes the COPY fail on its unique key, and the batch is looked up then.
type knownSpans struct {
	seed      maphash.Seed
	mu        sync.Mutex
	cur, prev map[uint64]struct{}
}

func newKnownSpans() *knownSpans { return &knownSpans{seed: maphash.MakeSeed()} }

func (k *knownSpans) hash(sp *Span) uint64 {
	return maphash.Comparable(k.seed, SpanKey{TraceID: sp.TraceID, SpanID: sp.SpanID})
}

// anyKnown reports whether any of spans was stored lately.
func (k *knownSpans) anyKnown(spans []Span) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range spans {
		h := k.hash(&spans[i])
		if _, ok := k.cur[h]; ok {
			return true
		}
		if _, ok := k.prev[h]; ok {
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
		if k.cur == nil || len(k.cur) >= knownSpanLimit {
			k.prev, k.cur = k.cur, make(map[uint64]struct{}, 1024)
		}
		k.cur[k.hash(&spans[i])] = struct{}{}
	}
}
