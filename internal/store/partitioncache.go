package store

import (
	"context"
	"sync"
	"time"
)

// partitionCacheMaxAge is how long spanPartitionCache trusts its list before it reads the catalog
// again for a batch it has no partition for.
const partitionCacheMaxAge = time.Minute

// spanPartitionCache remembers the partitions of spans, so that the merge of a batch whose spans
// all lie in one partition can write that partition directly (spanMergeSQLOn): a statement on the
// partitioned table routes each row, and sets up the conflict rule of each partition it reaches,
// on every execution, which cost the realtime load about a tenth of its throughput. A partition
// dropped since it was listed makes the statement fail as an undefined table; the caller then
// forgets the list and writes through spans.
type spanPartitionCache struct {
	mu    sync.Mutex
	parts []SpanPartition
	read  time.Time
}

// tableFor returns the partition that holds every start time in [lo, hi], or "spans" when none
// does (the range straddles two, or lies in spans_default) or the list cannot be read.
func (c *spanPartitionCache) tableFor(ctx context.Context, s *Store, lo, hi int64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name, ok := partitionOf(c.parts, lo, hi); ok {
		return name
	}
	if time.Since(c.read) < partitionCacheMaxAge {
		return "spans"
	}
	c.read = time.Now()
	parts, err := s.SpanPartitions(ctx)
	if err != nil {
		return "spans"
	}
	c.parts = parts
	if name, ok := partitionOf(parts, lo, hi); ok {
		return name
	}
	return "spans"
}

// forget drops the list, so that the next batch reads it again.
func (c *spanPartitionCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parts, c.read = nil, time.Time{}
}

// partitionOf finds the partition of parts that covers [lo, hi].
func partitionOf(parts []SpanPartition, lo, hi int64) (string, bool) {
	for _, p := range parts {
		if p.From <= lo && hi < p.To {
			return p.Name, true
		}
	}
	return "", false
}
