package kv

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/warpkit/warpkit/kv/cache"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// tableCache keeps up to capacity table readers open, least recently used
// evicted first. A reader handed out is reference-counted: eviction (or
// deletion of the table) closes it only after the last user releases it.
type tableCache struct {
	fs       vfs.FS
	dir      string
	blocks   *cache.Cache
	capacity int

	mu      sync.Mutex
	entries map[base.FileNum]*tableEntry
	lru     tableEntry // sentinel; lru.next is most recent

	hits, misses atomic.Int64
}

type tableEntry struct {
	num        base.FileNum
	reader     *sstable.Reader
	err        error
	ready      chan struct{} // closed when the open finished
	refs       int           // users, plus one while in the cache
	inCache    bool
	prev, next *tableEntry
}

func newTableCache(fs vfs.FS, dir string, blocks *cache.Cache, capacity int) *tableCache {
	c := &tableCache{fs: fs, dir: dir, blocks: blocks, capacity: capacity, entries: map[base.FileNum]*tableEntry{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

func (c *tableCache) unlink(e *tableEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
}

func (c *tableCache) pushFront(e *tableEntry) {
	e.next, e.prev = c.lru.next, &c.lru
	c.lru.next.prev = e
	c.lru.next = e
}

// get returns the reader of a table and a release function (for callers
// that want a func; hot paths use acquire and release).
func (c *tableCache) get(meta *manifest.FileMetadata) (*sstable.Reader, func(), error) {
	e, err := c.acquire(meta)
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	return e.reader, func() { once.Do(func() { c.release(e) }) }, nil
}

// acquire returns a table's entry with a reference; use e.reader, then
// release(e) exactly once.
func (c *tableCache) acquire(meta *manifest.FileMetadata) (*tableEntry, error) {
	c.mu.Lock()
	e, ok := c.entries[meta.FileNum]
	if ok {
		c.hits.Add(1)
		e.refs++
		c.unlink(e)
		c.pushFront(e)
		c.mu.Unlock()
		<-e.ready
	} else {
		c.misses.Add(1)
		e = &tableEntry{num: meta.FileNum, ready: make(chan struct{}), refs: 2, inCache: true}
		c.entries[meta.FileNum] = e
		c.pushFront(e)
		evicted := c.evictLocked()
		c.mu.Unlock()
		c.closeAll(evicted)
		e.reader, e.err = c.open(meta)
		close(e.ready)
		if e.err != nil {
			c.mu.Lock()
			if e.inCache {
				c.removeLocked(e) // do not cache failures
			}
			c.mu.Unlock()
		}
	}
	if e.err != nil {
		err := e.err
		c.release(e)
		return nil, err
	}
	return e, nil
}

func (c *tableCache) open(meta *manifest.FileMetadata) (*sstable.Reader, error) {
	name := base.MakeFilename(base.FileTypeTable, meta.FileNum)
	f, err := c.fs.Open(c.fs.PathJoin(c.dir, name))
	if err != nil {
		return nil, fmt.Errorf("kv: open table %s: %w", name, err)
	}
	r, err := sstable.NewReader(f, sstable.ReaderOptions{Cache: c.blocks, FileName: name})
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// removeLocked takes e out of the cache and drops the cache's reference;
// it returns e if that was the last reference.
func (c *tableCache) removeLocked(e *tableEntry) *tableEntry {
	c.unlink(e)
	delete(c.entries, e.num)
	e.inCache = false
	e.refs--
	if e.refs == 0 {
		return e
	}
	return nil
}

func (c *tableCache) evictLocked() []*tableEntry {
	var closed []*tableEntry
	for len(c.entries) > c.capacity {
		if x := c.removeLocked(c.lru.prev); x != nil {
			closed = append(closed, x)
		}
	}
	return closed
}

func (c *tableCache) closeAll(es []*tableEntry) {
	for _, e := range es {
		<-e.ready
		if e.reader != nil {
			e.reader.Close()
		}
	}
}

func (c *tableCache) release(e *tableEntry) {
	c.mu.Lock()
	e.refs--
	last := e.refs == 0
	c.mu.Unlock()
	if last {
		c.closeAll([]*tableEntry{e})
	}
}

// evict drops a table (deleted or about to be); its reader closes when the
// last user releases it.
func (c *tableCache) evict(num base.FileNum) {
	c.mu.Lock()
	var closed *tableEntry
	if e, ok := c.entries[num]; ok {
		closed = c.removeLocked(e)
	}
	c.mu.Unlock()
	if closed != nil {
		c.closeAll([]*tableEntry{closed})
	}
}

// size returns the number of cached readers.
func (c *tableCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// close drops every cached reader (users still holding one close it on
// release).
func (c *tableCache) close() {
	c.mu.Lock()
	var closed []*tableEntry
	for c.lru.next != &c.lru {
		if x := c.removeLocked(c.lru.next); x != nil {
			closed = append(closed, x)
		}
	}
	c.mu.Unlock()
	c.closeAll(closed)
}
