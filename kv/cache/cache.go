// Package cache is the kv store's block cache: a sharded LRU cache of
// decompressed SSTable blocks with a byte limit. One Cache may be shared by
// several stores.
//
// Cached blocks are immutable []byte values. The garbage collector keeps a
// block alive while an iterator still reads it, so eviction never
// invalidates memory in use; the byte limit bounds what the cache itself
// retains.
package cache

import (
	"sync"
	"sync/atomic"
)

const numShards = 16

// entryOverhead approximates the bookkeeping bytes of one entry.
const entryOverhead = 64

// Cache is safe for concurrent use.
type Cache struct {
	shards   [numShards]shard
	capacity int64
	hits     atomic.Int64
	misses   atomic.Int64
	nextID   atomic.Uint64
}

type key struct{ id, off uint64 }

type entry struct {
	k          key
	v          []byte
	prev, next *entry
}

type shard struct {
	mu   sync.Mutex
	m    map[key]*entry
	lru  entry // sentinel: lru.next is the most recently used
	size int64
	cap  int64
}

// New returns a cache holding at most capacity bytes of blocks. A capacity
// of 0 caches nothing (every Get misses).
func New(capacity int64) *Cache {
	c := &Cache{capacity: capacity}
	for i := range c.shards {
		s := &c.shards[i]
		s.m = make(map[key]*entry)
		s.lru.next, s.lru.prev = &s.lru, &s.lru
		s.cap = capacity / numShards
	}
	return c
}

// NewID returns an identifier unique within this cache; each open table
// uses its own so that tables never share entries.
func (c *Cache) NewID() uint64 { return c.nextID.Add(1) }

func (c *Cache) shard(k key) *shard {
	h := k.id*0x9e3779b97f4a7c15 ^ k.off*0xc2b2ae3d27d4eb4f
	h ^= h >> 31
	return &c.shards[h%numShards]
}

// Get returns the block cached for (id, off), or nil.
func (c *Cache) Get(id, off uint64) []byte {
	if c == nil {
		return nil
	}
	k := key{id, off}
	s := c.shard(k)
	s.mu.Lock()
	e, ok := s.m[k]
	var v []byte
	if ok {
		s.unlink(e)
		s.pushFront(e)
		v = e.v
	}
	s.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	return v
}

// Set caches v for (id, off); v must not be modified afterwards.
func (c *Cache) Set(id, off uint64, v []byte) {
	if c == nil {
		return
	}
	k := key{id, off}
	s := c.shard(k)
	sz := int64(len(v)) + entryOverhead
	if sz > s.cap {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[k]; ok {
		s.size += int64(len(v) - len(e.v))
		e.v = v
		s.unlink(e)
		s.pushFront(e)
	} else {
		e := &entry{k: k, v: v}
		s.m[k] = e
		s.pushFront(e)
		s.size += sz
	}
	for s.size > s.cap {
		old := s.lru.prev
		s.unlink(old)
		delete(s.m, old.k)
		s.size -= int64(len(old.v)) + entryOverhead
	}
}

func (s *shard) unlink(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
}

func (s *shard) pushFront(e *entry) {
	e.next = s.lru.next
	e.prev = &s.lru
	s.lru.next.prev = e
	s.lru.next = e
}

// Metrics describes the cache's use.
type Metrics struct {
	Capacity int64 // byte limit
	Size     int64 // bytes held, including bookkeeping
	Count    int64 // blocks held
	Hits     int64
	Misses   int64
}

// HitRate returns hits/(hits+misses), or 0.
func (m Metrics) HitRate() float64 {
	if m.Hits+m.Misses == 0 {
		return 0
	}
	return float64(m.Hits) / float64(m.Hits+m.Misses)
}

// Metrics returns current counters.
func (c *Cache) Metrics() Metrics {
	if c == nil {
		return Metrics{}
	}
	m := Metrics{Capacity: c.capacity, Hits: c.hits.Load(), Misses: c.misses.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		m.Size += s.size
		m.Count += int64(len(s.m))
		s.mu.Unlock()
	}
	return m
}
