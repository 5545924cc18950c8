package store

import "sync"

// knownTraceLimit is how many trace ids a knownTraces generation holds before it is retired.
const knownTraceLimit = 1 << 16

// knownTraces remembers the traces this process has ingested spans of lately: two generations of
// at most knownTraceLimit ids each, the older dropped when the newer fills, so that it stays under
// about 10 MB however many traces pass. A batch whose traces are all unknown is almost always all
// new spans, and ingest skips looking them up (see spanIngestFast). Forgetting a trace, or knowing
// one whose ingest failed, only costs that lookup; a trace stored by another process, or before a
// restart, makes the COPY fail on its unique key, and the batch is looked up then.
type knownTraces struct {
	mu        sync.Mutex
	cur, prev map[string]struct{}
}

// anyKnown reports whether any of spans' traces was ingested lately.
func (k *knownTraces) anyKnown(spans []Span) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	known := false
	eachTrace(spans, func(id string) bool {
		_, inCur := k.cur[id]
		_, inPrev := k.prev[id]
		known = inCur || inPrev
		return !known
	})
	return known
}

// add remembers spans' traces.
func (k *knownTraces) add(spans []Span) {
	k.mu.Lock()
	defer k.mu.Unlock()
	eachTrace(spans, func(id string) bool {
		if k.cur == nil || len(k.cur) >= knownTraceLimit {
			k.prev, k.cur = k.cur, make(map[string]struct{}, 1024)
		}
		k.cur[id] = struct{}{}
		return true
	})
}

// eachTrace calls fn with the trace id of each run of spans of one trace (once per trace when
// spans are sorted, as ingest sorts them), until fn returns false.
func eachTrace(spans []Span, fn func(id string) bool) {
	for i := range spans {
		if i > 0 && spans[i].TraceID == spans[i-1].TraceID {
			continue
		}
		if !fn(spans[i].TraceID) {
			return
		}
	}
}
