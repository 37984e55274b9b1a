package cache

import (
	"fmt"
	"sync"
	"testing"
)

func TestLRUAndLimit(t *testing.T) {
	c := New(numShards * (1000 + entryOverhead) * 4) // about 4 blocks of 1000 bytes per shard
	id := c.NewID()
	for off := range uint64(1000) {
		c.Set(id, off, make([]byte, 1000))
	}
	m := c.Metrics()
	if m.Size > m.Capacity {
		t.Fatalf("size %d over capacity %d", m.Size, m.Capacity)
	}
	if m.Count == 0 || m.Count > 4*numShards {
		t.Fatalf("count %d", m.Count)
	}
	if c.Get(id, 0) != nil {
		t.Fatal("oldest entry survived")
	}
	if c.Get(id, 999) == nil {
		t.Fatal("newest entry evicted")
	}
	if c.Get(c.NewID(), 999) != nil {
		t.Fatal("ids share entries")
	}
	m = c.Metrics()
	if m.Hits != 1 || m.Misses != 2 || m.HitRate() < 0.33 || m.HitRate() > 0.34 {
		t.Fatalf("hits %d misses %d", m.Hits, m.Misses)
	}
}

func TestRecentlyUsedSurvives(t *testing.T) {
	c := New(numShards * (100 + entryOverhead) * 3)
	id := c.NewID()
	// Keys that land in one shard.
	var same []uint64
	for off := uint64(0); len(same) < 5; off++ {
		if c.shard(key{id, off}) == c.shard(key{id, 0}) {
			same = append(same, off)
		}
	}
	c.Set(id, same[0], make([]byte, 100))
	c.Set(id, same[1], make([]byte, 100))
	c.Set(id, same[2], make([]byte, 100))
	c.Get(id, same[0]) // now most recent
	c.Set(id, same[3], make([]byte, 100))
	if c.Get(id, same[0]) == nil || c.Get(id, same[1]) != nil {
		t.Fatal("LRU order not honoured")
	}
}

func TestZeroCapacityAndNil(t *testing.T) {
	c := New(0)
	c.Set(1, 1, []byte("x"))
	if c.Get(1, 1) != nil {
		t.Fatal("zero-capacity cache kept a block")
	}
	var nc *Cache
	nc.Set(1, 1, []byte("x"))
	if nc.Get(1, 1) != nil || nc.Metrics().Count != 0 {
		t.Fatal("nil cache")
	}
}

func TestConcurrent(t *testing.T) {
	c := New(1 << 20)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				off := uint64(i % 700)
				if v := c.Get(uint64(g%2), off); v != nil && string(v) != fmt.Sprint(off) {
					t.Error("wrong block")
					return
				}
				c.Set(uint64(g%2), off, []byte(fmt.Sprint(off)))
			}
		}()
	}
	wg.Wait()
}
