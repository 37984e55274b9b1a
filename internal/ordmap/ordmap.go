// Package ordmap is the ordered map under the CPU backends of btree and
// mvbtree: a tidwall/btree Map under a reader/writer lock, with the batch
// operations of the B-tree contract (docs/CONTRACT.md: the context checked
// every few thousand elements, a cancelled update applied in part, a
// cancelled build or compaction leaving the old map) and O(1) copy-on-write
// snapshots (mvbtree's). Queries run on a View: the live map under the read
// lock, or a snapshot, which needs no lock.
package ordmap

import (
	"context"
	"fmt"
	"iter"
	"sync"

	tb "github.com/tidwall/btree"

	"github.com/warpkit/warpkit"
)

// Degree is the Go B-tree's node degree.
const Degree = 64

// CheckEvery is how many elements (batch elements, or keys a range walks) a
// loop handles between two checks of its context.
const CheckEvery = 4096

// Ticker checks a context every CheckEvery ticks.
type Ticker struct {
	ctx context.Context
	n   int
	err error
}

// NewTicker returns a Ticker of ctx.
func NewTicker(ctx context.Context) *Ticker { return &Ticker{ctx: ctx} }

// Tick counts one element and reports whether the loop may go on (false
// once the context is done; Err then holds its error).
func (t *Ticker) Tick() bool {
	t.n++
	if t.n%CheckEvery == 0 && t.err == nil {
		t.err = t.ctx.Err()
	}
	return t.err == nil
}

// Err is the context's error once a Tick saw it.
func (t *Ticker) Err() error { return t.err }

// Map is an ordered map safe for concurrent use: updates take it
// exclusively, queries shared.
type Map[K, V warpkit.Word] struct {
	mu sync.RWMutex
	m  *tb.Map[K, V]
}

// New returns an empty map.
func New[K, V warpkit.Word]() *Map[K, V] { return &Map[K, V]{m: tb.NewMap[K, V](Degree)} }

