package btree

import (
	"context"
	"fmt"
	"sync"

	tb "github.com/tidwall/btree"

	"github.com/warpkit/warpkit"
)

// cpuTree is the pure-Go backend: a tidwall/btree Map under a reader/writer
// lock (the Tree's front runs batches side by side, so writers take the lock
// exclusively here). A batch is applied in order, so every CPU batch is one of
// the orders the GPU's semantics allow. The front refuses every call after
// Close, so the backend keeps no closed state of its own.
type cpuTree[K, V warpkit.Word] struct {
	mu sync.RWMutex
	m  *tb.Map[K, V]
}

const cpuDegree = 64

// ctxEvery is how many elements (batch elements, or keys a range walks) a
// CPU loop handles between two checks of its context.
const ctxEvery = 4096

// ticker checks a context every ctxEvery ticks.
type ticker struct {
	ctx context.Context
	n   int
	err error
}

// tick counts one element and reports whether the loop may go on (false
// once the context is done; err then holds its error).
func (t *ticker) tick() bool {
	t.n++
	if t.n%ctxEvery == 0 && t.err == nil {
		t.err = t.ctx.Err()
	}
	return t.err == nil
}

func newCPU[K, V warpkit.Word]() *cpuTree[K, V] {
	return &cpuTree[K, V]{m: tb.NewMap[K, V](cpuDegree)}
}

func (c *cpuTree[K, V]) read() func() {
	c.mu.RLock()
	return c.mu.RUnlock
}

func (c *cpuTree[K, V]) write() func() {
	c.mu.Lock()
	return c.mu.Unlock
}

// build fills a new map and swaps it in: a cancelled build leaves the old one.
func (c *cpuTree[K, V]) build(ctx context.Context, keys []K, vals []V) error {
	m := tb.NewMap[K, V](cpuDegree)
	tk := ticker{ctx: ctx}
	for i, k := range keys {
		if !tk.tick() {
			return tk.err
		}
		m.Set(k, vals[i])
	}
	defer c.write()()
	c.m = m
	return nil
}

// insert applies the pairs in order; a cancelled batch applied a prefix.
func (c *cpuTree[K, V]) insert(ctx context.Context, keys []K, vals []V) error {
	defer c.write()()
	tk := ticker{ctx: ctx}
	for i, k := range keys {
		if !tk.tick() {
			return tk.err
		}
		c.m.Set(k, vals[i])
	}
	return nil
}

func (c *cpuTree[K, V]) delete(ctx context.Context, keys []K) error {
	defer c.write()()
	tk := ticker{ctx: ctx}
	for _, k := range keys {
		if !tk.tick() {
			return tk.err
		}
		c.m.Delete(k)
	}
	return nil
}

func (c *cpuTree[K, V]) lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	defer c.read()()
	tk := ticker{ctx: ctx}
	for i, k := range keys {
		if !tk.tick() {
			return tk.err
		}
		vals[i], found[i] = c.m.Get(k)
	}
	return nil
}

// successor returns the smallest key > k.
func (c *cpuTree[K, V]) successor(k K) (rk K, rv V, ok bool) {
	c.m.Ascend(k, func(key K, v V) bool {
		if key == k {
			return true
		}
		rk, rv, ok = key, v, true
		return false
	})
	return
}

// predecessor returns the largest key < k.
func (c *cpuTree[K, V]) predecessor(k K) (rk K, rv V, ok bool) {
	if k == 0 {
		return
	}
	c.m.Descend(k-1, func(key K, v V) bool {
		rk, rv, ok = key, v, true
		return false
	})
	return
}

// ascendRange calls yield for the pairs in [lo, hi) in key order (none when
// lo >= hi), ticking tk for each; it stops when yield or tk says so.
func (c *cpuTree[K, V]) ascendRange(tk *ticker, lo, hi K, yield func(K, V)) {
	if lo >= hi {
		return
	}
	c.m.Ascend(lo, func(key K, v V) bool {
		if key >= hi || !tk.tick() {
			return false
		}
		yield(key, v)
		return true
	})
}

// countRange counts the keys in [lo, hi).
func (c *cpuTree[K, V]) countRange(tk *ticker, lo, hi K) uint32 {
	var n uint32
	c.ascendRange(tk, lo, hi, func(K, V) { n++ })
	return n
}

