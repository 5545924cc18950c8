package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/internal/store"
)

// skeletonCacheSize is how many finished traces' skeletons are kept: the few a reader is opening,
// expanding and searching. A 10,000-span skeleton is a few megabytes.
const skeletonCacheSize = 8

// skeletonCache keeps the skeletons of finished traces (no span without an end) between requests:
// each expand, search and span panel of a trace's page needs its skeleton, and reading the facts
// of a 10,000-span trace and building it costs far more than the request's own work. An entry is
// used only while the trace's summary row says nothing changed (its span count and the time of its
// last write), so a span ingested later, a resend or a deletion is seen at once.
type skeletonCache struct {
	mu      sync.Mutex
	entries map[string]*cachedSkeleton
	tick    uint64
}

type cachedSkeleton struct {
	sk        *skeleton
	spans     int
	updatedAt time.Time
	used      uint64
}

func (c *skeletonCache) get(tr *store.Trace) *skeleton {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[tr.TraceID]
	if e == nil || e.spans != tr.SpanCount || !e.updatedAt.Equal(tr.UpdatedAt) {
		return nil
	}
	c.tick++
	e.used = c.tick
	return e.sk
}

func (c *skeletonCache) put(tr *store.Trace, sk *skeleton) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*cachedSkeleton{}
	}
	if _, ok := c.entries[tr.TraceID]; !ok && len(c.entries) >= skeletonCacheSize {
		oldest := ""
		for id, e := range c.entries {
			if oldest == "" || e.used < c.entries[oldest].used {
				oldest = id
			}
		}
		delete(c.entries, oldest)
	}
	c.tick++
	c.entries[tr.TraceID] = &cachedSkeleton{sk: sk, spans: tr.SpanCount, updatedAt: tr.UpdatedAt, used: c.tick}
}

// loadSkeleton is a trace's skeleton: the cached one while the trace has not changed, else built
// from its span facts (and kept when no span is open).
func (s *Server) loadSkeleton(ctx context.Context, traceID string) (*skeleton, error) {
	tr, err := s.reads.TraceGet(ctx, traceID)
	if errors.Is(err, store.ErrNotFound) {
		tr, err = nil, nil // no span stored yet (a run whose first span is still in flight)
	}
	if err != nil {
		return nil, err
	}
	if tr != nil {
		if sk := s.skeletons.get(tr); sk != nil {
			return sk, nil
		}
	}
	facts, err := s.reads.SpanTurnFactsByTrace(ctx, traceID)
	if err != nil {
		return nil, err
	}
	sk := buildSkeleton(traceID, facts, time.Now().UnixNano())
	if tr != nil && !sk.Open && len(facts) == tr.SpanCount {
		s.skeletons.put(tr, sk)
	}
	return sk, nil
}