// Build fills a new map with the pairs (a repeated key keeps its last
// value) and swaps it in: a cancelled build leaves the old one.
func (c *Map[K, V]) Build(ctx context.Context, keys []K, vals []V) error {
	m := tb.NewMap[K, V](Degree)
	tk := NewTicker(ctx)
	for i, k := range keys {
		if !tk.Tick() {
			return tk.Err()
		}
		m.Set(k, vals[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = m
	return nil
}

// Insert applies the pairs in order; a cancelled batch applied a prefix.
func (c *Map[K, V]) Insert(ctx context.Context, keys []K, vals []V) error {
	return c.Update(ctx, func(w Writer[K, V], tk *Ticker) error {
		for i, k := range keys {
			if !tk.Tick() {
				return tk.Err()
			}
			w.Set(k, vals[i])
		}
		return nil
	})
}

// Delete removes the keys present, in order; a cancelled batch applied a
// prefix.
func (c *Map[K, V]) Delete(ctx context.Context, keys []K) error {
	return c.Update(ctx, func(w Writer[K, V], tk *Ticker) error {
		for _, k := range keys {
			if !tk.Tick() {
				return tk.Err()
			}
			w.Delete(k)
		}
		return nil
	})
}

// Update runs f with the map locked for writing (a mixed batch).
func (c *Map[K, V]) Update(ctx context.Context, f func(w Writer[K, V], tk *Ticker) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f(Writer[K, V]{c.m}, NewTicker(ctx))
}

// Read runs f on the live map under the read lock.
func (c *Map[K, V]) Read(f func(v View[K, V]) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return f(View[K, V]{c.m})
}

// Snapshot returns a view of the map as it is now, which later updates do
// not change: a copy-on-write copy (O(1); the first later write to each
// node copies it).
func (c *Map[K, V]) Snapshot() View[K, V] {
	c.mu.Lock() // Copy renews the map's isolation id
	defer c.mu.Unlock()
	return View[K, V]{c.m.Copy()}
}

// Compact reloads the pairs, in order, into a new map (full nodes); a
// cancelled compaction leaves the old one.
func (c *Map[K, V]) Compact(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := tb.NewMap[K, V](Degree)
	tk := NewTicker(ctx)
	c.m.Scan(func(k K, v V) bool {
		if !tk.Tick() {
			return false
		}
		m.Load(k, v)
		return true
	})
	if tk.Err() != nil {
		return tk.Err()
	}
	c.m = m
	return nil
}

// Release drops the map.
func (c *Map[K, V]) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}

// Writer updates a map its holder has locked.
type Writer[K, V warpkit.Word] struct{ m *tb.Map[K, V] }

// Set stores (k, v), replacing k's value.
func (w Writer[K, V]) Set(k K, v V) { w.m.Set(k, v) }

// Delete removes k if present.
func (w Writer[K, V]) Delete(k K) { w.m.Delete(k) }

// View is the map for queries.
func (w Writer[K, V]) View() View[K, V] { return View[K, V](w) }

// View is a map to query: the live map under its holder's lock, or a
// snapshot.
type View[K, V warpkit.Word] struct{ m *tb.Map[K, V] }

// Len returns the pairs.
func (v View[K, V]) Len() int { return v.m.Len() }

// Height returns the Go B-tree's levels.
func (v View[K, V]) Height() int { return v.m.Height() }

// Get returns k's value.
func (v View[K, V]) Get(k K) (V, bool) { return v.m.Get(k) }

// Successor returns the smallest key > k.
func (v View[K, V]) Successor(k K) (rk K, rv V, ok bool) {
	v.m.Ascend(k, func(key K, val V) bool {
		if key == k {
			return true
		}
		rk, rv, ok = key, val, true
		return false
	})
	return
}

// Predecessor returns the largest key < k.
func (v View[K, V]) Predecessor(k K) (rk K, rv V, ok bool) {
	if k == 0 {
		return
	}
	v.m.Descend(k-1, func(key K, val V) bool {
		rk, rv, ok = key, val, true
		return false
	})
	return
}

// AscendRange calls yield for the pairs in [lo, hi) in key order (none when
// lo >= hi), ticking tk for each; it stops when yield returns false or tk
// says so.
func (v View[K, V]) AscendRange(tk *Ticker, lo, hi K, yield func(K, V) bool) {
	if lo >= hi {
		return
	}
	v.m.Ascend(lo, func(key K, val V) bool {
		if key >= hi || !tk.Tick() {
			return false
		}
		return yield(key, val)
	})
}

// CountRange counts the keys in [lo, hi).
func (v View[K, V]) CountRange(tk *Ticker, lo, hi K) uint32 {
	var n uint32
	v.AscendRange(tk, lo, hi, func(K, V) bool { n++; return true })
	return n
}

// Lookup sets vals[i] and found[i] for keys[i].
func (v View[K, V]) Lookup(ctx context.Context, keys []K, vals []V, found []bool) error {
	tk := NewTicker(ctx)
	for i, k := range keys {
		if !tk.Tick() {
			return tk.Err()
		}
		vals[i], found[i] = v.m.Get(k)
	}
	return nil
}

// Neighbor finds each key's predecessor (pred) or successor.
func (v View[K, V]) Neighbor(ctx context.Context, pred bool, keys, outKeys []K, outVals []V, found []bool) error {
	tk := NewTicker(ctx)
	for i, k := range keys {
		if !tk.Tick() {
			return tk.Err()
		}
		if pred {
			outKeys[i], outVals[i], found[i] = v.Predecessor(k)
		} else {
			outKeys[i], outVals[i], found[i] = v.Successor(k)
		}
	}
	return nil
}

// Count sets counts[i] to the keys in [lo[i], hi[i]).
func (v View[K, V]) Count(ctx context.Context, lo, hi []K, counts []uint32) error {
	tk := NewTicker(ctx)
	for i := range lo {
		if !tk.Tick() {
			return tk.Err()
		}
		counts[i] = v.CountRange(tk, lo[i], hi[i])
	}
	return tk.Err()
}

// Range returns the pairs in [lo[i], hi[i]) of every query, in key order.
func (v View[K, V]) Range(ctx context.Context, lo, hi []K) (*warpkit.Ranges[K, V], error) {
	tk := NewTicker(ctx)
	r := &warpkit.Ranges[K, V]{Offsets: make([]int, len(lo)+1)}
	for i := range lo {
		if !tk.Tick() {
			return nil, tk.Err()
		}
		v.AscendRange(tk, lo[i], hi[i], func(k K, val V) bool {
			r.Keys = append(r.Keys, k)
			r.Vals = append(r.Vals, val)
			return true
		})
		r.Offsets[i+1] = len(r.Keys)
	}
	if tk.Err() != nil {
		return nil, tk.Err()
	}
	return r, nil
}

// Ascend returns an iterator over the pairs with keys >= lo and, unless
// all, < hi, in key order. It walks v lazily: v must not change while it
// runs (a snapshot).
func (v View[K, V]) Ascend(lo, hi K, all bool) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if !all && lo >= hi {
			return
		}
		v.m.Ascend(lo, func(k K, val V) bool {
			if !all && k >= hi {
				return false
			}
			return yield(k, val)
		})
	}
}

// Check verifies that the pairs are in strictly increasing key order and
// that the map counts them right.
func (v View[K, V]) Check(ctx context.Context) error {
	tk := NewTicker(ctx)
	var prev K
	n, bad := 0, false
	v.m.Scan(func(k K, _ V) bool {
		if !tk.Tick() {
			return false
		}
		if n > 0 && k <= prev {
			bad = true
			return false
		}
		prev, n = k, n+1
		return true
	})
	if tk.Err() != nil {
		return tk.Err()
	}
	if bad || n != v.m.Len() {
		return fmt.Errorf("the Go B-tree is out of order")
	}
	return nil
}