func (c *cpuTree[K, V]) neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	defer c.read()()
	tk := ticker{ctx: ctx}
	for i, k := range keys {
		if !tk.tick() {
			return tk.err
		}
		if pred {
			outKeys[i], outVals[i], found[i] = c.predecessor(k)
		} else {
			outKeys[i], outVals[i], found[i] = c.successor(k)
		}
	}
	return nil
}

func (c *cpuTree[K, V]) count(ctx context.Context, lo, hi []K, counts []uint32) error {
	defer c.read()()
	tk := ticker{ctx: ctx}
	for i := range lo {
		if !tk.tick() {
			return tk.err
		}
		counts[i] = c.countRange(&tk, lo[i], hi[i])
	}
	return tk.err
}

func (c *cpuTree[K, V]) rangeQuery(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	defer c.read()()
	tk := ticker{ctx: ctx}
	r := &warpkit.Ranges[K, V]{Offsets: make([]int, len(lo)+1)}
	for i := range lo {
		if !tk.tick() {
			return nil, tk.err
		}
		c.ascendRange(&tk, lo[i], hi[i], func(k K, v V) {
			r.Keys = append(r.Keys, k)
			r.Vals = append(r.Vals, v)
		})
		r.Offsets[i+1] = len(r.Keys)
	}
	if tk.err != nil {
		return nil, tk.err
	}
	return r, nil
}

// apply runs the batch in order; a cancelled batch applied a prefix of it, and
// the results past that prefix are not written.
func (c *cpuTree[K, V]) apply(ctx context.Context, ops Ops[K, V], res Results[K, V]) error {
	defer c.write()()
	tk := ticker{ctx: ctx}
	for i, kind := range ops.Kinds {
		if !tk.tick() {
			return tk.err
		}
		key := ops.Keys[i]
		var (
			found bool
			rk    K
			rv    V
			cnt   uint32
		)
		switch kind {
		case OpLookup:
			if rv, found = c.m.Get(key); found {
				rk = key
			}
		case OpInsert:
			var v V
			if ops.Vals != nil {
				v = ops.Vals[i]
			}
			c.m.Set(key, v)
		case OpDelete:
			c.m.Delete(key)
		case OpSuccessor:
			rk, rv, found = c.successor(key)
		case OpPredecessor:
			rk, rv, found = c.predecessor(key)
		case OpCount:
			var hi K
			if ops.His != nil {
				hi = ops.His[i]
			}
			if cnt = c.countRange(&tk, key, hi); tk.err != nil {
				return tk.err
			}
		}
		if res.Found != nil {
			res.Found[i] = found
		}
		if res.Keys != nil {
			res.Keys[i] = rk
		}
		if res.Vals != nil {
			res.Vals[i] = rv
		}
		if res.Counts != nil {
			res.Counts[i] = cnt
		}
	}
	return nil
}

func (c *cpuTree[K, V]) stats(context.Context) (Stats, error) {
	defer c.read()()
	return Stats{Keys: c.m.Len(), Height: c.m.Height()}, nil
}

// compact reloads the pairs, in order, into a new map (full nodes); a
// cancelled compaction leaves the old one.
func (c *cpuTree[K, V]) compact(ctx context.Context) error {
	defer c.write()()
	m := tb.NewMap[K, V](cpuDegree)
	tk := ticker{ctx: ctx}
	c.m.Scan(func(k K, v V) bool {
		if !tk.tick() {
			return false
		}
		m.Load(k, v)
		return true
	})
	if tk.err != nil {
		return tk.err
	}
	c.m = m
	return nil
}

func (c *cpuTree[K, V]) check(ctx context.Context) error {
	defer c.read()()
	tk := ticker{ctx: ctx}
	var prev K
	n, bad := 0, false
	c.m.Scan(func(k K, _ V) bool {
		if !tk.tick() {
			return false
		}
		if n > 0 && k <= prev {
			bad = true
			return false
		}
		prev, n = k, n+1
		return true
	})
	if tk.err != nil {
		return tk.err
	}
	if bad || n != c.m.Len() {
		return fmt.Errorf("the Go B-tree is out of order")
	}
	return nil
}

func (c *cpuTree[K, V]) close() error {
	defer c.write()()
	c.m = nil
	return nil
}
